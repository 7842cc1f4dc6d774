"""The jump-to-citation view: the source document scrolled to the chunk, its lines marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from ragtui.core.textsafe import inline
from ragtui.tui.widgets.detail_pane import FRESHNESS_STYLES
from ragtui.tui.widgets.source_view import MORE_RIGHT, LongLineMarks, SourceView

if TYPE_CHECKING:
    from ragtui.tui.ragtui_app import RagtuiApp

__all__ = ["SourceScreen"]

_WHY_UNMARKED = {
    "changed": "the file no longer holds this chunk's text: re-ingest to refresh the index",
    "missing": "the source file is gone",
}


class SourceScreen(Screen):
    """Shows ``text`` (the source as ``citation`` located the chunk in it). ``citation`` is public."""

    if TYPE_CHECKING:
        app: RagtuiApp  # the app this runs in, with its session (so mypy checks what is used of it)

    DEFAULT_CSS = """
    SourceScreen #source-head {
        height: auto;
        background: $panel;
        padding: 0 1;
    }
    SourceScreen #source-body {
        height: 1fr;
    }
    """

    BINDINGS = [
        Binding("escape,q", "close", "Back"),
        Binding("e", "edit", "$EDITOR"),
        Binding("c,y", "copy", "Copy id"),
        Binding("g", "chunk", "To chunk"),
        Binding("question_mark", "app.help", "Help", show=False),
    ]

    def __init__(self, citation, text: str) -> None:
        super().__init__()
        self.citation = citation
        """The ``Citation`` shown."""
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(id="source-head")
        with Horizontal(id="source-body"):
            yield SourceView(id="source")
            yield LongLineMarks(id="source-cut")
        yield Footer()

    @property
    def view(self) -> SourceView:
        return self.query_one("#source", SourceView)

    def on_mount(self) -> None:
        c = self.citation
        lines = (c.start_line, c.end_line) if c.start_line is not None else None
        name = c.path.name if c.path is not None else c.doc_id
        chars = (c.start_char, c.end_char) if c.start_char is not None else None
        self.view.load(name, self.text, lines, dark=self.app.current_theme.dark, chars=chars)
        self.long_lines = False
        """Whether some line is wider than the view (the head then says how to see the rest)."""
        self._show_head()
        self.query_one(LongLineMarks).follow(self.view)
        self.view.focus()
        self.call_after_refresh(self._measured)

    def _measured(self) -> None:
        """After layout, the view's width is known: say whether lines are cut."""
        view = self.view
        self.long_lines = bool(view.line_cells) and max(view.line_cells) + view.gutter_cells > view.scrollable_content_region.width
        if self.long_lines:
            self._show_head()

    def _show_head(self) -> None:
        c = self.citation
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append(inline(c.doc_id), "bold")
        head.append("  ")
        head.append(c.status, FRESHNESS_STYLES.get(c.status, "bold"))
        if c.page is not None:
            head.append(f"  {c.place}  (lines {c.start_line}–{c.end_line} of {self.view.n_lines} of the extracted text)")
        elif c.start_line is not None:
            head.append(f"  lines {c.start_line}–{c.end_line} of {self.view.n_lines}")
        head.append(f"  {self.view.lexer}", "dim")
        if self.long_lines:
            head.append(f"  {MORE_RIGHT} long lines: ← → scroll", "dim")
        if c.status in _WHY_UNMARKED:
            head.append(f"\n{_WHY_UNMARKED[c.status]}", "italic")
        self.query_one("#source-head", Static).update(head)

    def action_close(self) -> None:
        self.dismiss()

    def action_edit(self) -> None:
        self.app.open_in_editor(self.citation)

    def action_copy(self) -> None:
        self.app.copy_chunk(self.citation.chunk_id)

    def action_chunk(self) -> None:
        self.view.scroll_to_chunk()
