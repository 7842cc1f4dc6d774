"""Compare modes: one query's top-k under flat, IVF and BM25 side by side, and how far they agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ragtui.core.textsafe import neutralize, one_line
from ragtui.tui.backend import COMPARED
from ragtui.tui.keys import k_nprobe_bindings
from ragtui.tui.messages import CompareDone
from ragtui.tui.widgets.compare_panel import ComparePanel, common_folder
from ragtui.tui.widgets.mode_bar import MODE_LABELS

if TYPE_CHECKING:
    from ragtui.tui.ragtui_app import RagtuiApp

__all__ = ["CompareScreen"]


class CompareScreen(Screen):
    """``outcome`` is the ``backend.CompareOutcome`` shown (None while the searches run)."""

    if TYPE_CHECKING:
        app: RagtuiApp  # the app this runs in, with its session (so mypy checks what is used of it)

    DEFAULT_CSS = """
    CompareScreen #compare-head {
        height: auto;
        background: $panel;
        padding: 0 1;
    }
    CompareScreen #compare-panels {
        height: 1fr;
    }
    """

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = [
        Binding("escape,q", "close", "Back"),
        *k_nprobe_bindings(show=True),
        Binding("question_mark", "app.help", "Help", show=False),
    ]

    def __init__(self, query: str) -> None:
        super().__init__()
        self.query_text = query
        self.outcome = None
        self.error: str | None = None
        """Why the comparison failed, when it did."""

    def compose(self) -> ComposeResult:
        yield Static(id="compare-head")
        with Horizontal(id="compare-panels"):
            for mode in COMPARED:
                yield ComparePanel(mode)
        yield Footer()

    def on_mount(self) -> None:
        self.run()

    def run(self) -> None:
        """(Re)run the three searches with the app's current k and nprobe."""
        self.outcome, self.error = None, None
        self._head(Text("comparing…", style="italic"))
        self.app.start_compare(self, self.query_text)

    def _head(self, body: Text, folder: str = "") -> None:
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(f"“{one_line(self.query_text, 60)}”", "bold")
        app = self.app
        head.append(f"  k {app.k} · nprobe {app.nprobe_shown()}", "dim")
        if folder:
            head.append(f" · chunk_ids under {one_line(folder, 30)}", "dim")
        head.append("\n")
        head.append_text(body)
        self.query_one("#compare-head", Static).update(head)

    def on_compare_done(self, message: CompareDone) -> None:
        message.stop()
        outcome = self.outcome = message.outcome
        folder = common_folder(h.chunk_id for hits in outcome.runs.values() for h in hits)
        for panel in self.query(ComparePanel):
            panel.show(outcome, tuple(m for m in COMPARED if m != panel.mode), folder)
        body = Text()
        if outcome.overlap:
            body.append(f"overlap@{outcome.k}  ", "dim")
            body.append(" · ".join(f"{MODE_LABELS[a]}∩{MODE_LABELS[b]} {n}" for (a, b), n in outcome.overlap.items()))
        else:
            body.append("only one mode ran: nothing to compare", "italic")
        if outcome.ivf_recall is not None:
            body.append(f"\nIVF recall@{outcome.k} vs flat  ", "dim")
            body.append(f"{outcome.ivf_recall:.2f}", "bold")
        self._head(body, folder)
        first = next((p for p in self.query(ComparePanel) if p.hits), None)
        if first is not None:
            first.table.focus()

    def show_error(self, message: str) -> None:
        self.error = message
        self._head(Text(neutralize(message), style="red"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        panel = next(a for a in event.data_table.ancestors if isinstance(a, ComparePanel))
        hit = panel.hit_at(event.cursor_row)
        if hit is not None:
            self.app.action_jump(hit.chunk_id)

    def action_close(self) -> None:
        self.dismiss()
