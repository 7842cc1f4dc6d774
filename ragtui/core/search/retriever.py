"""The one façade for search: ``Retriever.open(index_dir)``, ``search``, ``reload``.

A Retriever holds one validated generation of an index, and reads the next
one through the overlay a watch agent writes before publishing it, when there
is a sound one (``overlaid.OverlaidData``: ``data`` is then the next
generation, ``published`` the four files). ``search`` never
mixes generations: it takes the current ``IndexData`` once, at its start, and
every step of it (query vector, BM25, flat or IVF lists, fusion, the hits'
text) uses that one snapshot; ``reload`` swaps in a new ``IndexData`` in a
single assignment, so a search running meanwhile finishes on the generation it
began with. IVF lists are kept per generation: a search that began before a
reload gets the lists of its own generation.

Search parameters are checked before anything runs: an unknown name, or one
that belongs to another mode, is a ``UsageError`` naming the nearest valid one.

Over 500 lines on purpose: the one-snapshot rule above is a property of every
mode's path through ``Retriever``; with all of them in one class, a reviewer
can check that each step takes the snapshot and never ``self._data``.
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
from ragtui.core.index.release import release_later
from ragtui.core.search.modes import COMMON, LEXICAL, LEXICAL_MODES, MODES, PARAMS, mode_spec
from ragtui.core.search.overlaid import Ignored, OverlaidData
from ragtui.core.search.query import ParsedQuery, parse_query

if TYPE_CHECKING:
    from ragtui.core.embedders.base import Embedder
    from ragtui.core.search.docaware import DocLexical
    from ragtui.core.search.ivf import IVFIndex, IVFParams
    from ragtui.core.search.layered import LayeredVectors
    from ragtui.core.search.quant import QuantizedVectors
    from ragtui.core.search.query_plan import QueryPlan
    from ragtui.core.search.stemmed import StemLexical

__all__ = [
    "COMMON", "EMPTY_QUERY", "LEXICAL", "MAX_QUERY_CHARS", "MODES", "PARAMS", "VECTOR_SCANS", "Hit", "Hits",
    "Retriever", "SearchParams", "SearchTrace", "check_floor", "check_query", "check_search",
]

VECTOR_SCANS = ("f32", "i8")
"""How vector modes score rows: float32 directly (the default: measured faster, bench/bench_int8.py), or an
int8 copy first with the candidates re-scored exactly in float32 (a quarter of the bytes read per query; the same answers)."""


class SearchParams(TypedDict, total=False):
    """The keyword parameters of ``Retriever.search`` (``PARAMS`` says which mode takes which).

    The values are still checked at run time (``check_search``): they often come from users.
    """

    nprobe: int | None
    fusion: str | None
    weight: float | None
    rrf_k: float | None
    depth: int | None
    lexical: str | None
    chunk_weight: float | None
    mmr: float | None
    min_score: float | None
    merge: bool | None


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
        if name in allowed or name in COMMON:
            continue
        owners = [m for m, names in PARAMS.items() if name in names]
        if owners and value is None:
            continue
        if owners:
            raise UsageError(f"{name} applies to {owners[0]} search, not {mode}")
        takes = f"takes {', '.join(allowed)}" if allowed else "takes no parameters"
        every = sorted({n for names in PARAMS.values() for n in names} | set(COMMON))
        raise UsageError(f"unknown search parameter {name!r}{_nearest(name, allowed or every)}: {mode} search {takes}")
    if mode == "ivf":
        _whole("nprobe", params.get("nprobe"))
    elif mode == "hybrid":
        from ragtui.core.search import fusion

        fusion.resolve(params.get("fusion"), params.get("weight"), params.get("rrf_k"))
        _whole("depth", params.get("depth"))
        lexical = params.get("lexical")
        if lexical is not None and lexical not in LEXICAL:
            raise UsageError(
                f"unknown lexical ranking {lexical!r}{_nearest(str(lexical), LEXICAL)}: choose one of {', '.join(LEXICAL)}"
            )
        if lexical == "bm25" and params.get("chunk_weight") is not None:
            raise UsageError("chunk_weight applies to the bm25doc lexical ranking (and bm25stem), not bm25")
    if mode in ("bm25doc", "bm25stem", "hybrid"):
        from ragtui.core.search.docaware import check_chunk_weight

        check_chunk_weight(params.get("chunk_weight"))
    from ragtui.core.search.ranking_options import check_option

    for name in COMMON + (("depth",) if mode == "hybrid" else ()):
        if params.get(name) is not None:
            check_option(name, params[name])
    check_floor(mode, params.get("min_score"))


def check_floor(mode: str, floor: object, label: str = "min_score") -> None:
    """Refuse a ``min_score`` outside the range of the score ``mode`` compares it with (``UsageError``)."""
    spec = mode_spec(mode)
    if floor is None or spec is None or isinstance(floor, bool) or not isinstance(floor, int | float):
        return
    lo, hi = spec.score_range
    if not lo <= floor <= hi:
        upper = f"to {hi:g}" if hi < 1e12 else "or more"
        raise UsageError(f"{label} {floor:g} is outside what {mode} scores: {spec.score_text} "
                         f"(give a floor from {lo:g} {upper})")


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

EMPTY_QUERY = "the query is empty: give the words to search for, e.g. 'tar archive'"
"""The one message for an empty or blank query, in every front end (``UsageError``, exit 2)."""

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
    rows: tuple[int, ...] = ()
    """With ``merge``: the chunk rows joined into this hit, in document order (``text`` is their
    union); empty for a hit of one chunk."""


class Hits(list[Hit]):
    """The hits of one search, a list, with what the search understood of its query.

    ``query``: the ``ParsedQuery`` searched (None for a query vector);
    ``expansions``: each prefix's term -> the index terms ranked for it;
    ``notes``: what a user should know (a prefix cut to ``MAX_EXPANSIONS`` terms, or matching none, a query
    searched as plain text); ``seconds``: how long the search took.
    """

    def __init__(self, hits: Iterable[Hit] = (), *, query: ParsedQuery | None = None,
                 expansions: Mapping[str, tuple[str, ...]] | None = None, notes: Iterable[str] = (),
                 seconds: float = 0.0, stages: Iterable[str] = ()) -> None:
        super().__init__(hits)
        self.query = query
        self.expansions = dict(expansions or {})
        self.notes = tuple(notes)
        self.stages = tuple(stages)
        """What each step after the ranking did, in order (a score floor, MMR, merging), one line each."""
        self.seconds = seconds
        """Wall seconds the search took (this search's own: nothing is kept on the ``Retriever``)."""

    def describe(self) -> str:
        """The parsed query, one line per part (``ParsedQuery.describe`` with this search's expansions)."""
        return self.query.describe(self.expansions) if self.query is not None else "a query vector"


@dataclass
class SearchTrace:
    """What one search computed on its way to the hits, for ``core.search.explain`` (pass one to ``search``).

    Every field is of the search's own snapshot: ``data`` is the generation
    it read, the arms are the rankings it fused, ``probed`` the IVF lists it
    scanned.
    """

    data: IndexData | OverlaidData | None = None
    query_vector: np.ndarray | None = None
    """The unit query vector (vector modes)."""
    lexical: tuple[np.ndarray, np.ndarray] | None = None
    """Hybrid: BM25's (rows, scores) at the fusion depth."""
    vector: tuple[np.ndarray, np.ndarray] | None = None
    """Hybrid: flat's (rows, scores) at the fusion depth."""
    fusion: tuple[str, float, float] | None = None
    """Hybrid: (method, weight, rrf_k) as resolved."""
    arm: str | None = None
    """Hybrid: the lexical ranking fused (the caller's, else the index's embedder's default)."""
    probed: np.ndarray | None = None
    """IVF: the list numbers probed, best first."""
    ivf: IVFIndex | None = None
    """IVF: the lists searched."""
    stages: tuple[str, ...] = ()
    """What each step after the ranking did (``Hits.stages``)."""


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
        vector_scan: str = "f32",
    ) -> None:
        if vector_scan not in VECTOR_SCANS:
            raise UsageError(f"vector scan must be one of {', '.join(VECTOR_SCANS)} (got {vector_scan!r})")
        self.vector_scan = vector_scan
        """"f32" scores vectors.f32 directly; "i8" scans an int8 copy first and re-scores exactly (same answers)."""
        self._quant: tuple[IndexData, QuantizedVectors] | None = None
        self._data = data
        self.full = full
        self.embedder = embedder
        self.ivf_params = ivf_params
        self.cache_dir = cache_dir
        self._ivf: tuple[IndexData, IVFIndex] | None = None
        """The IVF lists of one generation: (that generation's IndexData, its IVFIndex)."""
        self._ivf_lock = threading.Lock()
        self._doclex: tuple[IndexData, DocLexical] | None = None
        """The document-level BM25 of one generation (bm25doc and hybrid), built on first use."""
        self._doclex_lock = threading.Lock()
        self._stemlex: tuple[IndexData, StemLexical] | None = None
        """The stemmed BM25 of one generation (bm25stem, hybrid over it), built or read from the cache on first use."""
        self._stemlex_lock = threading.Lock()
        """Its own lock: a build (seconds at 100k chunks) does not hold up bm25doc searches."""
        self._parent: Retriever | None = None
        """For a ``snapshot``: the retriever whose caches (IVF lists, int8 copy, document and stemmed BM25) it uses."""
        self._overlay: OverlaidData | Ignored | None = None
        """The generation's overlay as last looked at (``overlaid.overlaid``); None: it has none."""
        self._view: IndexData | OverlaidData = data
        """What searches read: the generation, or the next one through its overlay (``layer``)."""

    @classmethod
    def open(
        cls,
        index_dir: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        ivf_params: IVFParams | None = None,
        cache_dir: Path | None = None,
        full: bool = False,
        vector_scan: str = "f32",
    ) -> Retriever:
        """Read and validate the index at ``index_dir`` (raises ``RagtuiError`` subclasses).

        ``cache_dir`` (outside the index directory) lets decoded BM25 arrays
        and IVF lists be reused between opens. With ``full=False`` the lines
        of docs.jsonl are checked as they are used; ``verify()`` checks them all.
        """
        data = read_index(index_dir, full=full, cache_dir=cache_dir)
        opened = cls(data, embedder=embedder, ivf_params=ivf_params, cache_dir=cache_dir, full=full,
                     vector_scan=vector_scan)
        opened.layer()
        return opened

    def verify(self) -> None:
        """Check every line of docs.jsonl now (raises ``IndexFormatError``)."""
        self._data.records.verify()

    @property
    def data(self) -> IndexData | OverlaidData:
        """What searches read now: the generation, or the next one through the overlay a watch agent wrote
        before publishing it (``overlaid.OverlaidData``: its rows are the next generation's)."""
        return self._view

    @property
    def published(self) -> IndexData:
        """The generation as published (its four files), whatever overlay layers on it."""
        return self._data

    @property
    def meta(self) -> IndexMeta:
        return self._view.meta

    def layer(self) -> bool:
        """Read the generation's overlay into what searches read (``data``), when it has one that is new since
        the last look; return whether ``data`` changed. Cheap when nothing did (an ``lstat``)."""
        from ragtui.core.search.overlaid import overlaid

        if self._parent is not None:
            return False
        base = self._data
        got = overlaid(base, self._overlay, doclex=lambda: self._doclex_for(base),
                       stemlex=lambda: self._stemlex_for(base), ivf=lambda: self._ivf_for(base))
        if got is self._overlay:
            return False
        self._overlay = got
        view = got if isinstance(got, OverlaidData) else base
        if view is self._view:
            return False
        self._view = view
        return True

    def snapshot(self) -> Retriever:
        """A retriever fixed on the current generation: every search and every ``data`` read through it
        sees that one generation (``reload`` does nothing on it), so a request that searches, then
        packs or cites, never mixes generations. It shares this retriever's embedder and caches."""
        pinned = Retriever(self._data, embedder=self.embedder, ivf_params=self.ivf_params, cache_dir=self.cache_dir,
                           full=self.full, vector_scan=self.vector_scan)
        pinned._parent = self if self._parent is None else self._parent
        pinned._overlay, pinned._view = self._overlay, self._view
        return pinned

    def built_ivf(self) -> IVFIndex | None:
        """The IVF lists of the current generation when they are built already (None: not yet); cheap."""
        owner = self if self._parent is None else self._parent
        held = owner._ivf
        return held[1] if held is not None and held[0] is self._data else None

    def reload(self) -> bool:
        """Re-read the index if a new generation was published; return whether it changed (never for a
        ``snapshot``)."""
        if self._parent is not None:
            return False
        path = self._data.path
        if generation_of(path) == self._data.generation:
            return self.layer()
        fresh = read_index(path, full=self.full, cache_dir=self.cache_dir)
        if fresh.generation == self._data.generation:
            return self.layer()
        # No lock: a search running now keeps the generation it took, and an IVF
        # build under way (it holds _ivf_lock) must not hold the reload up. The IVF
        # lists are kept with their generation, so a stale entry is never served.
        old = (self._data, self._view, self._overlay, self._ivf, self._quant, self._doclex, self._stemlex)
        self._data = self._view = fresh
        self._overlay = None
        self._ivf = None
        self._quant = None
        self._doclex = None
        self._stemlex = None
        self.layer()
        # Unmapping the old generation's files (removed by its writer) frees their pages: not on this path.
        release_later(*old)
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
        from ragtui.core.index.arraycache import mark_used
        from ragtui.core.search.ivf import IVFParams, calibration_text
        from ragtui.core.search.ivf_cache import build_ivf_cached, entry_name, generation_key

        if self._parent is not None:
            return self._parent._ivf_for(data)
        with self._ivf_lock:
            if self._ivf is not None and self._ivf[0] is data:
                return self._ivf[1]
            # A long-running writer makes the next generations' lists ahead of readers from now on.
            mark_used(self.cache_dir, "ivf", entry_name(data.meta.index_id))
            params = self.ivf_params or IVFParams()
            # The calibration embeds short spans of the chunks with the index's own embedder (when there is one).
            lists = build_ivf_cached(
                data.vectors, data.meta.index_id, params, self.cache_dir, key_material=data.generation,
                texts=calibration_text(data, self.embedder), generation_key=generation_key(data),
            )
            if data is self._data:
                self._ivf = (data, lists)
            return lists

    def _quant_for(self, data: IndexData) -> QuantizedVectors:
        """The int8 copy of generation ``data``'s vectors, built on first use (kept while it is current)."""
        from ragtui.core.search.quant import QuantizedVectors

        if self._parent is not None:
            return self._parent._quant_for(data)
        with self._ivf_lock:
            if self._quant is not None and self._quant[0] is data:
                return self._quant[1]
            quant = QuantizedVectors.build(data.vectors)
            if data is self._data:
                self._quant = (data, quant)
            return quant

    def _flat(self, data: IndexData, vec: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        from ragtui.core.search.flat import flat_search

        if self.vector_scan == "i8":
            return self._quant_for(data).search(vec, k)
        return flat_search(data.vectors, vec, k)

    def doc_lexical(self) -> DocLexical:
        """The document-level BM25 of the current generation (built on first use)."""
        return self._doclex_for(self._data)

    def _doclex_for(self, data: IndexData) -> DocLexical:
        from ragtui.core.search.docaware import DocLexical, doc_groups_of

        if self._parent is not None:
            return self._parent._doclex_for(data)
        with self._doclex_lock:
            if self._doclex is not None and self._doclex[0] is data:
                return self._doclex[1]
            # Mapped from the entry the writer stored for this generation when there is one, else built (and stored).
            built = DocLexical.load(data.bm25, lambda: doc_groups_of(data.records), self.cache_dir,
                                    data.meta.index_id, _str_or_none(data.stats.get("bm25_key")),
                                    _str_or_none(data.stats.get("doclex_key")))
            if data is self._data:
                self._doclex = (data, built)
            return built

    def stem_lexical(self) -> StemLexical:
        """The stemmed BM25 of the current generation (built, or read from ``cache_dir``, on first use)."""
        return self._stemlex_for(self._data)

    def _stemlex_for(self, data: IndexData) -> StemLexical:
        from ragtui.core.index.arraycache import mark_used
        from ragtui.core.search.stemmed import STEM_KIND, StemLexical

        if self._parent is not None:
            return self._parent._stemlex_for(data)
        doclex = self._doclex_for(data)
        with self._stemlex_lock:
            if self._stemlex is not None and self._stemlex[0] is data:
                return self._stemlex[1]
            # A long-running writer makes the next generations' stemmed arm ahead of readers from now on.
            mark_used(self.cache_dir, STEM_KIND, data.meta.index_id)
            built = StemLexical.load(data.bm25, doclex.doc_of_row, self.cache_dir, data.meta.index_id,
                                     source_key=doclex.key)
            if data is self._data:
                self._stemlex = (data, built)
            return built

    # -- search --------------------------------------------------------------

    def search(
        self, query: str | np.ndarray | ParsedQuery, mode: str = "bm25", k: int = 10, *,
        trace: SearchTrace | None = None, strict: bool = False, **params: Unpack[SearchParams],
    ) -> Hits:
        """Rank chunks for ``query`` with ``mode`` (flat, ivf, bm25, bm25doc, bm25stem, hybrid); at most ``k`` hits.

        Ranking is by descending score, ties by ascending chunk number. The
        lexical modes and hybrid need query text; vector modes take text (embedded with the
        index's model) or a vector of the index's dimension. IVF accepts
        ``nprobe``; bm25doc accepts ``chunk_weight`` (its document's BM25 plus
        chunk_weight times the chunk's own, spec/ranking.md), and so does
        bm25stem (the same over stemmed terms, ``stemmed.StemLexical``); hybrid
        accepts ``fusion`` (rrf, weighted, zscore), ``weight``, ``rrf_k``, ``depth``
        (candidates fused from each list, whatever ``k``), ``lexical`` (bm25doc,
        bm25 or bm25stem) and ``chunk_weight``; what hybrid's caller leaves unset
        comes from the fit for the index's embedder (``fusion_fit``). Every mode accepts ``mmr``
        (0..1; 1 is off), ``min_score`` (a floor, ``postrank.floor_scores``)
        and ``merge`` (neighbouring chunks of one document become one hit).
        Query text is checked by ``check_query`` (``QueryError``: over
        ``MAX_QUERY_CHARS`` characters, or not UTF-8)
        and parsed by ``parse_query`` (spec/query-syntax.md: phrases, prefixes,
        exclusions, OR, path/ext/lang filters): text that cannot be read as
        syntax is searched as plain text with a note (``Hits.notes``), or with
        ``strict`` refused with ``QueryError`` naming the column of the mistake.
        An empty or blank query is a ``UsageError``. A ``ParsedQuery`` is
        searched as given (``query.literal`` searches text with no syntax). Plain text is searched exactly as it
        always was. The returned ``Hits`` carry the parsed query. With ``trace``,
        what the search computed is recorded there (see ``SearchTrace``).
        """
        check_search(mode, params)
        if k < 1:
            raise UsageError(f"k must be at least 1 (got {k})")
        parsed = None
        if isinstance(query, ParsedQuery):
            parsed, query = query, check_query(query.text)
        elif isinstance(query, str):
            parsed = parse_query(check_query(query), strict=strict)
        if isinstance(query, str) and not query.strip():
            raise UsageError(EMPTY_QUERY)
        data = self._view  # the one generation this search reads, start to end
        if trace is not None:
            trace.data = data
        if mode == "hybrid":
            from ragtui.core.search.fusion_fit import fill_hybrid

            # What the caller left unset: the fit for this index's embedder (fusion_fit.FITTED).
            params = fill_hybrid(data.meta.embedding_model, dict(params))  # type: ignore[assignment]
        start = time.perf_counter()
        plan = None
        if parsed is not None and not parsed.plain:
            from ragtui.core.search.query_plan import QueryPlan

            if isinstance(data, OverlaidData):
                plan = data.layered.bind(parsed, cache_dir=self.cache_dir)
            else:
                plan = QueryPlan.bind(parsed, data, cache_dir=self.cache_dir)
            query = plan.search_text
        lam, merge, floor = params.get("mmr"), bool(params.get("merge")), params.get("min_score")
        diverse = lam is not None and lam < 1.0
        # MMR and merging choose among more candidates than they return.
        fetch = min(max(1, data.n_chunks), max(4 * k, k + 20)) if (diverse or merge) else k
        if isinstance(data, OverlaidData):
            rows, scores = self._rank_overlaid(data, query, mode, fetch, params, plan)
        else:
            rows, scores = self._rank(data, query, mode, fetch, params, plan, trace)
        stages: list[str] = []
        if floor is not None:
            from ragtui.core.search import fusion
            from ragtui.core.search.postrank import floor_scores

            method = rrf_k = None
            if mode == "hybrid":
                method, _, rrf_k = fusion.resolve(params.get("fusion"), params.get("weight"), params.get("rrf_k"))
            keep = floor_scores(mode, scores, method, rrf_k) >= float(floor)
            dropped = int(rows.size - np.count_nonzero(keep))
            rows, scores = rows[keep], scores[keep]
            stages.append(f"min_score {float(floor):g}: dropped {dropped} candidate(s) scoring below it"
                          if dropped else f"min_score {float(floor):g}: every candidate scored above it")
        if diverse:
            from ragtui.core.search.postrank import mmr

            assert lam is not None
            before = rows[:k].tolist()
            rows, scores = mmr(rows, scores, fetch, float(lam), vectors=self._mmr_vectors(data),
                               terms=lambda r: _terms(data.records[r].text))
            after = rows[:k].tolist()
            if after == before:
                stages.append(f"mmr {float(lam):g}: kept the order of the top {len(after)}")
            else:
                moved = len(set(after) - set(before))
                stages.append(f"mmr {float(lam):g}: reordered the hits for diversity ({moved} of the top "
                              f"{len(after)} brought in from lower ranks)")
        hits = self.hits(rows, scores, data)
        if merge:
            n_before = len(hits)
            hits = _merge(hits, data)
            joined = n_before - len(hits)
            stages.append(f"merge: joined {joined} neighbouring chunk(s) into the hit ranked above them"
                          if joined else "merge: no neighbouring chunks to join")
        seconds = time.perf_counter() - start
        notes = parsed.notes if parsed is not None else ()
        if trace is not None:
            trace.stages = tuple(stages)
        if plan is None:
            return Hits(hits[:k], query=parsed, notes=notes, seconds=seconds, stages=stages)
        return Hits(hits[:k], query=parsed, expansions=plan.expansions, notes=(*notes, *plan.notes),
                    seconds=seconds, stages=stages)

    def published_snapshot(self) -> Retriever:
        """A snapshot of the generation as published, without its overlay (``core.search.explain`` explains
        what that one ranks: its per-term scores are read from the published files)."""
        pinned = self.snapshot()
        pinned._overlay, pinned._view = None, pinned._data
        return pinned

    def _rank_overlaid(self, data: OverlaidData, query: str | np.ndarray, mode: str, k: int,
                       params: SearchParams, plan: QueryPlan | None) -> tuple[np.ndarray, np.ndarray]:
        """The next generation's top ``k`` rows through its overlay (``layered.LayeredGeneration.search``; with
        ``plan``, ``query`` is its search text)."""
        ranking = {name: value for name, value in params.items() if name not in COMMON}
        text = query if isinstance(query, str) else None
        vector = None if mode in LEXICAL_MODES else self._query_vector(query, data.base)
        return data.layered.search(mode, k, text=text, vector=vector, plan=plan, **ranking)  # type: ignore[arg-type]

    @staticmethod
    def _mmr_vectors(data: IndexData | OverlaidData) -> np.ndarray | LayeredVectors | None:
        v = data.vectors
        return v if v.ndim == 2 and v.shape[0] == data.n_chunks and v.shape[1] > 0 else None

    def _rank(
        self, data: IndexData, query: str | np.ndarray, mode: str, k: int, params: SearchParams,
        plan: QueryPlan | None = None, trace: SearchTrace | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        rank = getattr(self, f"_rank_{mode}")
        rows_scores: tuple[np.ndarray, np.ndarray] = rank(data, query, k, params, plan, trace)
        return rows_scores

    # One method per mode of ``modes.MODE_TABLE``: (data, query, k, params, plan, trace) -> (rows, scores).

    def _rank_bm25(self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams,
                   plan: QueryPlan | None, trace: SearchTrace | None) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(query, str):
            raise UsageError("bm25 search needs query text")
        return data.bm25.search(query, k) if plan is None else plan.bm25(data, k)

    def _rank_bm25doc(self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams,
                      plan: QueryPlan | None, trace: SearchTrace | None) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(query, str):
            raise UsageError("bm25doc search needs query text")
        return self._bm25doc(data, query, k, params.get("chunk_weight"), plan)

    def _rank_bm25stem(self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams,
                       plan: QueryPlan | None, trace: SearchTrace | None) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(query, str):
            raise UsageError("bm25stem search needs query text")
        return self._bm25stem(data, query, k, params.get("chunk_weight"), plan)

    def _rank_flat(self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams,
                   plan: QueryPlan | None, trace: SearchTrace | None) -> tuple[np.ndarray, np.ndarray]:
        vec = self._query_vector(query, data)
        # The int8 scan serves plain queries; a plan (filters, phrases) scores its allowed rows in float32.
        if trace is not None:
            trace.query_vector = vec
        return self._flat(data, vec, k) if plan is None else plan.flat(data.vectors, vec, k)

    def _rank_ivf(self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams,
                  plan: QueryPlan | None, trace: SearchTrace | None) -> tuple[np.ndarray, np.ndarray]:
        vec = self._query_vector(query, data)
        lists = self._ivf_for(data)
        nprobe = params.get("nprobe")
        if trace is not None:
            trace.query_vector, trace.ivf = vec, lists
            trace.probed = lists.probe(vec, min(nprobe or lists.default_nprobe, lists.nlist))
        if plan is not None:
            return plan.ivf(lists, data.vectors, vec, k, nprobe)
        if self.vector_scan == "i8":
            from ragtui.core.search.quant import ivf_search_i8

            return ivf_search_i8(lists, self._quant_for(data), vec, k, nprobe=nprobe)
        return lists.search(vec, k, nprobe)

    def _rank_hybrid(self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams,
                     plan: QueryPlan | None, trace: SearchTrace | None) -> tuple[np.ndarray, np.ndarray]:
        return self._hybrid(data, query, k, params, plan, trace)

    def _hybrid(
        self, data: IndexData, query: str | np.ndarray, k: int, params: SearchParams, plan: QueryPlan | None = None,
        trace: SearchTrace | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        from ragtui.core.search import fusion

        if not isinstance(query, str):
            raise UsageError("hybrid search needs query text")
        depth = _whole("depth", params.get("depth")) or fusion.DEFAULT_DEPTH
        vec = self._query_vector(query, data)
        arm = params.get("lexical") or "bm25doc"

        def lexical(n: int) -> tuple[np.ndarray, np.ndarray]:
            if arm != "bm25":
                lex = self._bm25stem if arm == "bm25stem" else self._bm25doc
                return lex(data, query, n, params.get("chunk_weight"), plan)
            return data.bm25.search(query, n) if plan is None else plan.bm25(data, n)

        def vector(n: int) -> tuple[np.ndarray, np.ndarray]:
            # Under a query plan: the same fusion over each ranking of the rows the query allows.
            return self._flat(data, vec, n) if plan is None else plan.flat(data.vectors, vec, n)

        def fused(n: int, at: int) -> tuple[np.ndarray, np.ndarray]:
            return fusion.fuse(lexical(at), vector(at), n, method=params.get("fusion"),
                               weight=params.get("weight"), rrf_k=params.get("rrf_k"))

        # The fusion of each list's top `depth` decides the ranking, whatever k: a larger k
        # only appends (from a deeper fusion) what that one did not rank, so the top 10 of
        # k=100 is the top 10 of k=10.
        lex_at, vec_at = lexical(depth), vector(depth)
        if trace is not None:
            trace.query_vector, trace.lexical, trace.vector = vec, lex_at, vec_at
            trace.fusion = fusion.resolve(params.get("fusion"), params.get("weight"), params.get("rrf_k"))
            trace.arm = arm
        rows, scores = fusion.fuse(lex_at, vec_at, k, method=params.get("fusion"), weight=params.get("weight"),
                                   rrf_k=params.get("rrf_k"))
        if k <= rows.size or rows.size >= data.n_chunks:
            return rows, scores
        return fusion.extend(rows, scores, fused(k, k), k)

    def _bm25doc(
        self, data: IndexData, query: str, k: int, chunk_weight: object, plan: QueryPlan | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        from ragtui.core.search.docaware import check_chunk_weight

        weight = check_chunk_weight(chunk_weight)
        lex = self._doclex_for(data)
        if plan is None:
            return lex.search(data.bm25, query, k, weight)
        return plan.lexical(lex.chunk_scores(data.bm25, plan.lexical_text, weight), k)

    def _bm25stem(
        self, data: IndexData, query: str, k: int, chunk_weight: object, plan: QueryPlan | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        from ragtui.core.search.docaware import check_chunk_weight
        from ragtui.core.search.stemmed import DEFAULT_STEM_CHUNK_WEIGHT

        weight = DEFAULT_STEM_CHUNK_WEIGHT if chunk_weight is None else check_chunk_weight(chunk_weight)
        lex = self._stemlex_for(data)
        if plan is None:
            return lex.search(query, k, weight)
        return plan.lexical(lex.chunk_scores(plan.lexical_text, weight), k)

    @staticmethod
    def hits(rows: np.ndarray, scores: np.ndarray, data: IndexData | OverlaidData) -> list[Hit]:
        out = []
        for rank, (row, score) in enumerate(zip(rows.tolist(), scores.tolist()), 1):
            rec = data.records[row]
            out.append(Hit(rank, float(score), rec.chunk_id, rec.doc_id, row, rec.text))
        return out


def _terms(text: str) -> set[str]:
    from ragtui.core.index.analyzer import analyze

    return set(analyze(text))


def _merge(hits: list[Hit], data: IndexData | OverlaidData) -> list[Hit]:
    """Hits of one document whose chunks are neighbours (numbers k and k+1: the chunker's windows
    overlap or touch) joined into the best-ranked one, text the union; ranks renumbered."""
    from ragtui.core.search.postrank import merge_text

    groups: list[list[Hit]] = []
    where: dict[tuple[str, int], int] = {}  # (doc_id, chunk number) -> its group
    for h in hits:
        kk = data.records[h.row].k
        g = where.get((h.doc_id, kk - 1), where.get((h.doc_id, kk + 1)))
        if g is None:
            g = len(groups)
            groups.append([])
        groups[g].append(h)
        where[(h.doc_id, kk)] = g
    out = []
    for rank, group in enumerate(groups, 1):
        best = group[0]
        if len(group) == 1:
            out.append(Hit(rank, best.score, best.chunk_id, best.doc_id, best.row, best.text))
            continue
        members = sorted(group, key=lambda h: h.row)
        rows = tuple(h.row for h in members)
        out.append(Hit(rank, best.score, best.chunk_id, best.doc_id, best.row,
                       merge_text([h.text for h in members]), rows))
    return out


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _check_embedder(embedder: Embedder, meta: IndexMeta) -> None:
    if embedder.model != meta.embedding_model or embedder.dim != meta.dim:
        raise ModelMismatchError(
            f"index {meta.index_id!r} was embedded with {meta.embedding_model!r} (dim {meta.dim}), "
            f"but the configured embedder is {embedder.model!r} (dim {embedder.dim}): "
            "configure that model, or re-ingest the folder with this one"
        )
