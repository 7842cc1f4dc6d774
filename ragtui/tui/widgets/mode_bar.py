"""The retriever selector: one chip per mode (click or press its key), then k, nprobe and the query time."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Static

from ragtui.core.search import modes
from ragtui.tui.keys import MODES_BY_KEY

__all__ = ["LEXICAL_MODES", "MODE_KEYS", "MODE_LABELS", "ModeBar", "ModeBarState"]

MODE_LABELS = {m.name: m.label for m in MODES_BY_KEY}
"""Each mode's label (``core.search.modes.MODE_TABLE``), in the order of the chips."""
MODE_KEYS = {m.name: f"F{m.key}" for m in MODES_BY_KEY}
"""The key that selects each mode anywhere (its digit also works outside the query box)."""
LEXICAL_MODES = modes.LEXICAL_MODES
"""The modes that need no embedder (they work while vectors are loading or off)."""


@dataclass(frozen=True)
class ModeBarState:
    """Everything the bar shows."""

    mode: str
    k: int
    nprobe: int | None
    """The user's nprobe; None: the index's default."""
    default_nprobe: int
    """The lists IVF probes without a user's nprobe: the calibrated number once the lists are built; 0 before
    (shown as "–": no figure is shown that IVF would not probe)."""
    nlist: int
    vectors: str
    """"ready", "loading" or "off"."""
    query_time: str = ""
    ranking: str = ""
    """Hybrid's fusion as the search uses it ("zscore 0.6 · bm25stem", "rrf 60 · bm25stem"); shown in
    hybrid mode in place of nprobe, which hybrid does not use."""
    rerank: str = ""
    """The reranker's marker ("reranking 20…", "reranked 20 · 1.2 s", "reranked 7 of 20 (time budget)"); "" when off."""
    indexes: int = 0
    """How many indexes are searched together (shown as "2 indexes" when more than one)."""


class ModeChip(Static):
    """One mode; a click selects it."""

    DEFAULT_CSS = """
    ModeChip {
        width: auto;
        padding: 0 1;
        color: $text-muted;
    }
    ModeChip:hover {
        background: $boost;
    }
    ModeChip.-current {
        background: $accent;
        color: $text;
        text-style: bold;
    }
    ModeChip.-off {
        color: $text-disabled;
        text-style: strike;
    }
    """

    class Clicked(Message):
        def __init__(self, mode: str) -> None:
            super().__init__()
            self.mode = mode

    def __init__(self, mode: str) -> None:
        super().__init__(f"{MODE_KEYS[mode]} {MODE_LABELS[mode]}", id=f"mode-{mode}")
        self.mode = mode

    def on_click(self) -> None:
        self.post_message(self.Clicked(self.mode))


class ModeBar(Horizontal):
    """Shows ``ModeBarState``; posts ``ModeChip.Clicked`` when a chip is clicked."""

    DEFAULT_CSS = """
    ModeBar {
        height: 1;
        background: $panel;
    }
    ModeBar #mode-params {
        width: 1fr;
        padding: 0 1;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: Text | None = None

    def compose(self) -> ComposeResult:
        for mode in MODE_LABELS:
            yield ModeChip(mode)
        yield Static(id="mode-params")

    def show(self, state: ModeBarState) -> None:
        for chip in self.query(ModeChip):
            chip.set_class(chip.mode == state.mode, "-current")
            chip.set_class(chip.mode not in LEXICAL_MODES and state.vectors == "off", "-off")
        line = Text()
        if state.indexes > 1:
            line.append(f"{state.indexes} indexes", "bold")
            line.append(" ")
        line.append("│ k ", "dim")
        line.append(str(state.k), "bold")
        if state.mode == "hybrid" and state.ranking:
            line.append(" │ ", "dim")
            line.append(state.ranking, "bold")
        elif state.indexes > 1:
            pass  # nprobe is one index's: each of several is probed with its own default
        elif state.nlist and (state.nprobe or state.default_nprobe):
            line.append(" │ nprobe ", "dim")
            line.append(str(state.nprobe or state.default_nprobe), "bold")
            line.append(f"/{state.nlist}", "dim")
        else:
            line.append(" │ nprobe ", "dim")
            line.append("–", "dim")
        if state.vectors == "loading" and state.mode not in LEXICAL_MODES:
            line.append(" │ loading embedder…", "italic")
        elif state.query_time:
            line.append(" │ ", "dim")
            line.append(state.query_time)
        if state.rerank:
            line.append(" │ ", "dim")
            line.append(state.rerank, "italic" if state.rerank.endswith("…") else "bold")
        params = self.query_one("#mode-params", Static)
        if line != self._shown:
            self._shown = line
            # The line's size is fixed (1 row, 1fr): no layout pass, which would cost a frame per search.
            params.update(line, layout=False)
