"""The one façade for search: ``Retriever.open(index_dir)``, ``search``, ``reload``.

A Retriever holds one validated generation of an index. ``search`` never
mixes generations: it takes the current ``IndexData`` once, at its start, and
every step of it (query vector, BM25, flat or IVF lists, fusion, the hits'
text) uses that one snapshot; ``reload`` swaps in a new ``IndexData`` in a
single assignment, so a search running meanwhile finishes on the generation it
began with. IVF lists are kept per generation: a search that began before a
reload gets the lists of its own generation.

Search parameters are checked before anything runs: an unknown name, or one
that belongs to another mode, is a ``UsageError`` naming the nearest valid one.
"""

from __future__ import annotations

import difflib
import operator
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, SupportsIndex, TypedDict, Unpack

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import ModelMismatchError, QueryError, UsageError
from ragtui.core.index.index_format import IndexData, generation_of, read_index
from ragtui.core.index.records import IndexMeta

if TYPE_CHECKING:
    from ragtui.core.embedders.base import Embedder
    from ragtui.core.search.ivf import IVFIndex, IVFParams

__all__ = [
    "MAX_QUERY_CHARS", "MODES", "PARAMS", "Hit", "Retriever", "SearchParams", "SearchTrace", "check_query", "check_search",
]

MODES = ("flat", "ivf", "bm25", "hybrid")
PARAMS = {"flat": (), "ivf": ("nprobe",), "bm25": (), "hybrid": ("fusion", "weight", "rrf_k", "depth")}
"""The keyword parameters ``Retriever.search`` accepts, per mode."""


class SearchParams(TypedDict, total=False):
    """The keyword parameters of ``Retriever.search`` (``PARAMS`` says which mode takes which).

    The values are still checked at run time (``check_search``): they often come from users.
    """

    nprobe: int | None
    fusion: str | None
    weight: float | None
    rrf_k: float | None
    depth: int | None


def _nearest(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_search(mode: str, params: Mapping[str, object] | None = None) -> None:
    """Raise ``UsageError`` for an unknown ``mode`` or a parameter ``mode`` does not take.

    Cheap and needs no index: callers run it before loading an embedder. A
    parameter given as None counts as not given.
    """
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}{_nearest(str(mode), MODES)}: choose one of {', '.join(MODES)}")
    allowed = PARAMS[mode]
    params = params or {}
    for name, value in params.items():
        if name in allowed:
            continue
        owners = [m for m, names in PARAMS.items() if name in names]
        if owners and value is None:
            continue
        if owners:
            raise UsageError(f"{name} applies to {owners[0]} search, not {mode}")
        takes = f"takes {', '.join(allowed)}" if allowed else "takes no parameters"
        every = sorted({n for names in PARAMS.values() for n in names})
        raise UsageError(f"unknown search parameter {name!r}{_nearest(name, allowed or every)}: {mode} search {takes}")
    if mode == "ivf":
        _whole("nprobe", params.get("nprobe"))
    elif mode == "hybrid":
        from ragtui.core.search import fusion

        fusion.resolve(params.get("fusion"), params.get("weight"), params.get("rrf_k"))
        _whole("depth", params.get("depth"))


def _whole(name: str, value: object) -> int | None:
    """``value`` as an int >= 1, or None when not given (``UsageError`` otherwise)."""
    if value is None:
        return None
    try:
        number = operator.index(value) if isinstance(value, SupportsIndex) else 0
    except TypeError:
        number = 0
    if number < 1:
        raise UsageError(f"{name} must be a whole number of at least 1 (got {value!r})")
    return number

MAX_QUERY_CHARS = 8192
"""The longest query searched, in characters (at most 32 KiB of UTF-8): a query is not a document."""


def check_query(query: str) -> str:
    """Return ``query`` if it can be searched; else raise ``QueryError`` saying why.

    Refused: more than ``MAX_QUERY_CHARS`` characters (embedding and scoring
    cost grows with the length, and an embedding model reads a few thousand
    tokens at most), and text that is not UTF-8 — a lone surrogate, which is
    how Python carries an undecodable byte of a command-line argument. A
    query with no terms (punctuation, NUL, escape sequences) is searched:
    BM25 finds nothing, the vector modes rank by its embedding.
    """
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(query):,} characters long; a query may have at most {MAX_QUERY_CHARS:,}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(query[e.start])
        what = f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"a lone surrogate U+{code:04X}"
        raise QueryError(
            f"the query is not UTF-8 text ({what} at character {e.start + 1}): give it in UTF-8"
        ) from None
    return query


@dataclass(frozen=True)
class Hit:
    """One ranked chunk. ``rank`` counts from 1; ``row`` is the chunk number."""

    rank: int
    score: float
    chunk_id: str
    doc_id: str
    row: int
    text: str


@dataclass
class SearchTrace:
    """What one search computed on its way to the hits, for ``core.search.explain`` (pass one to ``search``).

    Every field is of the search's own snapshot: ``data`` is the generation
    it read, the arms are the rankings it fused, ``probed`` the IVF lists it
    scanned.
    """

    data: IndexData | None = None
    query_vector: np.ndarray | None = None
    """The unit query vector (vector modes)."""
    lexical: tuple[np.ndarray, np.ndarray] | None = None
    """Hybrid: BM25's (rows, scores) at the fusion depth."""
    vector: tuple[np.ndarray, np.ndarray] | None = None
    """Hybrid: flat's (rows, scores) at the fusion depth."""
    fusion: tuple[str, float, float] | None = None
    """Hybrid: (method, weight, rrf_k) as resolved."""
    probed: np.ndarray | None = None
    """IVF: the list numbers probed, best first."""
    ivf: IVFIndex | None = None
    """IVF: the lists searched."""


class Retriever:
    """Search one index three ways. Thread-safe for concurrent ``search`` calls."""

    def __init__(
        self,
        data: IndexData,
        *,
        embedder: Embedder | None = None,
        ivf_params: IVFParams | None = None,
        cache_dir: Path | None = None,
        full: bool = False,
    ) -> None:
        self._data = data
        self.full = full
        self.embedder = embedder
        self.ivf_params = ivf_params
        self.cache_dir = cache_dir
        self._ivf: tuple[IndexData, IVFIndex] | None = None
        """The IVF lists of one generation: (that generation's IndexData, its IVFIndex)."""
        self._ivf_lock = threading.Lock()
        self.last_search_seconds = 0.0

    @classmethod
    def open(
        cls,
        index_dir: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        ivf_params: IVFParams | None = None,
        cache_dir: Path | None = None,
        full: bool = False,
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
    def meta(self) -> IndexMeta:
        return self._data.meta

    def reload(self) -> bool:
        """Re-read the index if a new generation was published; return whether it changed."""
        path = self._data.path
        if generation_of(path) == self._data.generation:
            return False
        fresh = read_index(path, full=self.full, cache_dir=self.cache_dir)
        if fresh.generation == self._data.generation:
            return False
        # No lock: a search running now keeps the generation it took, and an IVF
        # build under way (it holds _ivf_lock) must not hold the reload up. The IVF
        # lists are kept with their generation, so a stale entry is never served.
        self._data = fresh
        self._ivf = None
        return True

    # -- vectors -------------------------------------------------------------

    def query_vector(self, query: str | np.ndarray) -> np.ndarray:
        """The unit float32 query vector for ``query`` (text is embedded with the index's model)."""
        return self._query_vector(query, self._data)

    def _query_vector(self, query: str | np.ndarray, data: IndexData) -> np.ndarray:
        meta = data.meta
        if isinstance(query, str):
            check_query(query)
            if self.embedder is None:
                raise UsageError("vector search needs an embedder or a query vector")
            _check_embedder(self.embedder, meta)
            # Models trained with a query instruction (bge) embed queries apart from passages.
            embed = getattr(self.embedder, "embed_query", None) or self.embedder.embed
            vec: npt.NDArray[np.float32] = np.asarray(embed([query]), dtype=np.float32)[0]
        else:
            vec = np.asarray(query, dtype=np.float32).reshape(-1)
        if vec.shape[0] != meta.dim:
            raise ModelMismatchError(f"query vector has dimension {vec.shape[0]}, but the index has dim {meta.dim}")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise UsageError("the query vector is zero or not finite")
        return vec / np.float32(norm)

    def check_embedder(self, embedder: Embedder) -> None:
        """Refuse an embedder whose model or dimension differs from the index's."""
        _check_embedder(embedder, self._data.meta)

    def ivf(self) -> IVFIndex:
        """The IVF lists for the current generation, built on first use (and cached)."""
        return self._ivf_for(self._data)

    def _ivf_for(self, data: IndexData) -> IVFIndex:
        """The IVF lists of generation ``data``; kept only while ``data`` is the current one."""
        from ragtui.core.search.ivf import IVFParams, build_ivf_cached

        with self._ivf_lock:
            if self._ivf is not None and self._ivf[0] is data:
                return self._ivf[1]
            params = self.ivf_params or IVFParams()
            lists = build_ivf_cached(
                data.vectors, data.meta.index_id, params, self.cache_dir, key_material=data.generation
            )
            if data is self._data:
                self._ivf = (data, lists)
            return lists

    # -- search --------------------------------------------------------------

    def search(
        self, query: str | np.ndarray, mode: str = "bm25", k: int = 10, *, trace: SearchTrace | None = None,
        **params: Unpack[SearchParams],
    ) -> list[Hit]:
        """Rank chunks for ``query`` with ``mode`` (flat, ivf, bm25, hybrid); at most ``k`` hits.

        Ranking is by descending score, ties by ascending chunk number. BM25
        and hybrid need query text; vector modes take text (embedded with the
        index's model) or a vector of the index's dimension. IVF accepts
        ``nprobe``; hybrid accepts ``fusion`` (rrf, weighted), ``weight``,
        ``rrf_k`` and ``depth``. Query text is checked by ``check_query``
        (``QueryError``: over ``MAX_QUERY_CHARS`` characters, or not UTF-8).
        With ``trace``, what the search computed is recorded there (see ``SearchTrace``).
        """
        check_search(mode, params)
        if k < 1:
            raise UsageError(f"k must be at least 1 (got {k})")
        if isinstance(query, str):
            check_query(query)
        data = self._data  # the one generation this search reads, start to end
        if trace is not None:
            trace.data = data
        start = time.perf_counter()
        if mode == "bm25":
            if not isinstance(query, str):
                raise UsageError("bm25 search needs query text")
            rows, scores = data.bm25.search(query, k)
        elif mode == "flat":
            from ragtui.core.search.flat import flat_search

            vec = self._query_vector(query, data)
            rows, scores = flat_search(data.vectors, vec, k)
            if trace is not None:
                trace.query_vector = vec
        elif mode == "ivf":
            vec = self._query_vector(query, data)
            lists = self._ivf_for(data)
            nprobe = params.get("nprobe")
            rows, scores = lists.search(vec, k, nprobe=nprobe)
            if trace is not None:
                trace.query_vector, trace.ivf = vec, lists
                trace.probed = lists.probe(vec, min(nprobe or lists.params.nprobe, lists.nlist))
        else:
            rows, scores = self._hybrid(data, query, k, params, trace)
        self.last_search_seconds = time.perf_counter() - start
        return self.hits(rows, scores, data)

    def _hybrid(
        self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams, trace: SearchTrace | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        from ragtui.core.search import fusion
        from ragtui.core.search.flat import flat_search

        if not isinstance(query, str):
            raise UsageError("hybrid search needs query text")
        depth = max(k, _whole("depth", params.get("depth")) or fusion.DEFAULT_DEPTH)
        lexical = data.bm25.search(query, depth)
        vec = self._query_vector(query, data)
        vector = flat_search(data.vectors, vec, depth)
        if trace is not None:
            trace.query_vector, trace.lexical, trace.vector = vec, lexical, vector
            trace.fusion = fusion.resolve(params.get("fusion"), params.get("weight"), params.get("rrf_k"))
        return fusion.fuse(
            lexical,
            vector,
            k,
            method=params.get("fusion"),
            weight=params.get("weight"),
            rrf_k=params.get("rrf_k"),
        )

    @staticmethod
    def hits(rows: np.ndarray, scores: np.ndarray, data: IndexData) -> list[Hit]:
        out = []
        for rank, (row, score) in enumerate(zip(rows.tolist(), scores.tolist()), 1):
            rec = data.records[row]
            out.append(Hit(rank, float(score), rec.chunk_id, rec.doc_id, row, rec.text))
        return out


def _check_embedder(embedder: Embedder, meta: IndexMeta) -> None:
    if embedder.model != meta.embedding_model or embedder.dim != meta.dim:
        raise ModelMismatchError(
            f"index {meta.index_id!r} was embedded with {meta.embedding_model!r} (dim {meta.dim}), "
            f"but the configured embedder is {embedder.model!r} (dim {embedder.dim}): "
            "configure that model, or re-ingest the folder with this one"
        )
