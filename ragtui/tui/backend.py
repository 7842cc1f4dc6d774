"""What the TUI's workers call: plain functions over ``ragtui.core``, with no Textual in them.

Every function here may block (disk, embedding, building IVF lists) and is
meant to run in a worker thread; each returns a frozen value the UI renders.
Errors are the core's ``RagtuiError`` classes; ``SeveralIndexes`` (from
``ragtui.app``) means the UI must ask which index to open. Which index, how
it is opened and with which embedder is decided by ``ragtui.app``, as for the
CLI. Nothing here reads index files itself: ``Retriever`` and
``ragtui.core.citations`` do.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragtui import app as app_layer
from ragtui.app import SeveralIndexes
from ragtui.config import Settings
from ragtui.core.errors import IndexMissingError, RagtuiError
from ragtui.core.search.retriever import Hit, Retriever

__all__ = [
    "COMPARED",
    "CompareOutcome",
    "IndexStats",
    "IvfInfo",
    "NamedIndexMissing",
    "OnlyBrokenIndexes",
    "SearchOutcome",
    "SearchRequest",
    "SeveralIndexes",
    "SourceText",
    "build_ivf",
    "cite",
    "compare",
    "editor_command",
    "generation",
    "index_embedders",
    "index_stats",
    "RerankOutcome",
    "list_index_names",
    "load_reranker",
    "locate_index",
    "open_index",
    "PackOutcome",
    "pack_results",
    "packs_dir",
    "ranking_text",
    "rerank_outcome",
    "open_several",
    "run_search",
    "run_search_many",
    "search_params",
    "search_request",
    "scan_indexes",
]

VECTOR_MODES = ("flat", "ivf", "hybrid")
COMPARED = ("flat", "ivf", "bm25")
"""The modes the compare view lines up, in column order."""


@dataclass(frozen=True)
class SearchRequest:
    """One search the UI asked for. ``seq`` increases with every request, so newer wins."""

    seq: int
    query: str
    mode: str
    k: int
    nprobe: int | None = None
    """IVF lists to probe; None: the index's default."""
    rerank: int = 0
    """Candidates to rerank afterwards (0: none); the search fetches ``max(k, rerank)``."""
    params: dict = field(default_factory=dict)
    """The ranking options for ``mode`` (``search_params``: ``[search]`` with the session's fusion); nprobe
    is the field above."""


@dataclass(frozen=True)
class SearchOutcome:
    """The hits for one ``SearchRequest`` and how long the core took (wall seconds)."""

    request: SearchRequest
    hits: tuple[Hit, ...]
    seconds: float
    weights: dict[str, float] = field(default_factory=dict)
    """The query's terms worth lighting, with their relative weights in the searched index (``kwic.salient``)."""
    sources: tuple[str, ...] = ()
    """Several indexes searched together: the index id of each hit (``hits[i]`` is a chunk of ``sources[i]``);
    empty for one index."""
    snapshot: Retriever | None = None
    """One index: the generation searched (``Retriever.snapshot``), which packing and citing the hits read."""
    notes: tuple[str, ...] = ()
    """What the search said a user should know (a query searched as plain text, a prefix cut)."""


@dataclass(frozen=True)
class RerankOutcome:
    """A search's candidates reordered by the cross-encoder (``reranked``: a ``core.search.rerank.Reranked``)."""

    outcome: SearchOutcome
    """The first-stage results it reorders."""
    reranked: Any


@dataclass(frozen=True)
class IvfInfo:
    """The IVF lists of one generation: sizes and how they were obtained."""

    nlist: int
    nprobe: int
    """The default number of lists probed."""
    build_seconds: float
    from_cache: bool


@dataclass(frozen=True)
class IndexStats:
    """What the index picker shows about one index."""

    index_id: str
    n_chunks: int
    dim: int
    embedding_model: str
    tokenizer: str
    created_at: str
    max_tokens: int
    overlap: int
    nlist: int
    """nlist by the configured or default rule (what a build would use)."""
    nprobe: int
    ivf_state: str
    """"built (...)", "building", "not built", or why vectors are off."""


@dataclass(frozen=True)
class CompareOutcome:
    """The same query under each of ``COMPARED``, and how the rankings agree.

    ``runs[mode]`` holds the hits, or ``off[mode]`` says why that mode could
    not run. ``overlap[(a, b)]`` counts chunk_ids in both top-k lists;
    ``ivf_recall`` is |ivf ∩ flat| / |flat| (None when either is off).
    """

    query: str
    k: int
    nprobe: int | None
    runs: dict[str, tuple[Hit, ...]]
    off: dict[str, str]
    seconds: dict[str, float]
    overlap: dict[tuple[str, str], int] = field(default_factory=dict)
    ivf_recall: float | None = None

    def rank_in(self, mode: str, chunk_id: str) -> int | None:
        """The rank of ``chunk_id`` in ``mode``'s top-k, or None."""
        for hit in self.runs.get(mode, ()):
            if hit.chunk_id == chunk_id:
                return hit.rank
        return None


@dataclass(frozen=True)
class SourceText:
    """A resolved citation and, when asked for, the source text it was located in (raw, not neutralised)."""

    citation: object
    """A ``ragtui.core.citations.Citation``."""
    text: str | None


# -- finding and opening an index ---------------------------------------------------


def list_index_names(settings: Settings) -> list[str]:
    """The index ids under the artifacts root, sorted (empty when there is none)."""
    return app_layer.list_indexes(settings)


def scan_indexes(settings: Settings) -> app_layer.IndexListing:
    """The index ids under the artifacts root and the broken entries beside them."""
    return app_layer.scan_indexes(settings)


class OnlyBrokenIndexes(IndexMissingError):
    """No index can be opened, and ``broken`` lists (name, problem) of the entries under rag/ that are broken."""

    def __init__(self, message: str, broken: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.broken = broken


class NamedIndexMissing(IndexMissingError):
    """The index asked for (--index) does not exist; ``names`` are the indexes that do."""

    def __init__(self, message: str, names: list[str]) -> None:
        super().__init__(message)
        self.names = names


def locate_index(settings: Settings, index_id: str | None) -> Path:
    """The directory of the index to open: ``index_id``, else the only one (``ragtui.app.resolve_index``'s choice).

    Raises ``IndexMissingError`` when there is none (``OnlyBrokenIndexes``
    when broken entries are all there is): the UI says what to run and keeps
    looking for one. Raises ``SeveralIndexes`` when there are several and
    ``index_id`` is None: the UI asks which.
    """
    try:
        return app_layer.resolve_index(replace(settings, index=index_id), note=None)
    except app_layer.NoIndex as e:
        if index_id is not None and e.names:
            raise NamedIndexMissing(str(e), e.names) from None
        if e.broken:
            raise OnlyBrokenIndexes(
                f"no usable index under {settings.artifacts}/rag: {app_layer.broken_note(settings, e.broken)}", e.broken
            ) from None
        raise IndexMissingError(f"no index under {settings.artifacts}/rag yet") from None


def open_index(path: Path, settings: Settings, *, remember: bool = True) -> Retriever:
    """Open and validate the index at ``path`` without an embedder (BM25 works at once); it becomes the
    index used last (``ragtui.app.remember_index``), which the next ``ragtui`` or ``ragtui search`` opens,
    unless ``remember`` is False (an index only looked at, as the picker's statistics do)."""
    retriever = app_layer.open_index(path, settings)
    if remember:
        app_layer.remember_index(settings, path.name)
    return retriever


def open_several(settings: Settings, index_ids: list[str]) -> dict[str, Retriever]:
    """Open each of ``index_ids`` without an embedder (index id -> retriever, in that order), as
    ``ragtui search --index a,b`` does (``ragtui.app.open_retrievers``); a missing one raises as ``locate_index``."""
    if not index_ids:
        raise IndexMissingError("no index to open")
    paths = [locate_index(settings, index_id) for index_id in index_ids]
    return app_layer.open_retrievers(settings, paths, need_embedder=False)


def resolved_ivf(retriever: Retriever) -> tuple[int, int]:
    """(nlist, nprobe) of this index's IVF lists: the nprobe a search without one really probes (the
    calibrated one, ``IVFIndex.default_nprobe``) once the lists are built, 0 before; cheap (no build)."""
    from ragtui.core.search.ivf import IVFParams

    built = retriever.built_ivf()
    if built is not None:
        return built.nlist, built.default_nprobe
    params = (retriever.ivf_params or IVFParams()).resolve(retriever.meta.n_chunks)
    return params.nlist, 0


def build_ivf(retriever: Retriever) -> IvfInfo:
    """Build (or load from the cache) the IVF lists of the retriever's current generation."""
    ivf = retriever.ivf()
    return IvfInfo(ivf.nlist, ivf.default_nprobe, ivf.build_seconds, ivf.from_cache)  # calibrated unless set


def index_stats(retriever: Retriever, ivf_state: str) -> IndexStats:
    """The stats of an open index; ``ivf_state`` is the UI's word for its IVF lists."""
    meta = retriever.meta
    nlist, nprobe = resolved_ivf(retriever)
    return IndexStats(
        meta.index_id, meta.n_chunks, meta.dim, meta.embedding_model, meta.tokenizer, meta.created_at,
        meta.max_tokens, meta.overlap, nlist, nprobe, ivf_state,
    )


def load_embedder(settings: Settings, factory: Callable[[Settings], object] | None):
    """The configured embedder (``factory(settings)``, by default ``ragtui.app.open_embedder``)."""
    return (factory or app_layer.open_embedder)(settings)


def index_embedders(settings: Settings, retrievers: Mapping[str, Retriever]) -> dict[str, object]:
    """Each index's own embedder (index id -> embedder; ``ragtui.app.embedder_for``, one per model), as
    ``ragtui search`` opens them: an index built with another model than the configured one is searched
    with that model. Raises ``ModelMismatchError`` naming the setting to add when one cannot be found."""
    cache: dict = {}
    return {index_id: app_layer.embedder_for(settings, r.meta, cache) for index_id, r in retrievers.items()}


# -- searching ----------------------------------------------------------------------


def compare_params(settings: Settings) -> dict[str, dict | str]:
    """Each compared mode's ``search_params`` (or why ``[search]`` rules the mode out), for ``compare``."""
    out: dict[str, dict | str] = {}
    for mode in COMPARED:
        try:
            out[mode] = search_params(settings, mode)
        except RagtuiError as e:
            out[mode] = f"[search]: {e}"
    return out


def search_params(settings: Settings, mode: str, fusion: str | None = None) -> dict:
    """The ``Retriever.search`` options for ``mode``, chosen as ``ragtui search`` chooses them
    (``ragtui.request.search_options``): ``[search]`` over the defaults, with ``fusion`` (the TUI's
    rrf toggle; None: the index's fit) as if given as ``--fusion``. Options ``mode`` does not take are left out."""
    return app_layer.search_options(settings, mode, {"fusion": fusion}, strict=False, style="name")


def ranking_text(params: dict, embedding_model: str = "") -> str:
    """Hybrid's fusion as the mode bar shows it ("zscore 0.6 · bm25stem", "rrf 60 · bm25stem"): ``params``
    completed as the search completes them for an index of ``embedding_model`` (``request.HYBRID_DEFAULTS``)."""
    from ragtui import request as request_module
    from ragtui.core.search.fusion import DEFAULT_FUSION, DEFAULT_RRF_K, DEFAULT_WEIGHT

    params = request_module.HYBRID_DEFAULTS(embedding_model, params)
    lexical = params.get("lexical", "bm25doc")
    fusion = params.get("fusion", DEFAULT_FUSION)
    if fusion == "rrf":
        return f"rrf {params.get('rrf_k', DEFAULT_RRF_K):g} · {lexical}"
    return f"{fusion} {params.get('weight', DEFAULT_WEIGHT):g} · {lexical}"


def search_request(settings: Settings, seq: int, query: str, mode: str, k: int, nprobe: int | None = None,
                   rerank: int = 0, fusion: str | None = None) -> SearchRequest:
    """The UI's request, decided as every front end's is (``ragtui.request.build_request``: the query,
    mode, k and nprobe checked with the same messages, ``[search]`` applied, ``fusion`` the weighted/rrf
    toggle as if given); raises ``UsageError`` or ``QueryError``."""
    built = app_layer.build_request(settings, query, mode=mode, k=k, options={"fusion": fusion},
                                    nprobe=nprobe if mode == "ivf" else None, rerank=rerank, style="name",
                                    strict_options=False)
    params = {key: value for key, value in built.params.items() if key != "nprobe"}
    return SearchRequest(seq, query, built.mode, built.k, built.params.get("nprobe"), built.rerank, params)


def run_search(retriever: Retriever, request: SearchRequest) -> SearchOutcome:
    """Run one request on one snapshot of the index (the outcome carries it, with the search's own time)."""
    params = dict(request.params)
    if request.mode == "ivf" and request.nprobe:
        params["nprobe"] = request.nprobe
    from ragtui.core.search import kwic
    from ragtui.request import index_params

    snapshot = retriever.snapshot()
    params = index_params(request.mode, params, snapshot.meta)  # what the index's embedder decides (hybrid's fit)
    hits = snapshot.search(request.query, mode=request.mode, k=max(request.k, request.rerank), **params)
    words = hits.query.search_text if hits.query is not None else request.query
    return SearchOutcome(request, tuple(hits), hits.seconds, kwic.salient(kwic.term_weights(snapshot.data.bm25, words)),
                         snapshot=snapshot, notes=hits.notes)


def run_search_many(retrievers: dict[str, Retriever], request: SearchRequest) -> SearchOutcome:
    """Search several indexes together (``core.search.multi.search_many``, pooled), each with its own data;
    the outcome's ``sources`` name each hit's index. nprobe and reranking are single-index matters: not used."""
    from ragtui.core.search import kwic
    from ragtui.core.search.multi import search_many
    from ragtui.request import pooled_params

    snapshots = {index_id: r.snapshot() for index_id, r in retrievers.items()}
    params = pooled_params(request.mode, request.params, (r.meta for r in snapshots.values()))
    start = time.perf_counter()
    result = search_many(snapshots, request.query, mode=request.mode, k=request.k, **params)
    seconds = time.perf_counter() - start
    first = next(iter(snapshots.values()))
    weights = kwic.salient(kwic.term_weights(first.data.bm25, request.query))
    return SearchOutcome(request, tuple(h.hit for h in result.hits), seconds, weights,
                         tuple(h.index_id for h in result.hits), notes=tuple(result.notes))


def load_reranker(settings: Settings):
    """The cross-encoder of the ``[rerank]`` settings (raises ``UsageError`` when the onnx extra is missing)."""
    from ragtui.core.search.rerank import make_reranker

    return make_reranker(settings.rerank)


RERANK_CLOCK: Callable[[], float] = time.perf_counter
"""The clock the rerank time budget is measured with (tests replace it with a stepping one)."""


def rerank_outcome(reranker, outcome: SearchOutcome, budget_ms: float | None,
                   should_stop: Callable[[], bool] | None = None) -> RerankOutcome:
    """Rerank the first ``outcome.request.rerank`` candidates of ``outcome`` (stops early when asked)."""
    from ragtui.core.search.query import parse_query
    from ragtui.core.search.rerank import rerank

    # The cross-encoder reads the words searched for, not the syntax around them (as `ragtui search --rerank`).
    result = rerank(parse_query(outcome.request.query).search_text, outcome.hits, reranker, outcome.request.rerank, budget_ms=budget_ms,
                    should_stop=should_stop, clock=RERANK_CLOCK)
    return RerankOutcome(outcome, result)


def compare(retriever: Retriever, query: str, k: int, nprobe: int | None, vectors_off: str | None,
            params: Mapping[str, dict | str] | None = None) -> CompareOutcome:
    """Search ``query`` in each of ``COMPARED`` and measure how the top-k lists agree.

    ``params[mode]``: that mode's ranking options (``search_params``, so the
    compare view ranks as the results list and ``ragtui search`` do), or a
    string saying why ``[search]`` rules that mode out.
    """
    from ragtui.core.eval.metrics import recall

    runs: dict[str, tuple[Hit, ...]] = {}
    off: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for mode in COMPARED:
        if mode in VECTOR_MODES and vectors_off:
            off[mode] = vectors_off
            continue
        options = (params or {}).get(mode, {})
        if isinstance(options, str):
            off[mode] = options
            continue
        try:
            outcome = run_search(retriever, SearchRequest(0, query, mode, k, nprobe, params=options))
        except RagtuiError as e:
            off[mode] = str(e)
            continue
        runs[mode], seconds[mode] = outcome.hits, outcome.seconds
    ids = {mode: [h.chunk_id for h in hits] for mode, hits in runs.items()}
    overlap = {}
    for i, a in enumerate(COMPARED):
        for b in COMPARED[i + 1 :]:
            if a in ids and b in ids:
                overlap[(a, b)] = len(set(ids[a]) & set(ids[b]))
    ivf_recall = None
    if "flat" in ids and "ivf" in ids and ids["flat"]:
        ivf_recall = recall(ids["ivf"], {cid: 1.0 for cid in ids["flat"]}, k)
    return CompareOutcome(query, k, nprobe, runs, off, seconds, overlap, ivf_recall)


# -- packing the results ------------------------------------------------------------


@dataclass(frozen=True)
class PackOutcome:
    """The shown results packed into a token budget (``core.answer.pack.Pack``), written to ``path``."""

    pack: object
    """A ``ragtui.core.answer.pack.Pack``."""
    text: str
    """Its Markdown form (what was written and copied)."""
    path: Path


def packs_dir(environ: dict | None = None) -> Path:
    """Where the TUI writes packs: ``$XDG_CACHE_HOME/ragtui/packs`` (``~/.cache/ragtui/packs``), never the index folder."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ragtui" / "packs"


def pack_results(retriever: Retriever, tokenizer, query: str, hits: tuple[Hit, ...], mode: str,
                 budget: int, directory: Path | None = None) -> PackOutcome:
    """Pack ``hits`` (the results on screen) into ``budget`` tokens counted with the index's own
    ``tokenizer`` (``ModelMismatchError`` when it is another one), and write the Markdown form to
    ``<directory>/<index>-<time>.md`` (written beside, then renamed: never half a file; ``StorageError``)."""
    from ragtui.core.answer.pack import check_tokenizer
    from ragtui.core.errors import StorageError

    check_tokenizer(tokenizer, retriever.data)
    result = app_layer.pack_hits(retriever, query, list(hits), mode=mode, budget=budget, tokenizer=tokenizer)
    text = result.markdown()
    folder = directory if directory is not None else packs_dir()
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 1_000_000_000 // 1_000_000:03d}"
    path = folder / f"{retriever.meta.index_id}-{stamp}.md"
    tmp = folder / f".{path.name}.tmp-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StorageError(f"cannot write the pack to {folder}: {e.strerror or e}") from None
    return PackOutcome(result, text, path)


# -- citations and editors ----------------------------------------------------------


def cite(retriever: Retriever, chunk_id: str, *, with_source: bool = False) -> SourceText:
    """Resolve ``chunk_id`` against the retriever's current generation (reads the source file).

    Raises the errors of ``ragtui.core.citations.resolve``.
    """
    from ragtui.core.citations import Resolver

    resolver = Resolver(retriever.data)
    citation = resolver.resolve(chunk_id)
    return SourceText(citation, resolver.source_text(citation) if with_source else None)


def editor_command(path: Path, line: int | None, environ: dict | None = None) -> list[str]:
    """The argv that opens ``path`` at ``line`` in the person's editor (``ragtui.editor``, as ``inspect --open``);
    ``UsageError`` for a $VISUAL/$EDITOR that cannot be read as a command."""
    from ragtui.editor import editor_command as command

    return command(path, line, environ)


_PAGE_FLAGS: dict[str, Callable[[str, int], list[str]]] = {
    "zathura": lambda path, page: ["-P", str(page), path],
    "evince": lambda path, page: ["-i", str(page), path],
    "okular": lambda path, page: ["-p", str(page), path],
    "mupdf": lambda path, page: [path, str(page)],
    "mupdf-gl": lambda path, page: [path, str(page)],
    "qpdfview": lambda path, page: [f"{path}#{page}"],
}
"""How each known PDF viewer is told the page to open at."""


def viewer_command(path: Path, page: int, environ: Mapping[str, str] | None = None,
                   which: Callable[[str], str | None] | None = None) -> tuple[list[str], str | None]:
    """(argv that opens the paged document ``path`` at ``page``, a notice when it cannot open at the page).

    ``$RAGTUI_PDF_VIEWER`` first: a command whose ``{page}`` and ``{path}`` are filled in (without
    ``{path}``, the path is added at the end); a known viewer's name there (``zathura``, ``evince``,
    ``okular``, ``mupdf``, ``qpdfview``) is given its own page flag. Else the first known viewer on
    the PATH; else ``xdg-open``, which cannot be told a page: the notice names it.
    """
    import shutil

    env = os.environ if environ is None else environ
    find = which or shutil.which
    target = str(path)
    given = shlex.split(env.get("RAGTUI_PDF_VIEWER", ""))
    if given:
        if any("{page}" in a or "{path}" in a for a in given):
            argv = [a.replace("{page}", str(page)).replace("{path}", target) for a in given]
            return (argv if any("{path}" in a for a in given) else [*argv, target]), None
        flags = _PAGE_FLAGS.get(os.path.basename(given[0]))
        if flags is not None and len(given) == 1:
            return [given[0], *flags(target, page)], None
        return [*given, target], f"{os.path.basename(given[0])} was not told the page: go to page {page}"
    for name, flags in _PAGE_FLAGS.items():
        exe = find(name)
        if exe:
            return [exe, *flags(target, page)], None
    return ["xdg-open", target], (f"opened with xdg-open, which cannot be told a page: go to page {page} "
                                  "(set $RAGTUI_PDF_VIEWER, e.g. 'zathura', to open at the page)")


def generation(path: Path) -> str | None:
    """The identity of what is at ``path`` now, to skip a generation known to be broken until it changes
    (None when there is none); four stats, cheap.

    Beyond ``generation_of`` (meta.json's), it covers the other three files: an index that another tool
    rewrites in place, file by file, may be caught half-written, and must be tried again once any of its
    files changes, not only meta.json.
    """
    from ragtui.core.index.index_format import FILES, generation_of

    first = generation_of(path)
    if first is None:
        return None
    parts = [first]
    for name in FILES:
        try:
            st = os.stat(os.path.join(path, name))
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)
