"""The query box: a one-line input whose up and down arrows walk the query history."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from ragtui.tui.history import QueryHistory

__all__ = ["QueryInput"]


class QueryInput(Input):
    """Where the query is typed. ``history`` is shared with the app (the app records queries into it)."""

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
    ]

    def __init__(self, history: QueryHistory, **kwargs) -> None:
        super().__init__(placeholder="type to search (BM25 terms are highlighted)", compact=True, **kwargs)
        self.history = history
        """The history the arrows walk."""

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
