"""The one façade for search: ``Retriever.open(index_dir)``, ``search``, ``reload``.

A Retriever holds one validated generation of an index. ``search`` never
mixes generations: ``reload`` swaps in a new ``IndexData`` (and drops the IVF
lists built for the old one) in a single assignment.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragtui.core.errors import ModelMismatchError, UsageError
from ragtui.core.index_format import IndexData, generation_of, read_index

__all__ = ["MODES", "Hit", "Retriever"]

MODES = ("flat", "ivf", "bm25", "hybrid")


@dataclass(frozen=True)
class Hit:
    """One ranked chunk. ``rank`` counts from 1; ``row`` is the chunk number."""

    rank: int
    score: float
    chunk_id: str
    doc_id: str
    row: int
    text: str


class Retriever:
    """Search one index three ways. Thread-safe for concurrent ``search`` calls."""

    def __init__(
        self, data: IndexData, *, embedder=None, ivf_params=None, cache_dir: Path | None = None, full: bool = False
    ) -> None:
        self._data = data
        self.full = full
        self.embedder = embedder
        self.ivf_params = ivf_params
        self.cache_dir = cache_dir
        self._ivf = None
        self._ivf_lock = threading.Lock()
        self.last_search_seconds = 0.0

    @classmethod
    def open(
        cls, index_dir: str | os.PathLike, *, embedder=None, ivf_params=None, cache_dir=None, full: bool = False
    ) -> Retriever:
        """Read and validate the index at ``index_dir`` (raises ``RagtuiError`` subclasses).

        ``cache_dir`` (outside the index directory) lets decoded BM25 arrays
        and IVF lists be reused between opens. With ``full=False`` the lines
        of docs.jsonl are checked as they are used; ``verify()`` checks them all.
        """
        data = read_index(index_dir, full=full, cache_dir=cache_dir)
        return cls(data, embedder=embedder, ivf_params=ivf_params, cache_dir=cache_dir, full=full)

    def verify(self) -> None:
        """Check every line of docs.jsonl now (raises ``IndexFormatError``)."""
        self._data.records.verify()

    @property
    def data(self) -> IndexData:
        return self._data

    @property
    def meta(self):
        return self._data.meta

    def reload(self) -> bool:
        """Re-read the index if a new generation was published; return whether it changed."""
        path = self._data.path
        if generation_of(path) == self._data.generation:
            return False
        fresh = read_index(path, full=self.full, cache_dir=self.cache_dir)
        if fresh.generation == self._data.generation:
            return False
        with self._ivf_lock:
            self._data, self._ivf = fresh, None
        return True

    # -- vectors -------------------------------------------------------------

    def query_vector(self, query: str | np.ndarray) -> np.ndarray:
        """The unit float32 query vector for ``query`` (text is embedded with the index's model)."""
        meta = self._data.meta
        if isinstance(query, str):
            if self.embedder is None:
                raise UsageError("vector search needs an embedder or a query vector")
            self.check_embedder(self.embedder)
            # Models trained with a query instruction (bge) embed queries apart from passages.
            embed = getattr(self.embedder, "embed_query", None) or self.embedder.embed
            vec = np.asarray(embed([query]), dtype=np.float32)[0]
        else:
            vec = np.asarray(query, dtype=np.float32).reshape(-1)
        if vec.shape[0] != meta.dim:
            raise ModelMismatchError(f"query vector has dimension {vec.shape[0]}, but the index has dim {meta.dim}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise UsageError("the query vector is zero or not finite")
        return vec / np.float32(norm)

    def check_embedder(self, embedder) -> None:
        """Refuse an embedder whose model or dimension differs from the index's."""
        meta = self._data.meta
        if embedder.model != meta.embedding_model or embedder.dim != meta.dim:
            raise ModelMismatchError(
                f"index {meta.index_id!r} was embedded with {meta.embedding_model!r} (dim {meta.dim}), "
                f"but the configured embedder is {embedder.model!r} (dim {embedder.dim}): "
                "configure that model, or re-ingest the folder with this one"
            )

    def ivf(self):
        """The IVF lists for the current generation, built on first use (and cached)."""
        from ragtui.core.ivf import IVFParams, build_ivf_cached

        with self._ivf_lock:
            if self._ivf is None:
                data = self._data
                params = self.ivf_params or IVFParams()
                self._ivf = build_ivf_cached(
                    data.vectors, data.meta.index_id, params, self.cache_dir, key_material=data.generation
                )
            return self._ivf

    # -- search --------------------------------------------------------------

    def search(self, query: str | np.ndarray, mode: str = "bm25", k: int = 10, **params) -> list[Hit]:
        """Rank chunks for ``query`` with ``mode`` (flat, ivf, bm25, hybrid); at most ``k`` hits.

        Ranking is by descending score, ties by ascending chunk number. BM25
        and hybrid need query text; vector modes take text (embedded with the
        index's model) or a vector of the index's dimension. IVF accepts
        ``nprobe``; hybrid accepts ``fusion`` (rrf, weighted), ``weight``,
        ``rrf_k`` and ``depth``.
        """
        if k < 1:
            raise UsageError(f"k must be at least 1 (got {k})")
        data = self._data
        start = time.perf_counter()
        if mode == "bm25":
            if not isinstance(query, str):
                raise UsageError("bm25 search needs query text")
            rows, scores = data.bm25.search(query, k)
        elif mode == "flat":
            from ragtui.core.flat import flat_search

            rows, scores = flat_search(data.vectors, self.query_vector(query), k)
        elif mode == "ivf":
            vec = self.query_vector(query)
            rows, scores = self.ivf().search(vec, k, nprobe=params.get("nprobe"))
        elif mode == "hybrid":
            rows, scores = self._hybrid(query, k, params)
        else:
            raise UsageError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
        self.last_search_seconds = time.perf_counter() - start
        return self.hits(rows, scores, data)

    def _hybrid(self, query, k: int, params: dict):
        from ragtui.core import fusion
        from ragtui.core.flat import flat_search

        if not isinstance(query, str):
            raise UsageError("hybrid search needs query text")
        data = self._data
        depth = max(k, int(params.get("depth") or fusion.DEFAULT_DEPTH))
        lexical = data.bm25.search(query, depth)
        vector = flat_search(data.vectors, self.query_vector(query), depth)
        return fusion.fuse(
            lexical,
            vector,
            k,
            method=params.get("fusion") or fusion.DEFAULT_FUSION,
            weight=fusion.DEFAULT_WEIGHT if params.get("weight") is None else float(params["weight"]),
            rrf_k=params.get("rrf_k") or fusion.DEFAULT_RRF_K,
        )

    @staticmethod
    def hits(rows, scores, data: IndexData) -> list[Hit]:
        out = []
        for rank, (row, score) in enumerate(zip(rows.tolist(), scores.tolist()), 1):
            rec = data.records[row]
            out.append(Hit(rank, float(score), rec.chunk_id, rec.doc_id, row, rec.text))
        return out
