"""A source document, syntax-coloured by its file type, with the cited chunk's lines marked.

Only a window of ``WINDOW_LINES`` lines either side of the chunk is
rendered, so a huge file opens as fast as a small one.
"""

from __future__ import annotations

from rich.syntax import Syntax
from textual.containers import ScrollableContainer
from textual.widgets import Static

from ragtui.core.textsafe import neutralize

__all__ = ["WINDOW_LINES", "SourceView"]

WINDOW_LINES = 2000
CONTEXT_ABOVE = 3
CHUNK_STYLE_DARK = "on #283650"
CHUNK_STYLE_LIGHT = "on #dfe8fb"
"""The background behind the chunk's own characters."""
"""Lines shown above the chunk when the view scrolls to it."""


class SourceView(ScrollableContainer):
    """Scrolls both ways. After ``load``: ``first_line`` is the file line at the top of the
    rendered window, ``chunk_lines`` the (start, end) lines marked, or None."""

    DEFAULT_CSS = """
    SourceView {
        height: 1fr;
    }
    SourceView #source-text {
        width: auto;
    }
    """

    can_focus = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.first_line = 1
        self.chunk_lines: tuple[int, int] | None = None
        self.lexer = "text"
        """The Pygments lexer chosen from the file's name and content."""
        self.n_lines = 0

    def compose(self):
        yield Static(id="source-text")

    def load(self, name: str, text: str, lines: tuple[int, int] | None, *, dark: bool,
             chars: tuple[int, int] | None = None) -> None:
        """Show ``text`` (raw source; neutralised here) named ``name``, marking ``lines`` (1-based,
        inclusive) in the gutter and, when given, the chunk's exact ``chars`` (offsets into ``text``)."""
        # Citations number lines by "\n", and neutralize keeps every "\n", so the numbers still match.
        all_lines = neutralize(text).split("\n")
        self.n_lines = len(all_lines)
        lo, hi = 1, len(all_lines)
        if lines is not None:
            lo = max(1, lines[0] - WINDOW_LINES)
            hi = min(len(all_lines), lines[1] + WINDOW_LINES)
        else:
            hi = min(hi, 2 * WINDOW_LINES)
        code = "\n".join(all_lines[lo - 1 : hi])
        self.first_line, self.chunk_lines = lo, lines
        self.lexer = Syntax.guess_lexer(name, code)
        syntax = Syntax(
            code,
            self.lexer,
            theme="monokai" if dark else "friendly",
            line_numbers=True,
            start_line=lo,
            highlight_lines=set(range(lines[0], lines[1] + 1)) if lines else None,
            word_wrap=False,
            background_color="default",
        )
        if lines is not None and chars is not None:
            start, end = (_position(text, c, lo) for c in chars)
            syntax.stylize_range(CHUNK_STYLE_DARK if dark else CHUNK_STYLE_LIGHT, start, end)
        self.query_one("#source-text", Static).update(syntax)
        self.call_after_refresh(self.scroll_to_chunk)

    def scroll_to_chunk(self) -> None:
        """Bring the chunk's first line near the top (a few lines of context above it)."""
        if self.chunk_lines is None:
            self.scroll_home(animate=False)
            return
        self.scroll_to(y=max(0, self.chunk_lines[0] - self.first_line - CONTEXT_ABOVE), animate=False, immediate=True)


def _position(text: str, offset: int, first_line: int) -> tuple[int, int]:
    """(line within the rendered window, 1-based; column, 0-based) of character ``offset`` of ``text``."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return line - first_line + 1, column
