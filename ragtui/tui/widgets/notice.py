"""A calm full-pane message for the states with nothing to search: what happened and what to do."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ragtui.core.textsafe import neutralize

__all__ = ["Notice"]


class Notice(Static):
    """``kind`` is the state shown ("missing", "empty", "invalid", "opening", ...); ``title``
    and ``body`` the words (``body`` may hold commands to run, shown as written)."""

    DEFAULT_CSS = """
    Notice {
        height: 1fr;
        padding: 1 2;
        content-align: center middle;
        text-align: center;
    }
    Notice.-error {
        color: $error;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind = ""
        self.title = ""
        self.body = ""

    def show(self, kind: str, title: str, body: str = "", *, error: bool = False) -> None:
        self.kind, self.title, self.body = kind, title, body
        self.set_class(error, "-error")
        text = Text(justify="center")
        text.append(neutralize(title), "bold")  # titles and bodies quote index ids and error messages
        if body:
            text.append("\n\n")
            text.append(neutralize(body))
        self.update(text)
