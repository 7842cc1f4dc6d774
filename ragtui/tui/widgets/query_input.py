"""The query box: a one-line input whose up and down arrows walk the query history.

Every printable key types (``?`` included); ``ctrl+g`` opens the help, as in
nano ("^G Get Help"), and the footer says so while the box has the focus.
F1 to F4 choose the mode here, as everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.binding import Binding
from textual.widgets import Input

from ragtui.core.search.retriever import MAX_QUERY_CHARS
from ragtui.tui.history import QueryHistory

if TYPE_CHECKING:
    from ragtui.tui.ragtui_app import RagtuiApp

__all__ = ["QueryInput"]


class QueryInput(Input):
    """Where the query is typed. ``history`` is shared with the app (the app records queries into it).
    Each change goes straight to the app's ``query_changed``."""

    if TYPE_CHECKING:
        app: RagtuiApp  # the app this runs in, with its session (so mypy checks what is used of it)

    DEFAULT_CSS = """
    QueryInput {
        width: 1fr;
        border: none;
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    QueryInput:focus {
        background: $primary 20%;
    }
    """

    BINDINGS = [
        Binding("up", "history_older", "Older query", show=False),
        Binding("down", "history_newer", "Newer query", show=False),
        Binding("escape", "leave", "Results"),
        Binding("ctrl+g", "app.help", "Help"),
    ]

    def __init__(self, history: QueryHistory, **kwargs) -> None:
        super().__init__(placeholder="type to search (BM25 terms are highlighted)", compact=True,
                         max_length=MAX_QUERY_CHARS, **kwargs)
        self.history = history
        """The history the arrows walk."""
        self._told_full: str | None = None

    def on_input_changed(self, event: Input.Changed) -> None:
        # Here, where the change is first seen, not on the screen: the message would climb to it
        # through the query row's queue, and the screen may paint a frame meanwhile.
        event.stop()
        self.app.query_changed(event.value)

    def restricted(self) -> None:
        """A key would make the query longer than the cap: say so (once per full query, not per key held)."""
        self.app.bell()
        if self._told_full != self.value:
            self._told_full = self.value
            self.notify(f"a query may have at most {MAX_QUERY_CHARS:,} characters", severity="warning", timeout=4)

    def _on_paste(self, event: events.Paste) -> None:
        # Keep what fits of a long paste (its first line, as Input does) and say what was cut:
        # the box stays responsive and the search stays bounded.
        event.stop()
        lines = event.text.splitlines()
        if not lines:
            return
        line = lines[0]
        start, end = sorted(self.selection)
        room = MAX_QUERY_CHARS - (len(self.value) - (end - start))
        if len(line) > room:
            self.notify(f"pasted text cut to {max(room, 0):,} characters: a query may have at most "
                        f"{MAX_QUERY_CHARS:,}", severity="warning", timeout=6)
            line = line[: max(room, 0)]
        if line:
            self.replace(line, start, end)

    def action_history_older(self) -> None:
        entry = self.history.older(self.value)
        if entry is not None:
            self._show(entry)

    def action_history_newer(self) -> None:
        entry = self.history.newer()
        if entry is not None:
            self._show(entry)

    def action_leave(self) -> None:
        """Go to the results (the keys for results work there)."""
        self.screen.focus_next()

    def _show(self, text: str) -> None:
        self.value = text
        self.cursor_position = len(text)
