"""The ragtui terminal app, and ``create_app``, the one factory the CLI and the tests use.

The app owns the search session (index, embedder, mode, k, nprobe, query,
results) and every worker (``workers.Workers``); its screens only show what
it tells them. Public attributes below are what tests and the benchmark read.

Over 500 lines on purpose: the session state (index, mode, query, results,
the frame a keystroke is painted in) is one object; its actions and workers
already live in ``actions`` and ``workers``, typed by ``session.Session``,
and what is left here is the state and the transitions between its phases.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import ClassVar, NamedTuple

from textual.app import App
from textual.binding import BindingType
from textual.timer import Timer

from ragtui.config import Settings
from ragtui.core.errors import ModelMismatchError, RagtuiError
from ragtui.core.search.retriever import Retriever
from ragtui.core.textsafe import inline, neutralize
from ragtui.tui import backend, fmt, states
from ragtui.tui.actions import Actions
from ragtui.tui.history import QueryHistory, default_history_path
from ragtui.tui.keys import mode_bindings
from ragtui.tui.live import LiveAgent, LiveFollower
from ragtui.tui.messages import (
    CitationReady,
    EmbedderReady,
    IndexChanged,
    IndexOpened,
    IndexPublished,
    IndexReloaded,
    IvfBuilt,
    PackDone,
    RerankDone,
    RerankerReady,
    SearchDone,
    WatchActivity,
    while_running,
)
from ragtui.tui.palette import HistoryCommands
from ragtui.tui.safe import SAFE_TEXT
from ragtui.tui.screens.search import SearchScreen
from ragtui.tui.screens.source import SourceScreen
from ragtui.tui.widgets.mode_bar import LEXICAL_MODES, MODE_LABELS
from ragtui.tui.workers import Workers

__all__ = ["FRAME_HOLD", "Latency", "RagtuiApp", "create_app"]

FRAME_HOLD = 0.025
"""Seconds a typed key's echo may wait for its results, so that both are painted in one frame.

Searching as you type (no debounce), a key's echo and its results would be
two frames, each drawing and laying out the screen again; holding the echo
until the results are in the widgets (about a millisecond's search at 100k
chunks) paints them together. A slower search (a vector mode loading, a
large flat scan) lets the echo through after this long and its results
follow in a frame of their own.
"""


class Latency(NamedTuple):
    """One typed search, timed: ``time.perf_counter()`` stamps and the core's own seconds."""

    mode: str
    core: float
    """Seconds ``Retriever.search`` took (in the worker)."""
    typed: float
    """The keystroke (its ``Input.Changed``)."""
    shown: float
    """The results put into the widgets."""
    painted: float
    """The screen refreshed with them and everything else pending (citation included)."""


class RagtuiApp(Actions, Workers, App[int]):
    """Search one index, look into each result, follow it to its source.

    State a caller may read: ``retriever`` (None until opened); ``index_state``
    ("opening", "ready", "empty", "missing", "invalid", "choose");
    ``vectors`` ("loading", "ready", "off") and ``vectors_reason``;
    ``ivf_state`` ("not built", "building", "built", "failed: ..."); ``mode``,
    ``k``, ``nprobe`` (None: the index's default); ``query_text``; ``results``
    (the ``SearchOutcome`` on screen); ``stale_dropped`` (results discarded
    because a newer search was asked for); ``reloads``; ``rendered_seq`` (the
    request whose results are painted); ``latencies`` (a ``Latency`` per typed
    search); ``timings`` (seconds from construction: "usable", a searchable
    screen; "vectors", vector modes ready); ``editor_runs`` (argv lists run);
    ``rerank_n`` (candidates the cross-encoder reranks, 0: off), ``reranker``
    (None until loaded), ``rerank_text`` (the mode bar's marker),
    ``reranked`` (the ``RerankOutcome`` on screen, None while the first-stage
    order is shown); ``packed`` (the last ``backend.PackOutcome``, ``p``);
    ``frames_held`` (a typed key's echo waits for its results, ``FRAME_HOLD``).
    """

    CSS_PATH = "ragtui_app.tcss"
    TITLE = "ragtui"
    COMMANDS = App.COMMANDS | {HistoryCommands}
    CURSOR_BLINK: ClassVar[bool] = True
    """Tests turn this off so screenshots do not depend on when they are taken."""

    BINDINGS: ClassVar[list[BindingType]] = [*mode_bindings(function_keys=True)]

    def __init__(
        self, settings: Settings, *, watch: Path | None = None, embedder_factory=None, debounce: float = 0.12,
        poll_seconds: float = 1.0, history: QueryHistory | None = None, debug: bool = False,
    ) -> None:
        self._t0 = time.perf_counter()
        self.settings = settings
        self.watch_folder = Path(watch).resolve() if watch else None
        self.index_id: str | None = settings.index or (LiveAgent.index_id_for(watch, settings) if watch else None)
        self.index_path: Path | None = None
        self.embedder_factory = embedder_factory
        self.debounce, self.poll_seconds, self.debug_errors = debounce, poll_seconds, debug
        self.history = history if history is not None else QueryHistory(default_history_path())
        self.retriever: Retriever | None = None
        self.several: dict[str, Retriever] | None = None
        """Several indexes searched together (index id -> retriever, ``retriever`` the first), else None."""
        self.index_state, self.index_problem = "opening", ""
        self.embedder = None
        self.index_embedders: dict = {}
        """The open indexes' own embedders (index id -> embedder) when the configured one is not theirs."""
        self.vectors, self.vectors_reason = "loading", states.vectors_loading_reason
        self.ivf_state = "not built"
        self.ivf_info: backend.IvfInfo | None = None
        self.mode, self.k, self.nprobe = "bm25", 10, None
        self.fusion: str | None = settings.search.get("fusion")
        """Hybrid's fusion as chosen (``[search] fusion``; ``f`` toggles rrf); None: the index's embedder's fit."""
        self.query_text = ""
        self.results: backend.SearchOutcome | None = None
        self.terms: dict[str, float] = {}
        """The shown query's terms worth lighting, with their relative weights (``kwic.salient``)."""
        self.query_time = ""
        self.stale_dropped = self.reloads = 0
        self.rendered_seq = 0
        self.latencies: list[Latency] = []
        self.timings: dict[str, float] = {}
        self.editor_runs: list[list[str]] = []
        self.packed: backend.PackOutcome | None = None
        """The last pack written (``p``)."""
        self.live_text, self.live_error = ("live: reloads when the index changes", False)
        self.rerank_n = int(settings.rerank.get("n") or 0)
        self.rerank_budget_ms = settings.rerank.get("budget_ms") or None
        self.reranker = None
        self.rerank_text = ""
        self.reranked: backend.RerankOutcome | None = None
        self.agent: LiveAgent | None = None
        self.follower: LiveFollower | None = None
        self._seq = 0
        self._typed_at: float | None = None
        self._debounce_timer: Timer | None = None
        self._held: contextlib.AbstractContextManager | None = None  # frames held for a search (_hold_frames)
        self._hold_timer: Timer | None = None
        self._bad_generation: str | None = None
        self._attempted_generation: str | None = None  # what the last open or reload worker began to read
        self._citing: str | None = None  # the chunk a detail citation worker is resolving
        self._main = SearchScreen()
        super().__init__()

    @property
    def requested_seq(self) -> int:
        """The number of the newest search asked for (``rendered_seq`` catches up with it)."""
        return self._seq

    @property
    def frames_held(self) -> bool:
        """Painting waits for a typed key's results (``FRAME_HOLD``)."""
        return self._held is not None

    def get_default_screen(self) -> SearchScreen:
        return self._main

    @property
    def main(self) -> SearchScreen:
        """The search screen (always at the bottom of the screen stack)."""
        return self._main

    def main_mounted(self) -> None:
        """Start everything once the search screen exists (called by its ``on_mount``)."""
        self.main.query_box.cursor_blink = self.CURSOR_BLINK
        self.main.query_box.focus()
        self.main.detail.clear("type a query: results appear as you type")
        self._refresh()
        self.history_worker()
        self.open_index_worker(self.index_id)
        self.load_embedder_worker()
        if self.rerank_n:
            self._load_reranker()
        self.set_interval(self.poll_seconds, self.poll_index, name="poll-index")

    # -- the terminal-safety choke points (ragtui.tui.safe) -------------------------------------

    def get_line_filters(self):
        """Textual's filters plus ``SAFE_TEXT``: no widget's text can drive the terminal, however it got there."""
        return [*super().get_line_filters(), SAFE_TEXT]

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Textual's ``notify``, always as plain text (``markup`` is accepted and ignored): a ``[`` in a
        file name is a ``[``, and every escape or bidi character is shown as a stand-in."""
        super().notify(neutralize(message), title=inline(title), severity=severity, timeout=timeout, markup=False)

    def action_help_quit(self) -> None:
        """Textual's ctrl+c hint, without the markup that plain notifications would show literally."""
        for key, active in self.active_bindings.items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {key} to quit the app", title="Do you want to quit?")
                return

    def copy_to_clipboard(self, text: str) -> None:
        """Textual's OSC 52 copy (also used for text selected with the mouse), of ``text`` neutralised:
        what is pasted cannot drive the terminal it is pasted into (``copy_chunk`` also keeps names on one line)."""
        super().copy_to_clipboard(neutralize(text))

    def on_unmount(self) -> None:
        if self.follower is not None:
            self.follower.stop()
        if self.agent is not None:
            self.agent.stop()

    # -- the index --------------------------------------------------------------------------

    @while_running
    def on_index_opened(self, message: IndexOpened) -> None:
        self.retriever, self.index_path = message.retriever, message.path
        self.several = message.several
        self.index_id = self.retriever.meta.index_id
        if self.several:
            self.nprobe = None  # nprobe is one index's; several are searched with each one's default
        self.forget_citation()
        self.ivf_state, self.ivf_info, self._bad_generation = "not built", None, None
        if self.follower is not None:
            self.follower.stop()
        self.follower = LiveFollower(self.post_message, self.settings.artifacts, self.index_id).start()
        self.main.detail.clear("type a query: results appear as you type")
        self._index_state_from_meta()
        self.call_after_refresh(lambda: self.timings.setdefault("usable", time.perf_counter() - self._t0))
        self._attach_vectors()
        self.search_now()

    @while_running
    def on_index_reloaded(self, message: IndexReloaded) -> None:
        if message.retriever is not self.retriever and not any(
                message.retriever is r for r in (self.several or {}).values()):
            return  # another index was opened meanwhile
        self.reloads += 1
        self.ivf_state, self.ivf_info, self._bad_generation = "not built", None, None
        self.live_error = False
        n = message.retriever.meta.n_chunks
        name = f"{message.retriever.meta.index_id} " if self.several else ""
        if not message.quiet:
            self.notify(f"index {name}reloaded: {message.old_n:,} → {n:,} chunks", timeout=3)
        self.forget_citation()
        self._index_state_from_meta()
        self._attach_vectors()
        self.search_now()

    @while_running
    def on_index_published(self, message: IndexPublished) -> None:
        self.live_text, self.live_error = f"watch: {message.summary}", False
        self._refresh()
        self.poll_index()

    @while_running
    def on_index_changed(self, message: IndexChanged) -> None:
        self.poll_index()

    @while_running
    def on_watch_activity(self, message: WatchActivity) -> None:
        self.live_text, self.live_error = message.text, message.error
        self._refresh()

    def poll_index(self) -> None:
        """Reload the open index if a new generation was published; open one if none is open yet."""
        if any(w.group in ("reload", "open") and w.is_running for w in self.workers):
            return
        if self.several:
            for r in self.several.values():
                self.reload_worker(r)
        elif self.retriever is not None:
            self.reload_worker(self.retriever, self._bad_generation)
        elif self.index_state in ("missing", "invalid"):
            self.open_index_worker(self.index_id, self._bad_generation)

    def _index_state_from_meta(self) -> None:
        assert self.retriever is not None  # called once an index is open
        meta = self.retriever.meta
        if meta.n_chunks == 0 and not any(r.meta.n_chunks for r in (self.several or {}).values()):
            self.index_state = "empty"
            self.main.show_notice("empty", *states.empty(meta.index_id))
        else:
            self.index_state = "ready"
            self.main.show_panes()
        self._refresh()

    # -- vectors ------------------------------------------------------------------------------

    @while_running
    def on_embedder_ready(self, message: EmbedderReady) -> None:
        self.embedder = message.embedder
        self.index_embedders = message.per_index or {}
        if self.retriever is None:  # no index yet: the model is checked against it when it opens
            self.vectors, self.vectors_reason = "ready", ""
        self._attach_vectors()
        if self.watch_folder is not None and self.agent is None:
            self.agent = LiveAgent(self.post_message, self.watch_folder, self.settings,
                                   LiveAgent.index_id_for(self.watch_folder, self.settings), self.embedder)
            try:
                self.agent.start()
            except RagtuiError as e:
                self.live_text, self.live_error = f"watch off: {e}", True
            else:
                self.live_text = f"watch: indexing {self.watch_folder.name}…"
            self._refresh()

    def _attach_vectors(self) -> None:
        r = self.retriever
        if r is None or self.embedder is None:
            return
        opened = self.several or {r.meta.index_id: r}
        own = self.index_embedders
        for index_id, each in opened.items():
            try:
                each.check_embedder(own.get(index_id, self.embedder))
            except ModelMismatchError as e:
                for other in opened.values():
                    other.embedder = None
                if self.embedder_factory is None and not all(i in own for i in opened):
                    # The index chooses its embedder (as `ragtui search` does): load the one it was built with.
                    self.vectors, self.vectors_reason = "loading", states.vectors_loading_reason
                    self.load_embedder_worker(dict(opened))
                    self._refresh()
                    return
                self._vectors_off(str(e))
                return
        for index_id, each in opened.items():
            each.embedder = own.get(index_id, self.embedder)
        self.vectors, self.vectors_reason = "ready", ""
        if self.ivf_state == "not built" and r.meta.n_chunks > 0 and not self.several:
            self.ivf_state = "building"
            self.build_ivf_worker(r)
        self._refresh()
        if self.mode not in LEXICAL_MODES:
            self.search_now()

    def _vectors_off(self, reason: str) -> None:
        self.vectors, self.vectors_reason, self.ivf_state = "off", reason, "not built"
        if self.watch_folder is not None and self.embedder is None:
            self.live_text, self.live_error = f"watch off: no embedder ({reason})", True
        if self.mode not in LEXICAL_MODES:
            self.notify(f"vector search is off: {reason}. BM25 still works.", severity="warning", timeout=8)
            self.mode = "bm25"
            self.search_now()
        self._refresh()

    @while_running
    def on_ivf_built(self, message: IvfBuilt) -> None:
        r = self.retriever
        if r is None or message.generation != r.data.generation:
            return  # built for a generation that has since been replaced; the reload started a new build
        self.ivf_state, self.ivf_info = "built", message.info
        self.timings.setdefault("vectors", time.perf_counter() - self._t0)
        self._refresh()

    # -- searching ----------------------------------------------------------------------------

    def query_changed(self, value: str) -> None:
        self.query_text = value
        self._typed_at = time.perf_counter()
        if self._debounce_timer is not None:
            self._debounce_timer.stop()
            self._debounce_timer = None
        if self.debounce <= 0:
            # The key's echo waits for its results (at most FRAME_HOLD): one frame per keystroke, not two.
            self._hold_frames()
            self.search_now()
        else:
            self._debounce_timer = self.set_timer(self.debounce, self.search_now, name="debounce")

    def query_submitted(self, value: str) -> None:
        self.history.add(value)
        if self._debounce_timer is not None:
            self.search_now()  # still in the pause: search now rather than after it

    def use_query(self, query: str) -> None:
        """Put ``query`` in the query box and search it (from the palette's history)."""
        self.main.query_box.value = query
        self.query_changed(query)
        self.search_now()

    def search_now(self) -> None:
        """Search the current query with the current mode, k and nprobe (newest request wins)."""
        if self._debounce_timer is not None:
            self._debounce_timer.stop()
            self._debounce_timer = None
        self._seq += 1
        if not self._start_search():
            self._release_frames()  # no search under way: nothing to wait for

    def _start_search(self) -> bool:
        """Start the worker for request ``_seq``; False when none was started (and say why)."""
        r = self.retriever
        if r is None or self.index_state != "ready":
            return False
        query = self.query_text.strip()
        if not query:
            self.results, self.query_time = None, ""
            self.main.results.show((), self.mode, {})
            self.main.detail.clear("type a query: results appear as you type")
            self.rendered_seq = self._seq
            self._refresh()
            return False
        if self.mode not in LEXICAL_MODES and self.vectors != "ready":
            self._refresh()  # the bar says why; EmbedderReady searches again
            return False
        rerank = self.rerank_n if self.reranker is not None and not self.several else 0
        nprobe = None if self.several else self.nprobe
        try:
            request = backend.search_request(self.settings, self._seq, query, self.mode, self.k, nprobe, rerank,
                                             self.fusion)
        except RagtuiError as e:  # a query or a [search] combination this mode refuses: said where results go
            self.search_failed(str(e))
            return False
        self.search_worker(self.several or r, request)
        return True

    def search_failed(self, message: str) -> None:
        """A search that could not run: the results of the query before are cleared, the reason in their place."""
        self.results, self.query_time = None, ""
        self.main.results.show((), self.mode, {})
        self.main.detail.clear(f"cannot search: {message}", error=True)
        self.rendered_seq = self._seq
        self._refresh()

    def _hold_frames(self) -> None:
        """Paint nothing until the search under way has its results in the widgets, or ``FRAME_HOLD``
        seconds have passed, whichever comes first (``_release_frames``)."""
        if self._held is None:
            self._held = self.batch_update()
            self._held.__enter__()
            self._hold_timer = self.set_timer(FRAME_HOLD, self._release_frames, name="frame-hold")

    def _release_frames(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        if self._hold_timer is not None:
            self._hold_timer.stop()
            self._hold_timer = None
        held.__exit__(None, None, None)
        if self.screen_stack:
            self.screen.check_idle()  # what changed meanwhile is painted in the next frame

    def ranking_shown(self) -> str:
        """Hybrid's fusion as the mode bar shows it ("zscore 0.7 · bm25stem"), as the open index's search fills it."""
        try:
            model = self.retriever.meta.embedding_model if self.retriever is not None else ""
            return backend.ranking_text(backend.search_params(self.settings, "hybrid", self.fusion), model)
        except RagtuiError as e:
            return f"[search]: {e}"

    @while_running
    def on_search_done(self, message: SearchDone) -> None:
        outcome = message.outcome
        if outcome.request.seq != self._seq:
            self.stale_dropped += 1
            return
        self.results, self.terms = outcome, outcome.weights
        self.query_time = fmt.ms(outcome.seconds)
        self.reranked = None
        if outcome.request.rerank and self.reranker is not None and outcome.hits:
            # The first-stage order is shown now; the reranked one replaces it when it arrives.
            self.rerank_text = f"reranking {min(outcome.request.rerank, len(outcome.hits))}…"
            self.rerank_worker(self.reranker, outcome, self.rerank_budget_ms)
        elif self.rerank_n and self.reranker is not None:
            self.rerank_text = "rerank: nothing to rerank"
        table = self.main.results
        table.show(outcome.hits[: outcome.request.k], outcome.request.mode, self.terms,
                   outcome.sources[: outcome.request.k])
        if table.selected_hit is not None:
            self.hit_highlighted(table.selected_hit)
        else:
            self.main.detail.clear(f"no results for this query in {MODE_LABELS[outcome.request.mode]}")
        self._refresh()
        self.call_after_refresh(self._painted, outcome, time.perf_counter())
        self._release_frames()

    # -- reranking ------------------------------------------------------------------------------

    def _load_reranker(self) -> None:
        self.rerank_text = "rerank: loading the cross-encoder…"
        self.load_reranker_worker()
        self._refresh()

    def toggle_rerank(self) -> None:
        """Turn reranking on (the configured n, else 20) or off, and search again."""
        if self.rerank_n:
            self.rerank_n, self.rerank_text, self.reranked = 0, "", None
            self.workers.cancel_group(self, "rerank")
        elif self.one_index_only("reranking"):
            return
        else:
            self.rerank_n = int(self.settings.rerank.get("n") or 0) or 20
            if self.reranker is None:
                self._load_reranker()
        self._refresh()
        self.search_now()

    @while_running
    def on_reranker_ready(self, message: RerankerReady) -> None:
        self.reranker = message.reranker
        if self.rerank_n:
            self.rerank_text = f"rerank {self.rerank_n}"
            self.search_now()
        self._refresh()

    @while_running
    def on_rerank_done(self, message: RerankDone) -> None:
        done: backend.RerankOutcome = message.outcome
        if self.results is not done.outcome or done.outcome.request.seq != self._seq or not self.rerank_n:
            self.stale_dropped += 1
            return
        self.reranked = done
        result = done.reranked
        self.rerank_text = result.describe() + f" · {fmt.ms(result.seconds)}"
        table = self.main.results
        table.show(result.hits[: done.outcome.request.k], done.outcome.request.mode, self.terms)
        if table.selected_hit is not None:
            self.hit_highlighted(table.selected_hit)
        self._refresh()

    def rerank_failed(self, message: str) -> None:
        """Loading or running the cross-encoder failed: reranking goes off, first-stage results stay."""
        self.rerank_n, self.rerank_text, self.reranked = 0, "", None
        self.notify(f"reranking is off: {message}", severity="warning", timeout=8)

    @while_running
    def _painted(self, outcome: backend.SearchOutcome, shown: float) -> None:
        self.rendered_seq = outcome.request.seq
        if self._typed_at is not None:
            self.latencies.append(Latency(outcome.request.mode, outcome.seconds, self._typed_at, shown,
                                          time.perf_counter()))
            self._typed_at = None

    def hit_highlighted(self, hit) -> None:
        """Show ``hit`` in the detail pane and resolve its citation (once per chunk)."""
        detail = self.main.detail
        retriever = self.retriever_for(hit)
        # Several indexes: two may hold the same chunk_id, so a citation is resolved for every row.
        known = detail.chunk_id == hit.chunk_id and detail.citation is not None and not self.several
        detail.show_hit(hit, self.terms, self._record_for(hit))
        if not known and (self._citing != hit.chunk_id or self.several) and retriever is not None:
            self._citing = hit.chunk_id
            self.cite_worker(retriever, hit.chunk_id)

    def retriever_for(self, hit) -> Retriever | None:
        """The retriever of ``hit``'s own index: with several indexes, the one the results table names
        for it (``hit`` is the selected row), else the open one."""
        table = self.main.results
        if self.several and hit is table.selected_hit:
            return self.several.get(table.selected_source or "")
        return self.retriever

    def one_index_only(self, what: str) -> bool:
        """With several indexes open, say that ``what`` works on one index at a time and return True."""
        if not self.several:
            return False
        self.notify(f"{what} works on one index at a time: press i and pick one (enter without marks)",
                    severity="warning", timeout=5)
        return True

    def forget_citation(self) -> None:
        """The source or the index may have changed: resolve the shown chunk's citation again."""
        self.main.detail.forget_citation()
        self._citing = None

    def _record_for(self, hit):
        retriever = self.retriever_for(hit)
        if retriever is None:
            return None
        try:
            record = retriever.data.records[hit.row]
        except (RagtuiError, IndexError, AttributeError):
            return None
        return record if record.chunk_id == hit.chunk_id else None

    @while_running
    def on_citation_ready(self, message: CitationReady) -> None:
        citation = message.source.citation
        if message.purpose == "detail":
            if self._citing == message.chunk_id:
                self._citing = None
            self.main.detail.show_citation(message.chunk_id, citation)
        elif message.purpose == "jump":
            if message.source.text is None:
                self.notify(f"cannot show {citation.doc_id}: the source file is {citation.status}",
                            severity="warning")
                return
            self.push_screen(SourceScreen(citation, message.source.text))
        else:
            self.open_in_editor(citation)

    # -- packing ---------------------------------------------------------------------------------

    @while_running
    def on_pack_done(self, message: PackDone) -> None:
        outcome = message.outcome
        self.packed = outcome
        result = outcome.pack
        self.copy_to_clipboard(outcome.text)
        if not result.snippets:
            self.notify(f"nothing fits the budget of {result.budget} tokens ({result.skipped} left out)",
                        severity="warning", timeout=6)
            return
        self.notify(f"packed {len(result.snippets)} snippets, {result.used}/{result.budget} tokens → "
                    f"{outcome.path} (copied)", timeout=8)

    # -- what the bars show ------------------------------------------------------------------

    def _refresh(self) -> None:
        """Show the session's state in the mode bar and the status line."""
        if self.main.is_mounted:
            self.main.show_session(self)


def create_app(
    settings: Settings | None = None, *, watch: str | Path | None = None, embedder_factory=None,
    debounce: float = 0.12, poll_seconds: float = 1.0, history: QueryHistory | None = None, debug: bool = False,
) -> RagtuiApp:
    """The app for ``settings`` (default: ``load_settings()``).

    ``watch``: run the sync agent on that folder in-process.
    ``embedder_factory(settings) -> Embedder`` replaces the configured embedder
    (tests pass a fast deterministic one). ``debounce``: seconds of quiet
    typing before a search (0: search on every keystroke). ``poll_seconds``:
    how often the index is checked for a new generation. ``history``: the
    query history (default: kept in ``$XDG_STATE_HOME/ragtui/history``).
    """
    if settings is None:
        from ragtui.config import load_settings

        settings = load_settings()
    return RagtuiApp(settings, watch=Path(watch) if watch else None, embedder_factory=embedder_factory,
                     debounce=debounce, poll_seconds=poll_seconds, history=history, debug=debug)
