"""Every slow call of the TUI, each a declared thread worker that ends with one message; and
the one handler that turns any worker's error into something the person sees.

``Workers`` is a mixin for ``RagtuiApp`` (the workers belong to the app, so
all their state changes arrive at ``on_worker_state_changed`` here). Thread
workers cannot be interrupted; a superseded one finishes and its result is
dropped: each checks ``is_cancelled`` before posting, and the app compares
sequence numbers and generations as well.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.worker import Worker, WorkerState, get_current_worker

from ragtui.core.errors import EmbeddingError, IndexMissingError, ModelMismatchError, RagtuiError
from ragtui.core.textsafe import one_line
from ragtui.tui import backend, states
from ragtui.tui.messages import (
    CitationReady,
    CompareDone,
    EmbedderReady,
    IndexListed,
    IndexOpened,
    IndexReloaded,
    IvfBuilt,
    PackDone,
    RerankDone,
    RerankerReady,
    SearchDone,
    StatsReady,
    while_running,
)
from ragtui.tui.screens.compare import CompareScreen
from ragtui.tui.screens.indexes import IndexScreen
from ragtui.tui.session import Session
from ragtui.tui.widgets.index_stats import IndexStatsView

__all__ = ["Workers"]


def _live() -> bool:
    return not get_current_worker().is_cancelled


class Workers:
    """The app's workers. Groups: open, embedder, ivf, search, reranker, rerank, pack, cite, jump, reload,
    compare, list, stats, history. Failures go to ``self.work_failed(group, error)``."""

    # The state these workers set, with the types ``Session`` gives it.
    index_id: str | None
    index_path: Path | None
    _attempted_generation: str | None
    _citing: str | None

    @work(thread=True, exclusive=True, exit_on_error=False, group="open")
    def open_index_worker(self: Session, index_id: str | None, unless_generation: str | None = None) -> None:
        """Open ``index_id`` (or the only index); with ``unless_generation``, only if it changed since."""
        path = backend.locate_index(self.settings, index_id)
        # Taken before the files are read: a failure handler records it as broken, to skip until it changes.
        # Taken after the failure, it could already be the identity of files repaired meanwhile.
        self._attempted_generation = backend.generation(path)
        if unless_generation is not None and self._attempted_generation == unless_generation:
            return
        self.index_path = path
        retriever = backend.open_index(path, self.settings)
        if _live():
            self.post_message(IndexOpened(retriever, path))

    @work(thread=True, exclusive=True, exit_on_error=False, group="open")
    def open_several_worker(self: Session, index_ids: list[str]) -> None:
        """Open each of ``index_ids`` (searched together from then on, each hit naming its index)."""
        several = backend.open_several(self.settings, index_ids)
        first = next(iter(several.values()))
        if _live():
            self.post_message(IndexOpened(first, first.data.path, several))

    @work(thread=True, exclusive=True, exit_on_error=False, group="embedder")
    def load_embedder_worker(self: Session, retrievers=None) -> None:
        """The configured embedder; with ``retrievers`` (index id -> retriever), each index's own."""
        if retrievers is None:
            self.post_message(EmbedderReady(backend.load_embedder(self.settings, self.embedder_factory)))
            return
        per_index = backend.index_embedders(self.settings, retrievers)
        self.post_message(EmbedderReady(next(iter(per_index.values())), per_index))

    @work(thread=True, exclusive=True, exit_on_error=False, group="ivf")
    def build_ivf_worker(self: Session, retriever) -> None:
        generation = retriever.data.generation
        info = backend.build_ivf(retriever)
        if _live():
            self.post_message(IvfBuilt(info, generation))

    @work(thread=True, exclusive=True, exit_on_error=False, group="search")
    def search_worker(self: Session, retriever, request: backend.SearchRequest) -> None:
        """Search ``retriever``, or (a dict index id -> retriever) several indexes together."""
        if isinstance(retriever, dict):
            outcome = backend.run_search_many(retriever, request)
        else:
            outcome = backend.run_search(retriever, request)
        if _live():
            self.post_message(SearchDone(outcome))

    @work(thread=True, exclusive=True, exit_on_error=False, group="reranker")
    def load_reranker_worker(self: Session) -> None:
        reranker = backend.load_reranker(self.settings)
        self.post_message(RerankerReady(reranker))

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerank")
    def rerank_worker(self: Session, reranker, outcome: backend.SearchOutcome, budget_ms: float | None) -> None:
        """Rerank a search's candidates after its first results are shown; a newer search cancels it
        (it stops before its next pair)."""
        worker = get_current_worker()
        result = backend.rerank_outcome(reranker, outcome, budget_ms, should_stop=lambda: worker.is_cancelled)
        if _live():
            self.post_message(RerankDone(result))

    @work(thread=True, exclusive=True, exit_on_error=False, group="pack")
    def pack_worker(self: Session, retriever, tokenizer, query: str, hits: tuple, mode: str, budget: int) -> None:
        """Pack the shown results into ``budget`` tokens and write the Markdown form (reads the sources)."""
        outcome = backend.pack_results(retriever, tokenizer, query, hits, mode, budget)
        if _live():
            self.post_message(PackDone(outcome))

    @work(thread=True, exclusive=True, exit_on_error=False, group="cite")
    def cite_worker(self: Session, retriever, chunk_id: str) -> None:
        """Resolve the detail pane's chunk (line range and freshness)."""
        source = backend.cite(retriever, chunk_id)
        if _live():
            self.post_message(CitationReady(chunk_id, source, "detail"))

    @work(thread=True, exclusive=True, exit_on_error=False, group="jump")
    def jump_worker(self: Session, retriever, chunk_id: str, purpose: str) -> None:
        """Resolve a chunk with its source text, for the source view ("jump") or $EDITOR ("edit")."""
        source = backend.cite(retriever, chunk_id, with_source=purpose == "jump")
        if _live():
            self.post_message(CitationReady(chunk_id, source, purpose))

    @work(thread=True, exit_on_error=False, group="reload")
    def reload_worker(self: Session, retriever, skip_generation: str | None = None) -> None:
        """Move to a newly published generation; ``skip_generation`` is one known to be broken."""
        self._attempted_generation = backend.generation(retriever.data.path)  # before reading (open_index_worker)
        if skip_generation is not None and self._attempted_generation == skip_generation:
            return
        old_n = retriever.meta.n_chunks
        layered = retriever.data is not retriever.published  # a save searched through its overlay
        if retriever.reload():
            # The publish of the save an overlay showed already changes nothing one can see: said once, not twice.
            same = layered and retriever.data is retriever.published and retriever.meta.n_chunks == old_n
            self.post_message(IndexReloaded(retriever, old_n, quiet=same))

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def compare_worker(self: Session, target, retriever, query: str, k: int, nprobe: int | None, vectors_off: str | None,
                       params: dict[str, dict | str]) -> None:
        outcome = backend.compare(retriever, query, k, nprobe, vectors_off, params)
        if _live():
            target.post_message(CompareDone(outcome))

    @work(thread=True, exclusive=True, exit_on_error=False, group="list")
    def list_worker(self: Session, target) -> None:
        listing = backend.scan_indexes(self.settings)
        target.post_message(IndexListed(listing.names, listing.broken))

    @work(thread=True, exclusive=True, exit_on_error=False, group="stats")
    def stats_worker(self: Session, target, index_id: str, retriever, ivf_state: str) -> None:
        """Stats of ``index_id``: from ``retriever`` when it is the open one, else by opening it."""
        if retriever is None or retriever.meta.index_id != index_id:
            path = backend.locate_index(self.settings, index_id)
            retriever = backend.open_index(path, self.settings, remember=False)  # looked at, not used
        stats = backend.index_stats(retriever, ivf_state)
        if _live():
            target.post_message(StatsReady(index_id, stats))

    @work(thread=True, exclusive=True, exit_on_error=False, group="history")
    def history_worker(self: Session) -> None:
        self.history.load()
        problem = self.history.problem
        if problem and _live():
            self.call_from_thread(self.notify, one_line(problem, 300), title="query history", severity="warning",
                                  markup=False)

    # -- the one error handler -----------------------------------------------------------

    @while_running
    def on_worker_state_changed(self: Session, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state is not WorkerState.ERROR or worker.is_cancelled:
            return  # a superseded worker's failure concerns nobody
        error = worker.error
        if error is None:
            return  # (an ERROR state always carries its error)
        if not isinstance(error, RagtuiError | backend.SeveralIndexes):
            # A bug, not a state: say so in one line, keep the app alive, keep the traceback in the log.
            self.log.error(f"worker {worker.group} failed", error)
            if self.debug_errors:
                import traceback

                self.log.error("".join(traceback.format_exception(error)))
        self.work_failed(worker.group, error)

    # -- where each group's failure shows ------------------------------------------------------

    def work_failed(self: Session, group: str | None, error: BaseException) -> None:
        """Show ``error`` where ``group``'s work would have shown its result; never raises."""
        message = str(error) or type(error).__name__
        if isinstance(error, MemoryError):
            message = "out of memory (the index may be too large for the memory available)"
        elif not isinstance(error, RagtuiError | backend.SeveralIndexes):
            message = f"internal error: {type(error).__name__}: {message}"
        if group == "search":
            self._release_frames()  # the frames held for its results (``RagtuiApp._hold_frames``)
        if group == "open":
            self._open_failed(error, message)
        elif group == "embedder":
            self._vectors_off(message)
        elif group == "ivf":
            self.ivf_state = f"failed: {message}"
            self.notify(f"IVF build failed: {message}", severity="error")
        elif group == "search" and isinstance(error, ModelMismatchError | EmbeddingError):
            self._vectors_off(message)
        elif group == "search":
            self.search_failed(message)
        elif group in ("reranker", "rerank"):
            self.rerank_failed(message)
        elif group == "cite":
            self._citing = None
            if self.main.detail.chunk_id is not None:
                self.main.detail.show_problem(self.main.detail.chunk_id, message)
        elif group == "reload":
            if self.index_path is not None:
                self._bad_generation = self._attempted_generation
            self.live_text, self.live_error = f"reload failed: {message} (showing the previous index)", True
        elif group == "compare":
            for screen in self.screen_stack:
                if isinstance(screen, CompareScreen):
                    screen.show_error(message)
        elif group in ("list", "stats"):
            for screen in self.screen_stack:
                if isinstance(screen, IndexScreen):
                    screen.query_one(IndexStatsView).show_message(message, error=True)
        elif group != "history":
            self.notify(f"{group} failed: {message}", severity="error", timeout=8)
        self._refresh()

    def _open_failed(self: Session, error: BaseException, message: str) -> None:
        if self.retriever is not None:  # switching failed: keep searching the index that is open
            self.notify(f"cannot open {self.index_id}: {message}", severity="error", timeout=8)
            self.index_id, self.index_path = self.retriever.meta.index_id, self.retriever.data.path
            return
        if isinstance(error, backend.SeveralIndexes):
            self.index_state = "choose"
            self.main.show_notice("choose", *states.several(error.names))
            self.action_pick_index()
        elif isinstance(error, IndexMissingError):
            self.index_state, self._bad_generation = "missing", None
            broken = error.broken if isinstance(error, backend.OnlyBrokenIndexes) else ()
            names = error.names if isinstance(error, backend.NamedIndexMissing) else ()
            self.main.show_notice("missing", *states.missing(
                self.settings.artifacts, self.watch_folder, self.index_id, broken=broken, names=names,
                root_flag=states.root_flag(self.settings.artifacts, self.settings.artifacts_from)))
        else:
            self.index_state, self.index_problem = "invalid", message
            if self.index_path is not None:
                self._bad_generation = self._attempted_generation
            self.main.show_notice("invalid", *states.invalid(self.index_id, message), error=True)
