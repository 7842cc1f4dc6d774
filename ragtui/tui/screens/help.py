"""The help screen (``?``): every key, the modes, and what the views are for."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ragtui.core.search.modes import MODE_TABLE
from ragtui.tui.keys import mode_keys_text

__all__ = ["KEYS", "HelpScreen"]

KEYS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Anywhere", [
        mode_keys_text(function_keys=True),
        ("ctrl+p", "command palette (commands, previous queries)"),
        ("ctrl+q", "quit"),
    ]),
    ("Query box", [
        ("type", "search as you type (debounced)"),
        ("↑ ↓", "walk the query history"),
        ("enter", "keep the query in the history, go to the results"),
        ("tab / esc", "leave the query box"),
        ("ctrl+g", "this help (? types a ?)"),
    ]),
    ("Results", [
        mode_keys_text(function_keys=False),
        ("f", "hybrid's fusion: rrf ↔ the fitted or configured"),
        ("+ −", "k: more or fewer results"),
        ("] [", "nprobe ±1 (IVF lists probed);  } {  ×2 ÷2"),
        ("↑ ↓ pgup pgdn", "select a result (the detail pane follows)"),
        ("enter / o", "jump to the citation: the source, scrolled to the chunk"),
        ("e", "open the source in $EDITOR at the chunk's first line"),
        ("c / y", "copy the chunk_id to the clipboard"),
        ("v", "compare flat, IVF and BM25 for this query"),
        ("p", "pack the results into the token budget: a Markdown file in the cache, and the clipboard"),
        ("i", "pick the index, see its stats"),
        ("x", "rerank the top candidates with the cross-encoder, or stop (onnx extra)"),
        ("r", "reload the index now (it also reloads by itself)"),
        ("t", "light / dark theme"),
        ("/ s esc", "back to the query box"),
        ("?", "this help"),
        ("q", "quit"),
    ]),
    ("Index picker", [
        ("↑ ↓", "walk the indexes (each one's stats beside)"),
        ("space", "mark / unmark an index: two or more marked are searched together"),
        ("enter", "open the highlighted index, or search the marked ones together"),
        ("esc", "back, keeping the open index"),
    ]),
    ("Source view", [
        ("esc / q", "back"),
        ("g", "scroll to the chunk again"),
        ("e  c", "$EDITOR · copy chunk_id"),
    ]),
    ("Compare view", [
        ("tab", "next column"),
        ("enter", "jump to the selected chunk's source"),
        ("+ − ] [ } {", "k and nprobe (the comparison re-runs)"),
        ("esc / q", "back"),
    ]),
]

MODES_TEXT = (
    " · ".join(f"{m.label}: {m.short}" for m in MODE_TABLE) + ". "
    "Vector modes need the index's embedding model; "
    + " and ".join(m.label for m in MODE_TABLE if not m.needs_embedder) + " always work."
)


class HelpScreen(ModalScreen[None]):
    """Closes on esc, q or ?."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen #help-box {
        width: 90%;
        max-width: 100;
        height: 90%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    """

    BINDINGS = [Binding("escape,q,question_mark,ctrl+g", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for section, rows in KEYS:
            table.add_row(Text(section, style="underline"), "")
            for key, what in rows:
                table.add_row(key, what)
            table.add_row("", "")
        with VerticalScroll(id="help-box") as box:
            box.border_title = "ragtui help"
            yield Static(table)
            yield Static(Text(MODES_TEXT, style="dim"))
