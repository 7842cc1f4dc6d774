"""The ranked results: rank, score, chunk_id and a one-line snippet centred on the query terms, lit by weight.

The chunk_id is shown once (it names the document); when it must be cut, it
loses the left of its path, so the file name and ``#k`` stay visible. Every
other cell goes to the snippet.

A Line API widget (``ScrollView.render_line``) rather than Textual's
``DataTable``: each row is laid out once per result set and terminal width
(one ``Text``, its cells cut and padded to their columns), and its ``Strip``
once per look (plain, under the cursor, under the mouse), then reused for
every frame. Moving the cursor repaints two lines. It looks like the
``DataTable`` it replaced (the same component styles: header, zebra
stripes, cursor focused or not, mouse hover), without that widget's
per-cell measuring and rendering on every change, which was most of a
keystroke's drawing time at 100k chunks (bench/bench_tui.py).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ragtui.core.search.retriever import Hit
from ragtui.core.textsafe import inline
from ragtui.tui import fmt
from ragtui.tui.fmt import left_cut
from ragtui.tui.highlight import Weights, snippet

__all__ = ["Column", "ResultsTable"]

ID_SHARE = 3
"""The chunk_id column takes at most 1/ID_SHARE of the table (less when the ids are shorter)."""
PAD = 1
"""Blank cells on either side of every column."""


class Column(NamedTuple):
    """One column as laid out: its header and its width in cells (padding not included)."""

    label: str
    width: int


class ResultsTable(ScrollView, can_focus=True):
    """Rows of hits, best first, with a row cursor. ``hits`` is what is shown; ``selected_hit`` the row
    under the cursor (``cursor_row``).

    Posts ``ResultsTable.Highlighted`` when the person moves the cursor (keys, mouse) and
    ``ResultsTable.Selected`` on enter or a click on the row under the cursor. ``show`` posts
    nothing: whoever fills the table knows what it put there.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home", "first", "First", show=False),
        Binding("end,ctrl+end", "last", "Last", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "results--header", "results--cursor", "results--hover", "results--even-row", "results--odd-row",
    }

    # DataTable's look (textual.widgets.DataTable's DEFAULT_CSS, the parts a row cursor uses).
    DEFAULT_CSS = """
    ResultsTable {
        background: $surface;
        color: $foreground;
        height: 1fr;
        overflow-x: hidden;
        scrollbar-size-horizontal: 0;

        &:focus {
            background-tint: $foreground 5%;
            & > .results--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .results--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark > .results--even-row {
            background: $surface-darken-1 40%;
        }
        & > .results--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .results--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .results--odd-row {
        }
        & > .results--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .results--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .results--hover {
            background: $block-hover-background;
        }
    }
    """

    class _RowMessage(Message):
        """A message about one row of ``table``."""

        def __init__(self, table: ResultsTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> ResultsTable:
            return self.table

    class Highlighted(_RowMessage):
        """The cursor moved to ``row`` (by the person)."""

    class Selected(_RowMessage):
        """Enter, or a click on the row under the cursor: open ``row``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.hits: tuple[Hit, ...] = ()
        """The hits on display, best first."""
        self.sources: tuple[str, ...] = ()
        """Several indexes searched together: each hit's index id (shown as ``index:chunk_id``); else empty."""
        self.mode = "bm25"
        self.terms: Weights = {}
        self.cursor_row = 0
        """The row under the cursor (0 when there are no rows)."""
        self.hover_row: int | None = None
        """The row under the mouse pointer, lit while the mouse is what moved last."""
        self.columns: dict[str, Column] = {}
        """The columns as laid out now, by key: rank, score, chunk_id, snippet."""
        self._cells: list[list[Text]] = []
        self._rows: list[Text] = []
        self._header: Text | None = None
        self._width = 0
        self._strips: dict[tuple[int, bool, bool], Strip] = {}
        self._styles: dict[str, Style] = {}

    # -- what the app reads -------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.hits)

    @property
    def selected_hit(self) -> Hit | None:
        if not self.hits or not (0 <= self.cursor_row < len(self.hits)):
            return None
        return self.hits[self.cursor_row]

    @property
    def selected_source(self) -> str | None:
        """The index id of the row under the cursor when several indexes are shown, else None."""
        if self.selected_hit is None or len(self.sources) != len(self.hits):
            return None
        return self.sources[self.cursor_row]

    def get_row_at(self, row: int) -> list[Text]:
        """Row ``row``'s cells as shown: rank, score, chunk_id, snippet (each cut to its column)."""
        return list(self._cells[row])

    # -- filling --------------------------------------------------------------------------------

    def _label(self, i: int) -> str:
        hit = self.hits[i]
        return f"{self.sources[i]}:{hit.chunk_id}" if len(self.sources) == len(self.hits) else hit.chunk_id

    def _cell(self, i: int, width: int) -> str:
        """The chunk_id cell: with several indexes, the index's name first (cut on its right to at most
        half the cell when long), then the chunk_id cut on its left as usual."""
        chunk_id = self.hits[i].chunk_id
        if len(self.sources) != len(self.hits):
            return left_cut(chunk_id, width)
        name = inline(self.sources[i])
        most = max(2, width // 2)
        if len(name) + 1 > most:
            name = name[: most - 2] + "…"
        return f"{name}:{left_cut(chunk_id, width - len(name) - 1)}"

    def show(self, hits: tuple[Hit, ...], mode: str, terms: Weights, sources: tuple[str, ...] = ()) -> None:
        """Replace the rows; the cursor stays on the same chunk when it is still there. ``sources``: each
        hit's index when several are searched together (its cell reads ``index:chunk_id``)."""
        keep = self._label(self.cursor_row) if self.selected_hit else None
        self.hits, self.mode, self.terms = hits, mode, terms
        self.sources = sources if len(sources) == len(hits) else ()
        self.cursor_row = next((i for i in range(len(hits)) if self._label(i) == keep), 0)
        self._fill()
        if hits:
            self._scroll_cursor_into_view()

    def _fill(self) -> None:
        """Lay out every row for the current width: cells cut and padded to their columns, once."""
        width = max(40, self.size.width or 80)
        longest = max((len(self._label(i)) for i in range(len(self.hits))), default=16)
        id_width = max(16, min(longest, width // ID_SHARE))
        used = 3 + 8 + id_width + 4 * 2 * PAD
        snippet_width = max(10, width - used)
        self.columns = {"rank": Column("#", 3), "score": Column("score", 8),
                        "chunk_id": Column("chunk_id", id_width), "snippet": Column("snippet", snippet_width)}
        self._width = used + snippet_width
        self._header = self._lay_out([Text(c.label) for c in self.columns.values()])
        self._cells = [
            [Text(str(hit.rank), justify="right"), Text(fmt.score(hit.score, self.mode), justify="right"),
             Text(self._cell(i, id_width), no_wrap=True), snippet(hit.text, self.terms, snippet_width)]
            for i, hit in enumerate(self.hits)]
        self._rows = [self._lay_out(cells) for cells in self._cells]
        self._strips.clear()
        self.hover_row = None if self.hover_row is None or self.hover_row >= len(self.hits) else self.hover_row
        size = Size(self._width, len(self.hits) + 1)
        if self.virtual_size != size:
            self.virtual_size = size  # a layout only when the number of rows (or the width) changed
            self.refresh()
        else:
            # The same number of rows: only their lines are drawn again, not the blank ones below.
            self.refresh(Region(0, 0, self.size.width, size.height - self.scroll_offset.y))

    def _lay_out(self, cells: list[Text]) -> Text:
        """One line: each cell cut (with an ellipsis) or padded to its column, justified as it asks."""
        line = Text(no_wrap=True, end="")
        gap = " " * PAD
        for cell, column in zip(cells, self.columns.values(), strict=True):
            fitted = cell.copy()
            fitted.truncate(column.width, overflow="ellipsis")
            pad = column.width - fitted.cell_len
            line.append(gap)
            if cell.justify == "right":
                line.append(" " * pad)
                line.append_text(fitted)
            else:
                line.append_text(fitted)
                line.append(" " * pad)
            line.append(gap)
        return line

    # -- drawing --------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        # Focus, theme or CSS changed: the component styles may have, so every strip is re-made.
        self._strips.clear()
        self._styles.clear()
        super().notify_style_update()

    def _style(self, name: str) -> Style:
        """The Rich style of component ``name`` ("base": the widget's own), looked up once per look."""
        style = self._styles.get(name)
        if style is None:
            if name == "base":
                style = self.rich_style
            elif name in ("results--cursor", "results--hover"):
                style = self.get_component_rich_style(name)
            else:  # the row's own (DataTable takes these without its parents' background)
                style = self.get_component_styles(name).rich_style
            self._styles[name] = style
        return style

    def _strip(self, i: int, cursor: bool, hover: bool) -> Strip:
        """Row ``i`` (-1: the header) as a strip of the table's width, from the cache when made before."""
        key = (i, cursor, hover)
        strip = self._strips.get(key)
        if strip is not None:
            return strip
        if i < 0:
            row_style, text = self._style("results--header"), self._header
            component, post = Style(), Style()
        else:
            row_style, text = self._style("results--odd-row" if i % 2 else "results--even-row"), self._rows[i]
            component = Style()
            if hover:
                component += self._style("results--hover")
            if cursor:
                component += self._style("results--cursor")
            # As DataTable does: the cursor's colour wins over the text's (lit terms stay bold), its
            # background does not need to (the text sets none).
            post = Style.from_color(color=component.color)
        assert text is not None
        segments = list(Segment.apply_style(text.render(self.app.console), row_style + component, post))
        width = self.size.width
        extend = max(0, width - self._width)
        if extend:
            segments.append(Segment(" " * extend, row_style + component))
        strip = Strip(segments).adjust_cell_length(width, self._style("base")).simplify()
        self._strips[key] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        if self._header is None:
            return Strip.blank(self.size.width, self._style("base"))
        if y == 0:
            return self._strip(-1, False, False)
        row = y - 1 + self.scroll_offset.y
        if not 0 <= row < len(self._rows):
            return Strip.blank(self.size.width, self._style("base"))
        return self._strip(row, row == self.cursor_row, row == self.hover_row)

    def _refresh_row(self, row: int | None) -> None:
        if row is not None:
            self.refresh(Region(0, row + 1 - self.scroll_offset.y, self.size.width, 1))

    # -- the cursor -------------------------------------------------------------------------------

    def move_cursor(self, *, row: int, scroll: bool = True) -> None:
        """Put the cursor on ``row`` (clamped to the rows); posts ``Highlighted`` when it moved."""
        if not self.hits:
            return
        row = max(0, min(row, len(self.hits) - 1))
        if row == self.cursor_row:
            return
        old, self.cursor_row = self.cursor_row, row
        self._refresh_row(old)
        self._refresh_row(row)
        if scroll:
            self._scroll_cursor_into_view()
        self.post_message(self.Highlighted(self, row))

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        # Row r sits on virtual line r + 1 (the header is line 0, fixed at the top).
        self.scroll_to_region(Region(0, self.cursor_row + 1, self.size.width, 1), animate=animate,
                              spacing=Spacing(1, 0, 0, 0), force=True)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _keyboard(self) -> None:
        if self.hover_row is not None:
            old, self.hover_row = self.hover_row, None
            self._refresh_row(old)

    def action_cursor_up(self) -> None:
        self._keyboard()
        self.move_cursor(row=self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self._keyboard()
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        self._keyboard()
        self.move_cursor(row=self.cursor_row - self._page())

    def action_page_down(self) -> None:
        self._keyboard()
        self.move_cursor(row=self.cursor_row + self._page())

    def action_first(self) -> None:
        self._keyboard()
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self._keyboard()
        self.move_cursor(row=len(self.hits) - 1)

    def action_select_cursor(self) -> None:
        if self.selected_hit is not None:
            self.post_message(self.Selected(self, self.cursor_row))

    # -- the mouse ---------------------------------------------------------------------------------

    def _row_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return None  # the header, the scrollbar, or outside the content
        row = offset.y - 1 + self.scroll_offset.y
        return row if 0 <= row < len(self.hits) else None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        row = self._row_at(event)
        if row != self.hover_row:
            old, self.hover_row = self.hover_row, row
            self._refresh_row(old)
            self._refresh_row(row)

    def on_leave(self, event: events.Leave) -> None:
        self._keyboard()

    def on_click(self, event: events.Click) -> None:
        row = self._row_at(event)
        if row is None:
            return
        event.stop()
        if row == self.cursor_row:
            self.post_message(self.Selected(self, row))
        else:
            self.move_cursor(row=row)

    # -- the width ---------------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        # Column widths follow the terminal: lay the rows out again for the new width (once shown).
        if self._header is not None:
            self._fill()
        if self.hits:
            self._scroll_cursor_into_view()
