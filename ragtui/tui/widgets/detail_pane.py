"""The selected chunk in full: where it came from, how fresh that is, and its text with the query terms lit."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ragtui.core.search.retriever import Hit
from ragtui.core.textsafe import inline, neutralize
from ragtui.tui.highlight import Weights, highlighted

__all__ = ["FRESHNESS_STYLES", "DetailPane"]

FRESHNESS_STYLES = {"fresh": "bold green", "moved": "bold yellow", "changed": "bold dark_orange", "missing": "bold red"}


class DetailPane(VerticalScroll):
    """Shows one hit (at once) and then its citation (when resolved).

    ``chunk_id`` is the chunk shown (None when empty); ``citation`` the
    resolved ``Citation`` for it, once known.
    """

    DEFAULT_CSS = """
    DetailPane {
        height: 1fr;
        border-top: solid $primary 50%;
        padding: 0 1;
    }
    DetailPane #detail-head {
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    DetailPane #detail-body {
        margin-top: 1;
    }
    """

    can_focus = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.chunk_id: str | None = None
        self.citation = None
        self._hit: Hit | None = None
        self._record = None
        self._problem: str | None = None
        self._head_lines = 0

    def compose(self) -> ComposeResult:
        yield Static(id="detail-head")
        yield Static(id="detail-body")

    def clear(self, message: str = "", *, error: bool = False) -> None:
        """Show no chunk, only ``message`` (``error``: in the error style, e.g. why a search could not run)."""
        self.chunk_id, self.citation, self._hit, self._record, self._problem = None, None, None, None, None
        self.query_one("#detail-head", Static).update(Text(message, style="bold red" if error else "dim italic"))
        self._head_lines = 0  # a message may wrap: the next head is laid out
        self.query_one("#detail-body", Static).update("")

    def show_hit(self, hit: Hit, terms: Weights, record=None) -> None:
        """Show ``hit``'s text now (and ``record``'s n_tokens and fingerprint when given);
        the line range and freshness follow with ``show_citation``."""
        if hit.chunk_id != self.chunk_id:
            self.citation, self._problem = None, None
            self.scroll_home(animate=False)
        self.chunk_id, self._hit, self._record = hit.chunk_id, hit, record
        self._render_head()
        self.query_one("#detail-body", Static).update(highlighted(hit.text, terms))

    def forget_citation(self) -> None:
        """Drop the resolved citation (the source or the index changed): the next ``show_hit`` resolves anew."""
        self.citation, self._problem = None, None
        self.chunk_id = None

    def show_citation(self, chunk_id: str, citation) -> None:
        if chunk_id == self.chunk_id:
            self.citation, self._problem = citation, None
            self._render_head()

    def show_problem(self, chunk_id: str, message: str) -> None:
        if chunk_id == self.chunk_id:
            self._problem = message
            self._render_head()

    def _render_head(self) -> None:
        hit = self._hit
        if hit is None:
            return
        head = Text()  # lines are cut, not wrapped (CSS): a narrow pane must not push the text down unevenly
        head.append(inline(hit.chunk_id), "bold")
        c = self.citation
        if c is not None:
            head.append("  ")
            head.append(c.status, FRESHNESS_STYLES.get(c.status, "bold"))
            if c.page is not None:
                head.append(f"  {c.place}")
            elif c.start_line is not None:
                span = f"line {c.start_line}" if c.start_line == c.end_line else f"lines {c.start_line}–{c.end_line}"
                head.append(f"  {span}")
        elif self._problem:
            head.append("  ")
            head.append(neutralize(self._problem), "red")
        else:
            head.append("  resolving the source…", "italic")
        record = c.record if c is not None else self._record
        if record is not None:
            head.append(f"\nn_tokens {record.n_tokens}  fingerprint {record.fingerprint[:16]}…")
        # The same number of lines (the usual case: the citation arriving for the chunk shown) keeps the
        # head's size, so it is repainted without laying the screen out again.
        lines = head.plain.count("\n") + 1
        self.query_one("#detail-head", Static).update(head, layout=lines != self._head_lines)
        self._head_lines = lines
