"""The four files of an index (spec/index-format.md): encode them, and read them back validated.

Reading is all-or-nothing: ``read_index`` either returns a complete,
cross-checked ``IndexData`` or raises ``IndexFormatError`` naming the file and
the problem. It never returns part of an index.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import mmap
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragtui.core.bm25 import BM25Index
from ragtui.core.errors import IndexFormatError, IndexMissingError, StorageError

__all__ = [
    "FILES",
    "ChunkRecord",
    "IndexData",
    "IndexMeta",
    "encode_docs",
    "encode_meta",
    "encode_vectors",
    "fingerprint",
    "read_index",
]

META, DOCS, VECTORS, BM25 = "meta.json", "docs.jsonl", "vectors.f32", "bm25.idx"
FILES = (META, DOCS, VECTORS, BM25)
_DOC_KEYS = ("chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint")
_META_KEYS = ("index_id", "created_at", "n_chunks", "dim", "embedding_model", "tokenizer", "chunker", "bm25")


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

    def to_json(self) -> dict:
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

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in _DOC_KEYS}


def encode_meta(meta: IndexMeta) -> bytes:
    return (json.dumps(meta.to_json(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def encode_docs(records: Iterable[ChunkRecord]) -> bytes:
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    return "".join(dumps(r.to_json()) + "\n" for r in records).encode("utf-8")


def encode_vectors(vectors: np.ndarray) -> bytes:
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()


@dataclass(frozen=True, eq=False)
class IndexData:
    """A complete, validated index as read from one generation on disk."""

    path: Path
    """The directory as given (it may be a link to the generation)."""
    generation: str
    """Identity of the generation read (the resolved directory and meta.json's inode)."""
    meta: IndexMeta
    records: Sequence[ChunkRecord]
    vectors: np.ndarray
    """(n_chunks, dim) float32, read-only, memory-mapped when non-empty."""
    bm25: BM25Index
    stats: dict = field(default_factory=dict)

    @property
    def n_chunks(self) -> int:
        return self.meta.n_chunks


def read_index(index_dir: str | os.PathLike) -> IndexData:
    """Read and validate the index in ``index_dir``.

    The directory is resolved once and all four files are opened from that
    one generation, so a publish that happens meanwhile cannot mix old and new
    files. Raises ``IndexMissingError`` when there is no index there and
    ``IndexFormatError`` when a file breaks the contract.
    """
    path = Path(index_dir)
    for _attempt in range(8):
        real = os.path.realpath(path)
        try:
            dir_fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            if os.path.realpath(path) != real:
                continue  # the link moved to a new generation while we looked
            raise IndexMissingError(
                f"no index at {path}: run `ragtui ingest FOLDER` to build one"
            ) from None
        except NotADirectoryError:
            raise IndexMissingError(f"{path} is not an index directory") from None
        except OSError as e:
            raise StorageError(f"cannot open {path}: {e.strerror}") from None
        try:
            files = _open_all(dir_fd, real)
        except FileNotFoundError as e:
            if os.path.realpath(path) != real:
                continue
            missing = e.filename or "a file"
            present = [n for n in FILES if os.path.exists(os.path.join(real, n))]
            if not present:
                raise IndexMissingError(f"no index at {path}: run `ragtui ingest FOLDER` to build one") from None
            raise IndexFormatError(os.path.join(path, missing), "missing (an index needs all four files)") from None
        finally:
            os.close(dir_fd)
        try:
            return _parse(path, real, files)
        finally:
            for f in files.values():
                f.close()
    raise StorageError(f"{path} kept changing while being opened; try again")


def _open_all(dir_fd: int, real: str) -> dict:
    files = {}
    try:
        for name in FILES:
            try:
                fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
            except FileNotFoundError as e:
                e.filename = name
                raise
            except OSError as e:
                raise StorageError(f"cannot read {os.path.join(real, name)}: {e.strerror}") from None
            files[name] = os.fdopen(fd, "rb")
    except BaseException:
        for f in files.values():
            f.close()
        raise
    return files


def _parse(path: Path, real: str, files: dict) -> IndexData:
    def where(name: str) -> str:
        return str(path / name)

    meta = _parse_meta(files[META].read(), where(META), path.name)
    records = _parse_docs(files[DOCS].read(), where(DOCS), meta)
    vectors = _map_vectors(files[VECTORS], where(VECTORS), meta)
    bm25 = BM25Index.decode(files[BM25].read(), meta.k1, meta.b, where(BM25))
    if bm25.n_docs != meta.n_chunks:
        raise IndexFormatError(where(BM25), f"n_docs is {bm25.n_docs}, but meta.json says n_chunks {meta.n_chunks}")
    st = os.fstat(files[META].fileno())
    return IndexData(
        path=path,
        generation=f"{real}:{st.st_ino}:{st.st_mtime_ns}",
        meta=meta,
        records=records,
        vectors=vectors,
        bm25=bm25,
    )


def _parse_meta(raw: bytes, where: str, dir_name: str) -> IndexMeta:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IndexFormatError(where, f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise IndexFormatError(where, "is not a JSON object")
    missing = [k for k in _META_KEYS if k not in obj]
    if missing:
        raise IndexFormatError(where, f"missing field(s): {', '.join(missing)}")

    def need(value, kind, name):
        if kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise IndexFormatError(where, f"{name} has the wrong type ({value!r})")
        return value

    chunker = need(obj["chunker"], dict, "chunker")
    bm25 = need(obj["bm25"], dict, "bm25")
    meta = IndexMeta(
        index_id=need(obj["index_id"], str, "index_id"),
        created_at=need(obj["created_at"], str, "created_at"),
        n_chunks=need(obj["n_chunks"], int, "n_chunks"),
        dim=need(obj["dim"], int, "dim"),
        embedding_model=need(obj["embedding_model"], str, "embedding_model"),
        tokenizer=need(obj["tokenizer"], str, "tokenizer"),
        max_tokens=need(chunker.get("max_tokens"), int, "chunker.max_tokens"),
        overlap=need(chunker.get("overlap"), int, "chunker.overlap"),
        k1=float(need(bm25.get("k1"), float, "bm25.k1")),
        b=float(need(bm25.get("b"), float, "bm25.b")),
    )
    if meta.n_chunks < 0 or meta.dim < 1 or meta.max_tokens < 1 or meta.overlap < 0:
        raise IndexFormatError(where, "n_chunks, dim, max_tokens or overlap is out of range")
    if meta.index_id != dir_name:
        raise IndexFormatError(where, f"index_id {meta.index_id!r} is not the directory name {dir_name!r}")
    return meta


def _parse_docs(raw: bytes, where: str, meta: IndexMeta) -> list[ChunkRecord]:
    if raw and not raw.endswith(b"\n"):
        raise IndexFormatError(where, "the last line does not end in a newline (truncated?)")
    lines = raw.split(b"\n")[:-1] if raw else []
    if len(lines) != meta.n_chunks:
        raise IndexFormatError(where, f"has {len(lines)} lines, but meta.json says n_chunks {meta.n_chunks}")
    try:
        objs = json.loads(b"[" + b",".join(lines) + b"]") if lines else []
        if len(objs) != len(lines):
            raise ValueError("line count")
    except (ValueError, UnicodeDecodeError):
        objs = []
        for i, line in enumerate(lines, 1):
            try:
                objs.append(json.loads(line))
            except (ValueError, UnicodeDecodeError) as e:
                raise IndexFormatError(where, f"line {i} is not valid JSON ({e})") from None
        raise IndexFormatError(where, "a line holds more than one JSON value")
    records = []
    prev_doc = None
    next_k = 0
    for i, obj in enumerate(objs):
        line = i + 1
        if not isinstance(obj, dict) or any(k not in obj for k in _DOC_KEYS):
            raise IndexFormatError(where, f"line {line} lacks one of the fields {', '.join(_DOC_KEYS)}")
        chunk_id, doc_id, text, n_tokens = obj["chunk_id"], obj["doc_id"], obj["text"], obj["n_tokens"]
        if not all(isinstance(obj[k], str) for k in ("chunk_id", "doc_id", "source", "uri", "text", "fingerprint")):
            raise IndexFormatError(where, f"line {line}: a text field has the wrong type")
        if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or not 1 <= n_tokens <= meta.max_tokens:
            raise IndexFormatError(where, f"line {line}: n_tokens {n_tokens!r} is not in 1..{meta.max_tokens}")
        if doc_id != prev_doc:
            if prev_doc is not None and doc_id.encode("utf-8") <= prev_doc.encode("utf-8"):
                raise IndexFormatError(
                    where, f"line {line}: documents are out of order or not contiguous ({doc_id!r} after {prev_doc!r})"
                )
            prev_doc, next_k = doc_id, 0
        if chunk_id != f"{doc_id}#{next_k}":
            raise IndexFormatError(where, f"line {line}: chunk_id {chunk_id!r} should be {doc_id + '#' + str(next_k)!r}")
        next_k += 1
        records.append(
            ChunkRecord(chunk_id, doc_id, obj["source"], obj["uri"], text, n_tokens, obj["fingerprint"])
        )
    return records


def _map_vectors(f, where: str, meta: IndexMeta) -> np.ndarray:
    size = os.fstat(f.fileno()).st_size
    expected = meta.n_chunks * meta.dim * 4
    if size != expected:
        raise IndexFormatError(
            where, f"is {size} bytes, but n_chunks {meta.n_chunks} x dim {meta.dim} x 4 needs {expected}"
        )
    if size == 0:
        return np.zeros((0, meta.dim), dtype=np.float32)
    try:
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    except OSError as e:
        if e.errno == errno.ENOMEM:
            raise StorageError(f"cannot map {where}: out of memory") from None
        raise StorageError(f"cannot map {where}: {e.strerror}") from None
    vectors = np.frombuffer(mm, dtype="<f4").reshape(meta.n_chunks, meta.dim)
    # Check finiteness in blocks so a large file is not copied whole.
    block = max(1, (1 << 24) // (4 * meta.dim))
    for lo in range(0, meta.n_chunks, block):
        part = vectors[lo : lo + block]
        if not np.isfinite(part).all():
            bad = lo + int(np.flatnonzero(~np.isfinite(part).all(axis=1))[0])
            raise IndexFormatError(where, f"row {bad} holds a non-finite value")
    return vectors
