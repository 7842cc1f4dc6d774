"""One search request for every front end: ``SearchRequest``, decided once by ``build_request``.

``ragtui search``, ``pack``, ``ask``, ``eval``, the MCP tools and the TUI turn
their input (flags, MCP arguments, the TUI's state) into the same typed
request through ``build_request``, which applies the defaults and ``[search]``
in one order and checks every value against one set of ranges, with the same
message whichever front end asked::

    request = build_request(settings, "tar archive", mode="hybrid", k=10, options={"weight": 0.7})
    searcher = app.open_searcher(settings, request)     # which indexes, each with its own embedder
    result = app.run_search(searcher, request)          # hits, timing, notes, the snapshot searched

The order, for every value: the value given (a flag, an MCP argument, the
TUI's toggle) over ``[search]`` in ragtui.toml over the search's own default.
Checks happen before anything is loaded: a bad request costs nothing.
Importing this module loads neither numpy nor a UI library.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ragtui.config import Settings
from ragtui.core.errors import RagtuiError, UsageError
from ragtui.core.search.modes import COMMON, MODES, PARAMS, mode_spec
from ragtui.core.search.query import ParsedQuery

if TYPE_CHECKING:
    from ragtui.core.answer.pack import Pack
    from ragtui.core.search.retriever import Hit, Retriever

__all__ = [
    "DEFAULT_K",
    "DEFAULT_MODE",
    "MAX_K",
    "SearchRequest",
    "SearchResult",
    "Searcher",
    "build_request",
    "cite_hits",
    "hybrid_defaults",
    "index_params",
    "label",
    "pack_hits",
    "pack_json",
    "pack_result",
    "pooled_params",
    "request_params",
    "rerank_values",
    "run_search",
    "search_options",
]

DEFAULT_MODE = "bm25"
DEFAULT_K = 10
MAX_K = 1000
"""The most hits one request returns (every front end: -k, the MCP ``k``, the TUI's k)."""


def label(name: str, style: str) -> str:
    """How a message names option ``name``: ``--min-score`` for flags (``style`` "flag"), ``min_score`` otherwise."""
    return "--" + name.replace("_", "-") if style == "flag" else name


@dataclass(frozen=True)
class SearchRequest:
    """One question, decided: what to search, how, how many, in which indexes.

    Every field is checked (``build_request``). ``params`` are the keyword parameters of
    ``Retriever.search`` for ``mode`` (the ranking options that apply to it, and ``nprobe``).
    """

    text: str
    """The query as given."""
    query: ParsedQuery
    """The query as parsed (``literal`` for a question, which is prose, not query syntax)."""
    mode: str
    k: int
    params: Mapping[str, Any] = field(default_factory=dict)
    index: str | None = None
    """The index id named (``a,b`` names several), None: the one the situation makes clear."""
    every: bool = False
    """Search every index under the artifacts root together."""
    rerank: int = 0
    """Candidates the cross-encoder reorders afterwards (0: none)."""
    rerank_budget_ms: float | None = None
    strict: bool = False
    """Whether query syntax mistakes were refused (else searched as plain text, with a note)."""
    style: str = "flag"
    """How messages about this request name its options: "flag" (``--nprobe``) or "name" (``nprobe``)."""

    @property
    def fetch(self) -> int:
        """How many hits the first stage returns: ``k``, or more when a reranker picks among them."""
        return max(self.k, self.rerank)

    @property
    def needs_embedder(self) -> bool:
        spec = mode_spec(self.mode)
        return spec is not None and spec.needs_embedder

    @property
    def notes(self) -> tuple[str, ...]:
        """What the request's parse says a user should know (a query searched as plain text)."""
        return self.query.notes


def hybrid_defaults(embedding_model: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Hybrid's ``params`` with what neither a value nor ``[search]`` set taken from the fit for an index
    embedded with ``embedding_model`` (``fusion_fit.fill_hybrid``: the lexical arm, the fusion and its
    weight or rrf_k, the arm's chunk_weight; an embedder the table does not know gets its ``UNKNOWN`` row).

    The one place where the defaults fitted per embedder plug in.
    """
    from ragtui.core.search.fusion_fit import fill_hybrid

    return dict(fill_hybrid(embedding_model, dict(params)))


HYBRID_DEFAULTS: Callable[[str, Mapping[str, Any]], dict[str, Any]] = hybrid_defaults
"""The function ``app.run_search`` (and the TUI) asks for hybrid's defaults (replaceable as one value)."""


def _nearest(name: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_mode(mode: object, style: str = "flag") -> str:
    """``mode`` if it is one (``UsageError`` with a did-you-mean otherwise)."""
    if not isinstance(mode, str) or mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}{_nearest(str(mode), MODES)}: choose one of {', '.join(MODES)}")
    return mode


def check_k(k: object, style: str = "flag") -> int:
    name = "-k" if style == "flag" else "k"
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise UsageError(f"{name} must be a whole number from 1 to {MAX_K} (got {k!r})")
    return k


def search_options(settings: Settings, mode: str, given: Mapping[str, Any] | None = None, *, strict: bool = True,
                   style: str = "flag") -> dict[str, Any]:
    """The ranking options for ``mode``: ``given`` over ``[search]`` over the defaults, each checked.

    A ``[search]`` key that ``mode`` does not take is left out (one file serves every mode), as is
    the config's weight under rrf fusion, its rrf_k under another fusion (or none named: the index's fit
    decides) and its chunk_weight under lexical bm25. A given option ``mode`` does not take is a ``UsageError`` when ``strict`` (search,
    pack, MCP), else left out (eval runs several modes with one set of flags; the TUI keeps its
    toggles across modes). ``given`` values of None count as not given.
    """
    from ragtui.core.search.ranking_options import NAMES, check_option
    from ragtui.core.search.retriever import check_floor, check_search

    check_mode(mode, style)
    takes = set(PARAMS.get(mode, ())) | set(COMMON)
    flags: dict[str, Any] = {}
    for name, value in (given or {}).items():
        if value is None:
            continue
        if name not in NAMES:
            raise UsageError(f"unknown ranking option {label(name, style)}{_nearest(name, NAMES)}")
        flags[name] = check_option(name, value, label=label(name, style))
    out = {k: v for k, v in settings.search.items() if k in takes}
    chosen = {k: v for k, v in flags.items() if k in takes}
    if strict and len(chosen) < len(flags):
        name = next(k for k in flags if k not in takes)
        owners = [m for m, names in PARAMS.items() if name in names]
        raise UsageError(f"{label(name, style)} applies to {' and '.join(owners)} search, not {mode}")
    fusion = chosen.get("fusion", out.get("fusion"))
    lexical = chosen.get("lexical", out.get("lexical"))
    # No fusion named: the index's fit decides (``hybrid_defaults``), and a config's rrf_k is not this run's.
    for key, off in (("weight", fusion == "rrf"), ("rrf_k", fusion != "rrf"), ("chunk_weight", lexical == "bm25")):
        if off and key not in chosen and mode == "hybrid":
            out.pop(key, None)  # the config's value for the other method: not this run's
    if "min_score" in out and "min_score" not in chosen:
        check_floor(mode, out["min_score"], label="[search] min_score")
    out.update(chosen)
    if "min_score" in chosen:
        check_floor(mode, chosen["min_score"], label=label("min_score", style))
    check_search(mode, out)
    return out


def build_request(
    settings: Settings,
    query: object,
    *,
    mode: object = None,
    k: object = None,
    options: Mapping[str, Any] | None = None,
    nprobe: object = None,
    index: str | None = None,
    every: bool = False,
    rerank: object = None,
    rerank_budget_ms: object = None,
    strict: bool = False,
    literal: bool = False,
    style: str = "flag",
    default_mode: str = DEFAULT_MODE,
    default_k: int = DEFAULT_K,
    strict_options: bool = True,
) -> SearchRequest:
    """The checked ``SearchRequest`` for a front end's input (``UsageError``/``QueryError`` naming what is wrong).

    In this order: the query (at most ``MAX_QUERY_CHARS`` characters of UTF-8, not blank, parsed:
    strictly with ``strict``, as prose with ``literal``), the mode (``default_mode`` when None), k
    (``default_k``; 1..``MAX_K``), the ranking options (``search_options``), nprobe (ivf only, a whole
    number of at least 1; the index's number of lists is checked when it is opened), reranking
    (the values given over ``[rerank]``), the index (``index`` over ``settings.index``). ``style``
    says how messages name options: "flag" (``--min-score``) or "name" (``min_score``).
    """
    from ragtui.core.search.query import literal as as_literal
    from ragtui.core.search.query import parse_query
    from ragtui.core.search.retriever import EMPTY_QUERY, check_query

    if not isinstance(query, str):
        raise UsageError(f"the query must be text (got {type(query).__name__})")
    check_query(query)
    if not query.strip():
        raise UsageError(EMPTY_QUERY)
    parsed = as_literal(query) if literal else parse_query(query, strict=strict)
    chosen_mode = check_mode(default_mode if mode is None else mode, style)
    chosen_k = check_k(default_k if k is None else k, style)
    params = search_options(settings, chosen_mode, options, strict=strict_options, style=style)
    if nprobe is not None:
        if chosen_mode != "ivf":
            if strict_options:
                raise UsageError(f"{label('nprobe', style)} applies to ivf search, not {chosen_mode}")
        elif isinstance(nprobe, bool) or not isinstance(nprobe, int) or nprobe < 1:
            raise UsageError(f"{label('nprobe', style)} must be between 1 and the index's number of IVF lists "
                             f"(got {nprobe!r})")
        else:
            params["nprobe"] = nprobe
    n, budget = rerank_values(settings, rerank, rerank_budget_ms, style)
    return SearchRequest(query, parsed, chosen_mode, chosen_k, params, index if index is not None else settings.index,
                         every, n, budget, strict, style)


def rerank_values(settings: Settings, n: object = None, budget: object = None, style: str = "flag"
                  ) -> tuple[int, float | None]:
    """(n, budget_ms): the values given, else the ``[rerank]`` settings; n = 0 means off."""
    n = settings.rerank.get("n", 0) if n is None else n
    budget = settings.rerank.get("budget_ms") if budget is None else budget
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_K:
        raise UsageError(f"{label('rerank', style)} must be 0 (off) or a number of candidates up to {MAX_K} (got {n!r})")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float)
                               or budget != budget or budget < 0):
        raise UsageError(f"{label('rerank_budget_ms', style)} must be a number of milliseconds >= 0 (got {budget!r})")
    return n, (float(budget) if budget else None)


# -- one request, searched (``app.open_searcher`` opens the indexes) --------------------------------


class Searcher(NamedTuple):
    """The indexes a request searches, opened, each with the embedder it was built with (when needed)."""

    retrievers: dict[str, Retriever]
    """Index id -> retriever, in order."""
    several: bool
    """Whether several indexes are searched together (``--all``, ``--index a,b``)."""

    @property
    def only(self) -> Retriever:
        """The one retriever of a single-index searcher."""
        return next(iter(self.retrievers.values()))

    def reload(self) -> None:
        """Move every index to its newest published generation (the next request sees it)."""
        for retriever in self.retrievers.values():
            retriever.reload()


class SearchResult(NamedTuple):
    """What one request found: the hits, where each came from, and what the search did on its way.

    ``snapshots`` are the generations searched (index id -> a ``Retriever.snapshot``): citing or
    packing the hits through them reads the very generation the hits came from.
    """

    request: SearchRequest
    hits: list[Any]
    """The ranked ``Hit``s (rank and score merged over the indexes when several were searched)."""
    indexes: list[str]
    """The index id of each hit."""
    snapshots: dict[str, Retriever]
    seconds: float
    """The search's own wall time (the reranker's not included)."""
    notes: tuple[str, ...]
    """What a user should know (a query searched as plain text, a prefix cut, models merged by rank)."""
    stages: tuple[str, ...]
    """What each step after the first ranking did to the hits (a floor, MMR, merging, the reranker)."""
    trace: Any = None
    """The single-index search's ``SearchTrace``; None over several indexes."""
    explained: Any = None
    """``core.search.explain.Explained`` when asked for."""
    reranked: Any = None
    """``core.search.rerank.Reranked`` when a reranker ran."""


def request_params(request: SearchRequest, meta: Any) -> dict[str, Any]:
    """``request.params`` with what depends on the index (``index_params``)."""
    return index_params(request.mode, request.params, meta)


def index_params(mode: str, params: Mapping[str, Any], meta: Any) -> dict[str, Any]:
    """``params`` with what depends on the index searched (its ``meta``): hybrid's defaults fitted to the
    index's embedder where neither a value nor ``[search]`` gave one (``HYBRID_DEFAULTS``, asked at each call)."""
    if mode == "hybrid":
        return dict(HYBRID_DEFAULTS(meta.embedding_model, params))
    return dict(params)


def pooled_params(mode: str, params: Mapping[str, Any], metas: Iterable[Any]) -> dict[str, Any]:
    """``index_params`` for several indexes searched together (their ``metas``): hybrid's defaults fitted to
    the embedder they share, else those of an embedder the fit does not know (``fusion_fit.UNKNOWN``)."""
    models = {meta.embedding_model for meta in metas}
    if mode == "hybrid":
        return dict(HYBRID_DEFAULTS(models.pop() if len(models) == 1 else "", params))
    return dict(params)


def run_search(searcher: Searcher, request: SearchRequest, *, explain: bool = False, reranker: Any = None,
               should_stop: Callable[[], bool] | None = None, clock: Callable[[], float] | None = None) -> SearchResult:
    """Search ``request`` in ``searcher``'s indexes, one snapshot of each for the whole request.

    ``explain`` explains each hit (``core.search.explain``); ``reranker`` reorders the first
    ``request.rerank`` candidates. Both work on one index at a time (``UsageError`` otherwise).
    """
    snapshots = {index_id: r.snapshot() for index_id, r in searcher.retrievers.items()}
    if searcher.several:
        if explain or (reranker is not None and request.rerank):
            raise UsageError(f"{'--explain' if explain else '--rerank'} works on one index at a time: "
                             "choose one with --index")
        import time

        from ragtui.core.search.multi import search_many

        start = time.perf_counter()
        many = search_many(snapshots, request.query, mode=request.mode, k=request.k,
                           **pooled_params(request.mode, request.params, (r.meta for r in snapshots.values())))
        seconds = time.perf_counter() - start
        return SearchResult(request, [m.hit for m in many.hits], [m.index_id for m in many.hits], snapshots,
                            seconds, tuple(many.notes), ())
    (index_id, retriever), = snapshots.items()
    from ragtui.core.search.retriever import SearchTrace

    params = request_params(request, retriever.meta)
    trace = SearchTrace()
    explained = None
    if explain:
        from ragtui.core.search.explain import explain_search

        # Explained as published (its per-term scores are read from the published files): the rows cited below
        # are that generation's.
        retriever = snapshots[index_id] = retriever.published_snapshot()
        explained = explain_search(retriever, request.query, request.mode, request.fetch, trace=trace, **params)
        hits, notes, seconds, stages = list(explained.hits), explained.notes, explained.seconds, explained.stages
    else:
        found = retriever.search(request.query, mode=request.mode, k=request.fetch, trace=trace, **params)
        hits, notes, seconds, stages = list(found), found.notes, found.seconds, found.stages
    reranked = None
    if reranker is not None and request.rerank:
        from ragtui.core.search.rerank import rerank

        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        # The cross-encoder reads the words searched for, not the syntax around them.
        reranked = rerank(request.query.search_text, hits, reranker, request.rerank,
                          budget_ms=request.rerank_budget_ms, should_stop=should_stop, **extra)
        hits = list(reranked.hits)
        stages = (*stages, f"rerank: {reranked.describe()}")
    hits = hits[: request.k]
    return SearchResult(request, hits, [index_id] * len(hits), snapshots, seconds, tuple(notes), tuple(stages),
                        trace, explained, reranked)


def cite_hits(result: SearchResult) -> list[dict[str, Any]]:
    """Each hit as a JSON-able row, with where its text is in its source now (read from the generation searched).

    The keys: rank, score, index, chunk_id, doc_id, row, text, then path, status, fresh,
    start_line, end_line, start_char, end_char, then ``page`` and ``page_end`` when the source
    has pages; for a hit that joined several chunks ``merged_rows`` and ``lines``, the union
    line range [first chunk's start, last chunk's end] when both are found in the file as it is
    now (spec/citations.md); ``source_problem`` when the source could not be read.
    """
    from ragtui.core.citations import Resolver

    resolvers: dict[str, Any] = {}
    out = []
    for hit, index_id in zip(result.hits, result.indexes):
        data = result.snapshots[index_id].data
        resolver = resolvers.get(index_id)
        if resolver is None:
            resolver = resolvers[index_id] = Resolver(data)
        row: dict[str, Any] = {"rank": hit.rank, "score": hit.score, "index": index_id, "chunk_id": hit.chunk_id,
                               "doc_id": hit.doc_id, "row": hit.row, "text": hit.text}
        row.update(_where(resolver, hit.chunk_id))
        if hit.rows:
            row["merged_rows"] = list(hit.rows)
            first = _where(resolver, data.records[hit.rows[0]].chunk_id)
            last = _where(resolver, data.records[hit.rows[-1]].chunk_id)
            if first.get("start_line") is not None and last.get("end_line") is not None \
                    and first.get("path") == last.get("path"):
                row["lines"] = [first["start_line"], last["end_line"]]
        out.append(row)
    return out


def _where(resolver: Any, chunk_id: str) -> dict[str, Any]:
    """Where a chunk's text is in its source file now (``core.citations``), as JSON fields."""
    try:
        c = resolver.resolve(chunk_id)
    except RagtuiError as e:
        # No recorded folder, an unsafe doc_id, an unreadable file: the hit is still shown, by its doc_id.
        return {"path": None, "status": None, "fresh": None, "start_line": None, "end_line": None,
                "start_char": None, "end_char": None, "source_problem": str(e)}
    out: dict[str, Any] = {
        "path": None if c.path is None else str(c.path), "status": c.status, "fresh": c.status == "fresh",
        "start_line": c.start_line, "end_line": c.end_line, "start_char": c.start_char, "end_char": c.end_char,
    }
    if c.page is not None:  # sources with pages (PDF) say where the text is: page, page_end, p.12 L3–9
        out.update(page=c.page, page_end=c.page_end, place=c.place)
    return out


def pack_result(result: SearchResult, budget: int) -> Pack:
    """``core.answer.pack.pack`` over a result's hits, from the generation they came from (``ragtui pack``, MCP ``pack``)."""
    if len(result.snapshots) != 1:
        raise UsageError("a pack is cut from one index: choose one with --index")
    (retriever,) = result.snapshots.values()
    return pack_hits(retriever, result.request.text, result.hits, mode=result.request.mode, budget=budget)


def pack_json(result: SearchResult, packed: Any) -> dict[str, Any]:
    """``packed.to_json()`` with the ranked candidates it was cut from (rank, score, chunk_id: the hits of
    ``result``, which ``ragtui search --json`` would print), and the search's notes with the pack's."""
    out: dict[str, Any] = packed.to_json()
    out["notes"] = [*result.notes, *packed.notes]
    out["ranked"] = [{"rank": h.rank, "score": h.score, "chunk_id": h.chunk_id} for h in result.hits]
    return out


def pack_hits(snapshot: Retriever, text: str, hits: list[Hit], *, mode: str, budget: int,
              tokenizer: Any = None) -> Pack:
    """``core.answer.pack.pack`` over ``hits`` of the generation ``snapshot`` holds, counted with the index's own
    tokenizer (``tokenizer``, else its embedder's), reading sources where ingest recorded the folder."""
    from ragtui.core.answer.pack import check_budget, check_tokenizer, pack
    from ragtui.core.citations import Resolver

    check_budget(budget)
    data = snapshot.data
    if tokenizer is None:
        if snapshot.embedder is None:
            raise UsageError("a pack counts tokens with the index's own tokenizer: open the index with its embedder")
        tokenizer = snapshot.embedder.tokenizer
    check_tokenizer(tokenizer, data)
    return pack(text, hits, data, tokenizer, budget, mode=mode, resolver=Resolver(data))
