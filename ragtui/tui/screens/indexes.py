"""Pick the index to search (when the artifacts root holds several) and see each one's stats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ragtui.core.textsafe import inline
from ragtui.tui.messages import IndexListed, StatsReady
from ragtui.tui.widgets.index_stats import IndexStatsView

if TYPE_CHECKING:
    from ragtui.tui.ragtui_app import RagtuiApp

__all__ = ["IndexScreen"]


class IndexScreen(ModalScreen[str | list[str] | None]):
    """Dismisses with the chosen index id, the ids marked with space (two or more: searched together, in
    the list's order), or None (esc). ``names`` holds the ids listed; ``broken`` the (name, problem) of
    entries under rag/ that cannot be opened (listed after them, disabled); ``marked`` the ids marked."""

    if TYPE_CHECKING:
        app: RagtuiApp  # the app this runs in, with its session (so mypy checks what is used of it)

    DEFAULT_CSS = """
    IndexScreen {
        align: center middle;
    }
    IndexScreen #index-box {
        width: 90%;
        max-width: 110;
        height: 80%;
        border: round $accent;
        background: $surface;
    }
    IndexScreen #index-list {
        width: 1fr;
        max-width: 36;
        height: 1fr;
    }
    IndexScreen #index-stats {
        width: 2fr;
    }
    IndexScreen #index-hint {
        height: 1;
        color: $text-muted;
        padding: 0 1;
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("space", "mark", "Mark")]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current
        """The open index's id (marked in the list), if any."""
        self.names: list[str] = []
        self.broken: list[tuple[str, str]] = []
        self.marked: set[str] = set()

    def compose(self) -> ComposeResult:
        with Vertical(id="index-box") as box:
            box.border_title = "indexes"
            with Horizontal():
                yield OptionList(id="index-list")
                yield IndexStatsView(id="index-stats")
            yield Static("enter: open · esc: back", id="index-hint")

    def on_mount(self) -> None:
        self.query_one(IndexStatsView).show_message("listing indexes…")
        self.app.start_list_indexes(self)

    def on_index_listed(self, message: IndexListed) -> None:
        message.stop()
        self.names, self.broken = message.names, message.broken
        options = self.query_one(OptionList)
        options.clear_options()
        for name in self.names:
            options.add_option(Option(self._label(name), id=name))
        for name, problem in self.broken:  # after the good ones: option i is still names[i]
            options.add_option(Option(Text(f"✗ {inline(name)}: {inline(problem)}", style="red"), disabled=True))
        if not self.names:
            what = "no usable index" if self.broken else "no index"
            self.query_one(IndexStatsView).show_message(f"{what} under the artifacts root", error=True)
            return
        options.highlighted = self.names.index(self.current) if self.current in self.names else 0
        options.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is None:  # a broken entry: nothing to read
            return
        self.query_one(IndexStatsView).show_message("reading…")
        self.app.start_index_stats(self, event.option.id)

    def on_stats_ready(self, message: StatsReady) -> None:
        message.stop()
        options = self.query_one(OptionList)
        at = options.highlighted
        if at is None or at >= len(self.names) or self.names[at] != message.index_id:
            return  # the person moved on
        view = self.query_one(IndexStatsView)
        if message.stats is not None:
            view.show(message.stats)
        else:
            view.show_message(message.error or "no stats", error=True)

    def _label(self, name: str) -> Text:
        marker = "● " if name == self.current else "  "
        return Text(("✓ " if name in self.marked else "") + marker + inline(name))

    def action_mark(self) -> None:
        """space: mark or unmark the highlighted index; enter with two or more marked searches them together."""
        options = self.query_one(OptionList)
        at = options.highlighted
        if at is None or at >= len(self.names):
            return
        name = self.names[at]
        self.marked ^= {name}
        options.replace_option_prompt_at_index(at, self._label(name))
        hint = ("enter: open · esc: back" if not self.marked else
                f"space: mark · enter: search the {len(self.marked)} marked together · esc: back"
                if len(self.marked) > 1 else "space: mark another to search several · enter: open · esc: back")
        self.query_one("#index-hint", Static).update(hint)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if len(self.marked) > 1:
            self.dismiss([n for n in self.names if n in self.marked])
        else:
            self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
