"""The command palette's extra provider: previous queries, to run again."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ragtui.core.textsafe import one_line

if TYPE_CHECKING:
    from ragtui.tui.ragtui_app import RagtuiApp

__all__ = ["HistoryCommands"]

_SHOWN = 12


class HistoryCommands(Provider):
    """Offers "search: <query>" for each history entry, newest first."""


    def _entries(self) -> list[str]:
        history = getattr(self.app, "history", None)
        return list(reversed(history.entries)) if history is not None else []

    async def discover(self) -> Hits:
        for query in self._entries()[:_SHOWN]:
            # A str prompt would be parsed as markup: "[link=x:]" in a query crashed the palette.
            yield DiscoveryHit(Text(f"search: {one_line(query, 60)}"), partial(cast("RagtuiApp", self.app).use_query, query),
                               help="run this earlier query again")

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for entry in self._entries():
            label = f"search: {one_line(entry, 60)}"
            score = matcher.match(label)
            if score > 0:
                shown = matcher.highlight(label) if "[" not in label else Text(label)  # highlight parses markup
                yield Hit(score, shown, partial(cast("RagtuiApp", self.app).use_query, entry),
                          help="run this earlier query again")
