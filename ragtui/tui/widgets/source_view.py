"""A source document, syntax-coloured by its file type, with the cited chunk's lines marked.

Only a window of ``WINDOW_LINES`` lines either side of the chunk is
rendered, so a huge file opens as fast as a small one. Lines are not wrapped
(line numbers and the chunk's position stay exact); the view scrolls sideways,
and ``LongLineMarks`` beside it shows "›" on each row whose line goes on past
the right edge and "‹" where it starts before the left edge, so no line is
cut without a sign.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from rich.syntax import Syntax
from rich.text import Text
from textual.containers import ScrollableContainer
from textual.widgets import Static

from ragtui.core.textsafe import neutralize

__all__ = ["WINDOW_LINES", "LongLineMarks", "SourceView"]

WINDOW_LINES = 2000
CONTEXT_ABOVE = 3
"""Lines shown above the chunk when the view scrolls to it."""
CHUNK_STYLE_DARK = "on #283650"
CHUNK_STYLE_LIGHT = "on #dfe8fb"
"""The background behind the chunk's own characters."""
TAB_SIZE = 4
"""Columns per tab stop (rich's Syntax default), for measuring lines as they are drawn."""
MORE_RIGHT, MORE_LEFT = "›", "‹"


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
        self.line_cells: list[int] = []
        """The drawn width of each line of the rendered window (tabs expanded), gutter excluded."""
        self._placing = False
        """The chunk is brought into view again at each resize until the person scrolls or presses a key
        (a horizontal scrollbar that appears with the first layout takes a row)."""
        self.on_moved: Callable[[], None] | None = None
        """Called when what is visible changes (scroll, resize, new text): ``LongLineMarks`` follows."""

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
        window = all_lines[lo - 1 : hi]
        code = "\n".join(window)
        self.line_cells = [cell_len(line.expandtabs(TAB_SIZE)) for line in window]
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
        self._placing = True
        self.call_after_refresh(self.scroll_to_chunk)
        self.call_after_refresh(self._moved)

    def scroll_to_chunk(self) -> None:
        """Bring the chunk's first line near the top (a few lines of context above it)."""
        if self.chunk_lines is None:
            self.scroll_home(animate=False)
            return
        self.scroll_to(y=max(0, self.chunk_lines[0] - self.first_line - CONTEXT_ABOVE), animate=False, immediate=True)


    @property
    def gutter_cells(self) -> int:
        """Columns of the line-number gutter (the drawn width less the widest line)."""
        return max(0, self.virtual_size.width - max(self.line_cells, default=0))

    def cut_rows(self) -> list[str]:
        """For each visible row: ``MORE_RIGHT`` when its line goes on past the right edge, ``MORE_LEFT`` when
        it starts before the left edge (scrolled), else " "."""
        x, width = round(self.scroll_x), self.scrollable_content_region.width
        top = round(self.scroll_y)
        gutter = self.gutter_cells
        out = []
        for row in range(top, top + self.scrollable_content_region.height):
            cells = self.line_cells[row] + gutter if row < len(self.line_cells) else 0
            out.append(MORE_RIGHT if cells > x + width else MORE_LEFT if x > gutter and cells > gutter else " ")
        return out

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_x(old_value, new_value)
        self._moved()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._moved()

    def on_resize(self) -> None:
        if self._placing:
            self.call_after_refresh(self.scroll_to_chunk)
        self.call_after_refresh(self._moved)

    def on_key(self) -> None:
        self._placing = False

    def on_mouse_scroll_down(self) -> None:
        self._placing = False

    def on_mouse_scroll_up(self) -> None:
        self._placing = False

    def _moved(self) -> None:
        if self.on_moved is not None:
            self.on_moved()


class LongLineMarks(Static):
    """One column beside a ``SourceView``: where its lines are cut by the view's edges (``cut_rows``)."""

    DEFAULT_CSS = """
    LongLineMarks {
        width: 1;
        height: 1fr;
        color: $warning;
        text-style: bold;
    }
    """

    def follow(self, view: SourceView) -> None:
        """Show ``view``'s cut lines now and whenever what it shows changes."""
        view.on_moved = lambda: self.show_rows(view.cut_rows())
        self.show_rows(view.cut_rows())

    def show_rows(self, rows: list[str]) -> None:
        self.rows = rows
        """What each row shows (public for tests)."""
        self.update(Text("\n".join(rows), no_wrap=True))


def _position(text: str, offset: int, first_line: int) -> tuple[int, int]:
    """(line within the rendered window, 1-based; column, 0-based) of character ``offset`` of ``text``."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return line - first_line + 1, column
