"""One line at the bottom: which index is open, whether vector search is on (and why not), and live activity."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from ragtui.core.textsafe import inline

__all__ = ["StatusLine", "StatusState"]


@dataclass(frozen=True)
class StatusState:
    """What the status line shows, left to right."""

    index: str = ""
    """e.g. "demo · 23 chunks"."""
    vectors: str = ""
    """e.g. "vectors ready", "vectors off: <reason>"."""
    vectors_off: bool = False
    live: str = ""
    """The watch agent's latest activity, or the reload poller's state."""
    live_error: bool = False


class StatusLine(Static):
    """Renders a ``StatusState`` on one line (cut with an ellipsis when narrow); every part is neutralised
    (index ids, model names and watch messages come from outside)."""

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        background: $panel;
        color: $text-muted;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.state = StatusState()
        """What is shown now."""
        self._painted = False

    def show(self, state: StatusState) -> None:
        if state == self.state and self._painted:
            return  # the app refreshes the bars after every search; most leave this line as it was
        self.state, self._painted = state, True
        line = Text(no_wrap=True, overflow="ellipsis")
        if state.index:
            line.append(inline(state.index), "bold")
        for part, style in (
            (state.vectors, "yellow" if state.vectors_off else ""),
            (state.live, "red" if state.live_error else ""),
        ):
            if part:
                line.append(" · ", "dim")
                line.append(inline(part), style)
        self.update(line, layout=False)  # one row, full width: its size never depends on the text
