"""The main screen: query box, mode selector, results table, detail pane, status line.

At 120 columns and wider the detail pane sits beside the results instead
of below them. The screen holds no search state: it forwards what the
person does to the app and shows what the app tells it to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input, Static

from ragtui.tui import backend
from ragtui.tui.keys import k_nprobe_bindings, mode_bindings
from ragtui.tui.widgets.detail_pane import DetailPane
from ragtui.tui.widgets.mode_bar import ModeBar, ModeBarState, ModeChip
from ragtui.tui.widgets.notice import Notice
from ragtui.tui.widgets.query_input import QueryInput
from ragtui.tui.widgets.results_table import ResultsTable
from ragtui.tui.widgets.status_line import StatusLine, StatusState

if TYPE_CHECKING:
    from ragtui.tui.ragtui_app import RagtuiApp

__all__ = ["SearchScreen"]


class SearchScreen(Screen):
    """Widgets by id: ``#query`` (QueryInput), ``#modes`` (ModeBar), ``#results`` (ResultsTable),
    ``#detail`` (DetailPane), ``#notice`` (Notice), ``#status`` (StatusLine)."""

    if TYPE_CHECKING:
        app: RagtuiApp  # the app this runs in, with its session (so mypy checks what is used of it)

    DEFAULT_CSS = """
    SearchScreen #query-row {
        height: 1;
    }
    SearchScreen #query-prompt {
        width: auto;
        padding: 0 0 0 1;
        background: $boost;
        color: $accent;
        text-style: bold;
    }
    SearchScreen #switcher {
        height: 1fr;
    }
    SearchScreen #panes {
        layout: vertical;
    }
    SearchScreen #results {
        height: 2fr;
    }
    SearchScreen #detail {
        height: 3fr;
    }
    SearchScreen.-wide #panes {
        layout: horizontal;
    }
    SearchScreen.-wide #results {
        width: 2fr;
        height: 1fr;
    }
    SearchScreen.-wide #detail {
        width: 1fr;
        height: 1fr;
        border-top: none;
        border-left: solid $primary 50%;
    }
    """

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = [
        *mode_bindings(function_keys=False),
        Binding("f", "app.toggle_fusion", "Fusion", show=False),
        *k_nprobe_bindings(show=False),
        Binding("o", "app.jump", "Open source"),
        Binding("e", "app.edit", "$EDITOR"),
        Binding("c,y", "app.copy_chunk_id", "Copy id"),
        Binding("v", "app.compare", "Compare"),
        Binding("p", "app.pack", "Pack", show=False),
        Binding("i", "app.pick_index", "Index"),
        Binding("t", "app.toggle_theme", "Theme", show=False),
        Binding("x", "app.toggle_rerank", "Rerank", show=False),
        Binding("r", "app.reload", "Reload", show=False),
        Binding("question_mark", "app.help", "Help"),
        Binding("slash,s", "focus_query", "Search", show=False),
        Binding("escape", "focus_query", "Search", show=False),
        Binding("q", "app.quit", "Quit", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Horizontal(id="query-row"):
            yield Static("›", id="query-prompt")
            yield QueryInput(self.app.history, id="query")
        yield ModeBar(id="modes")
        with ContentSwitcher(initial="panes", id="switcher"):
            with Container(id="panes"):
                yield ResultsTable(id="results")
                yield DetailPane(id="detail")
            yield Notice(id="notice")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.app.main_mounted()

    # -- what the app calls -------------------------------------------------------------

    @property
    def results(self) -> ResultsTable:
        return self.query_one("#results", ResultsTable)

    @property
    def detail(self) -> DetailPane:
        return self.query_one("#detail", DetailPane)

    @property
    def query_box(self) -> QueryInput:
        return self.query_one("#query", QueryInput)

    @property
    def notice(self) -> Notice:
        return self.query_one("#notice", Notice)

    def show_notice(self, kind: str, title: str, body: str = "", *, error: bool = False) -> None:
        """Replace the results and detail with a message (for states with nothing to search)."""
        self.notice.show(kind, title, body, error=error)
        self.query_one("#switcher", ContentSwitcher).current = "notice"

    def show_panes(self) -> None:
        self.notice.kind = ""
        self.query_one("#switcher", ContentSwitcher).current = "panes"

    @property
    def showing_notice(self) -> str:
        """The notice's kind while one is shown, else ""."""
        return self.notice.kind if self.query_one("#switcher", ContentSwitcher).current == "notice" else ""

    # -- what the person does ------------------------------------------------------------

    def show_session(self, app) -> None:
        """Show the app's mode, k, nprobe and query time in the mode bar, and its index,
        vector and live state in the status line."""
        r = app.retriever
        nlist, default = backend.resolved_ivf(r) if r is not None else (0, 0)
        self.query_one("#modes", ModeBar).show(
            ModeBarState(app.mode, app.k, app.nprobe, default, nlist, app.vectors, app.query_time,
                         app.ranking_shown(), getattr(app, "rerank_text", ""), len(app.several or ())))
        several = app.several
        if several:
            n = sum(x.meta.n_chunks for x in several.values())
            index = f"{' + '.join(several)} · {n:,} chunks in {len(several)} indexes"
        elif r is not None:
            m = r.meta
            index = f"{m.index_id} · {m.n_chunks:,} chunks · {m.embedding_model} ({m.dim}d)"
        else:
            index = {"opening": "opening the index…", "choose": "no index chosen"}.get(app.index_state, "no index")
        if app.vectors == "ready" and r is None:
            vectors = "embedder ready"
        elif app.vectors == "ready":
            vectors = "vectors on" + (" · IVF building…" if app.ivf_state == "building" else "")
        elif app.vectors == "loading":
            vectors = "vectors: loading the embedder…"
        else:
            vectors = f"vectors off: {app.vectors_reason}"
        self.query_one("#status", StatusLine).show(
            StatusState(index, vectors, app.vectors == "off", app.live_text, app.live_error))

    def action_focus_query(self) -> None:
        self.query_box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.app.query_submitted(event.value)
        if self.results.hits:
            self.results.focus()

    def on_results_table_highlighted(self, event: ResultsTable.Highlighted) -> None:
        event.stop()
        hit = self.results.selected_hit
        if hit is not None:
            self.app.hit_highlighted(hit)

    def on_results_table_selected(self, event: ResultsTable.Selected) -> None:
        event.stop()
        self.app.action_jump()

    def on_mode_chip_clicked(self, event: ModeChip.Clicked) -> None:
        event.stop()
        self.app.action_set_mode(event.mode)
