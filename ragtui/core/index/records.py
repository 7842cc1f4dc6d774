"""What the index's files hold, as values: meta.json (``IndexMeta``), a docs.jsonl line (``ChunkRecord``),
and their encoding (with vectors.f32's). Reading them back validated is ``index_format``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["ChunkRecord", "IndexMeta", "encode_docs", "encode_meta", "encode_vectors", "fingerprint"]

_DOC_KEYS = ("chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint")


def fingerprint(text: str) -> str:
    """Lowercase hex SHA-256 of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class IndexMeta:
    """meta.json, field for field."""

    index_id: str
    created_at: str
    n_chunks: int
    dim: int
    embedding_model: str
    tokenizer: str
    max_tokens: int
    overlap: int
    k1: float = 1.2
    b: float = 0.75

    def to_json(self) -> dict[str, object]:
        return {
            "index_id": self.index_id,
            "created_at": self.created_at,
            "n_chunks": self.n_chunks,
            "dim": self.dim,
            "embedding_model": self.embedding_model,
            "tokenizer": self.tokenizer,
            "chunker": {"max_tokens": self.max_tokens, "overlap": self.overlap},
            "bm25": {"k1": self.k1, "b": self.b},
        }


@dataclass(frozen=True)
class ChunkRecord:
    """One line of docs.jsonl."""

    chunk_id: str
    doc_id: str
    source: str
    uri: str
    text: str
    n_tokens: int
    fingerprint: str

    @property
    def k(self) -> int:
        """The chunk's number within its document."""
        return int(self.chunk_id.rsplit("#", 1)[1])

    def to_json(self) -> dict[str, object]:
        return {key: getattr(self, key) for key in _DOC_KEYS}


def encode_meta(meta: IndexMeta) -> bytes:
    return (json.dumps(meta.to_json(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def encode_docs(records: Iterable[ChunkRecord]) -> bytes:
    # Each line encoded on its own, then the bytes joined: the same bytes as encoding the joined text (UTF-8 of a
    # concatenation is the concatenation), without the whole text as one str, which takes two bytes a
    # character as soon as one line holds a character above U+00FF (four above U+FFFF).
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    return b"".join((dumps(r.to_json()) + "\n").encode("utf-8") for r in records)


def encode_vectors(vectors: np.ndarray) -> bytes:
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()
