"""Small indexes made by the tests themselves."""

from __future__ import annotations

import numpy as np

from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint
from ragtui.core.ingest.publish import IndexLock, encode_index, publish


def make_records(docs: dict[str, list[str]]) -> list[ChunkRecord]:
    records = []
    for doc_id in sorted(docs, key=lambda d: d.encode("utf-8")):
        for k, text in enumerate(docs[doc_id]):
            records.append(
                ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, text, max(1, len(text.split())), fingerprint(text))
            )
    return records


def random_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def make_meta(index_id: str, n: int, dim: int, created_at: str = "2026-01-01T00:00:00Z") -> IndexMeta:
    return IndexMeta(index_id, created_at, n, dim, "test-model", "test-tok", 256, 32)


def build(artifacts, index_id: str, docs: dict[str, list[str]], dim: int = 8, seed: int = 0):
    records = make_records(docs)
    vectors = random_vectors(len(records), dim, seed)
    files = encode_index(make_meta(index_id, len(records), dim), records, vectors)
    with IndexLock(artifacts, index_id):
        return publish(artifacts, index_id, files), records, vectors
