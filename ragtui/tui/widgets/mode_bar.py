"""The retriever selector: one chip per mode (click or press its key), then k, nprobe and the query time.

On a narrow terminal (80 columns) the chips of the other modes show only their keys (the current one keeps
its name, and each chip's tooltip names its mode), so k, nprobe or the fusion, and the query time still fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
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
        super().__init__(self.full_text(mode), id=f"mode-{mode}")
        self.mode = mode
        self.tooltip = f"{MODE_LABELS[mode]} ({MODE_KEYS[mode]})"
        self._text = self.full_text(mode)

    @staticmethod
    def full_text(mode: str) -> str:
        return f"{MODE_KEYS[mode]} {MODE_LABELS[mode]}"

    def show_name(self, shown: bool) -> None:
        """The key and the mode's name, or (``shown`` false) the key alone."""
        text = self.full_text(self.mode) if shown else MODE_KEYS[self.mode]
        if text != self._text:
            self._text = text
            self.update(text)

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

    PARAMS_ROOM = 44
    """Columns kept for k, nprobe or the fusion, and the query time before the chips are shortened."""
    FULL_WIDTH = sum(len(ModeChip.full_text(m)) + 2 for m in MODE_LABELS) + PARAMS_ROOM
    """Below this width, only the current mode's chip shows its name."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: Text | None = None
        self._mode: str | None = None
        self._compact = False

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < self.FULL_WIDTH
        if compact != self._compact:
            self._compact = compact
            self._name_chips()

    def _name_chips(self) -> None:
        for chip in self.query(ModeChip):
            chip.show_name(not self._compact or chip.mode == self._mode)

    def compose(self) -> ComposeResult:
        for mode in MODE_LABELS:
            yield ModeChip(mode)
        yield Static(id="mode-params")

    def show(self, state: ModeBarState) -> None:
        for chip in self.query(ModeChip):
            chip.set_class(chip.mode == state.mode, "-current")
            chip.set_class(chip.mode not in LEXICAL_MODES and state.vectors == "off", "-off")
        if state.mode != self._mode:
            self._mode = state.mode
            self._name_chips()
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
