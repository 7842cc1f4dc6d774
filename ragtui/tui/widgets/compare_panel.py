"""One mode's top-k in the compare view, with each chunk's rank under the other compared modes."""

from __future__ import annotations

import os

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ragtui.core.textsafe import neutralize
from ragtui.tui import fmt
from ragtui.tui.fmt import left_cut
from ragtui.tui.widgets.mode_bar import MODE_LABELS

__all__ = ["ABBREV", "ComparePanel", "shorten"]

ABBREV = {"flat": "F", "ivf": "I", "bm25": "B"}


def common_folder(chunk_ids) -> str:
    """The folder prefix (ending in "/") that every chunk_id shares, or ""."""
    ids = list(chunk_ids)
    if not ids:
        return ""
    prefix = os.path.commonprefix(ids)
    return prefix[: prefix.rfind("/") + 1]


def shorten(text: str, width: int) -> str:
    """``text`` (a chunk_id) cut to ``width`` cells from the left of its path, so the file name and ``#n``
    stay visible (``fmt.left_cut``)."""
    return left_cut(text, width)


class ComparePanel(Vertical):
    """The column for ``mode``. ``table.cursor_row`` picks a hit; ``hit_at(row)`` returns it."""

    DEFAULT_CSS = """
    ComparePanel {
        width: 1fr;
        height: 1fr;
        border: round $primary 40%;
    }
    ComparePanel:focus-within {
        border: round $accent;
    }
    /* At 80 columns every cell counts: no borders, the title row shows focus instead. */
    .-narrow ComparePanel, .-narrow ComparePanel:focus-within {
        border: none;
        margin: 0 1 0 0;
    }
    ComparePanel .panel-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        text-style: bold;
    }
    ComparePanel:focus-within .panel-title {
        background: $accent 40%;
    }
    ComparePanel DataTable {
        height: 1fr;
        scrollbar-size-horizontal: 0;
    }
    ComparePanel .compare-off {
        color: $text-warning;
        padding: 0 1;
    }
    """

    def __init__(self, mode: str, **kwargs) -> None:
        super().__init__(id=f"compare-{mode}", **kwargs)
        self.mode = mode
        self.hits: tuple = ()

    def compose(self) -> ComposeResult:
        yield Static(MODE_LABELS[self.mode], classes="panel-title")
        # No cell padding: at 80 columns each panel has about 24 cells, and chunk_ids need them.
        yield DataTable(cursor_type="row", zebra_stripes=True, cell_padding=0)
        yield Static(classes="compare-off")

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def hit_at(self, row: int):
        return self.hits[row] if 0 <= row < len(self.hits) else None

    def show(self, outcome, others: tuple[str, ...], folder: str = "") -> None:
        """Fill from a ``backend.CompareOutcome``; ``others`` are the modes whose ranks are listed;
        ``folder`` is a prefix every chunk_id shares (left out to make room)."""
        off = outcome.off.get(self.mode)
        note = self.query_one(".compare-off", Static)
        note.update(Text(f"off: {neutralize(off)}") if off else "")
        note.display = bool(off)
        self.hits = outcome.runs.get(self.mode, ())
        seconds = outcome.seconds.get(self.mode)
        title = Text(MODE_LABELS[self.mode])
        if seconds is not None:
            title.append(f"  {fmt.ms(seconds)}", "dim")
        self.query_one(".panel-title", Static).update(title)
        table = self.table
        table.clear(columns=True)
        inner = max(20, (self.content_size.width or 24) - 1)
        others_width = 4 * len(others)
        id_width = max(8, inner - 3 - others_width - 1)
        table.add_column(" #", width=3, key="rank")
        table.add_column(" chunk_id", width=id_width + 1, key="chunk_id")
        table.add_column(" others", width=others_width, key="others")
        for hit in self.hits:
            ranks = [(m, outcome.rank_in(m, hit.chunk_id)) for m in others]
            found = sum(1 for _, r in ranks if r is not None)
            style = "" if found == len(others) else ("italic" if found else "italic dim")
            cell = Text("".join(f" {ABBREV[m]}{r if r is not None else '–'}" for m, r in ranks), no_wrap=True)
            table.add_row(
                Text(f"{hit.rank:>2}"),
                Text(" " + shorten(hit.chunk_id[len(folder) :], id_width), style=style, no_wrap=True),
                cell,
                key=hit.chunk_id,
            )
