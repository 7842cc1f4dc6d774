"""The ranked results: rank, score, chunk_id and a one-line snippet centred on the query terms, lit by weight.

The chunk_id is shown once (it names the document); when it must be cut, it
loses the left of its path, so the file name and ``#k`` stay visible. Every
other cell goes to the snippet.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from ragtui.core.search.retriever import Hit
from ragtui.core.textsafe import inline
from ragtui.tui import fmt
from ragtui.tui.fmt import left_cut
from ragtui.tui.highlight import Weights, snippet

__all__ = ["ResultsTable"]

ID_SHARE = 3
"""The chunk_id column takes at most 1/ID_SHARE of the table (less when the ids are shorter)."""


class ResultsTable(DataTable):
    """Rows keyed by chunk_id. ``hits`` is what is shown; ``selected_hit`` the row under the cursor.

    Posts DataTable's ``RowHighlighted`` / ``RowSelected`` like any table.
    """

    DEFAULT_CSS = """
    ResultsTable {
        height: 1fr;
        scrollbar-size-horizontal: 0;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.hits: tuple[Hit, ...] = ()
        """The hits on display, best first."""
        self.sources: tuple[str, ...] = ()
        """Several indexes searched together: each hit's index id (shown as ``index:chunk_id``); else empty."""
        self.mode = "bm25"
        self.terms: Weights = {}
        self._layout: tuple[int, int] | None = None

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
        self._fill()
        row = next((i for i in range(len(hits)) if self._label(i) == keep), 0)
        if hits:
            self.move_cursor(row=row, animate=False, scroll=True)

    def _fill(self) -> None:
        width = max(40, self.size.width or 80)
        longest = max((len(self._label(i)) for i in range(len(self.hits))), default=16)
        id_width = max(16, min(longest, width // ID_SHARE))
        # Each column is padded by one cell on either side.
        used = 3 + 8 + id_width + 3 * 2 + 2
        snippet_width = max(10, width - used)
        layout = (id_width, snippet_width)
        if layout != self._layout:
            # New column widths only when they changed: re-measuring columns costs a full re-render.
            self._layout = layout
            self.clear(columns=True)
            self.add_column("#", width=3, key="rank")
            self.add_column("score", width=8, key="score")
            self.add_column("chunk_id", width=id_width, key="chunk_id")
            self.add_column("snippet", width=snippet_width, key="snippet")
        else:
            self.clear()
        for i, hit in enumerate(self.hits):
            label = self._label(i)
            self.add_row(
                Text(str(hit.rank), justify="right"),
                Text(fmt.score(hit.score, self.mode), justify="right"),
                Text(self._cell(i, id_width), no_wrap=True),
                snippet(hit.text, self.terms, snippet_width),
                key=label,
            )

    def on_resize(self, event: events.Resize) -> None:
        # Column widths follow the terminal: re-lay the rows (``_fill`` notices a new width).
        if self.hits:
            row = self.cursor_row
            self._fill()
            self.move_cursor(row=row, animate=False)
