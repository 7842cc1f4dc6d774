"""One index's stats as a small table: size, model, tokenizer, chunker, when it was built, IVF state."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ragtui.core.textsafe import neutralize
from ragtui.tui import fmt

__all__ = ["IndexStatsView"]


class IndexStatsView(Static):
    """Shows a ``backend.IndexStats``, a message while loading, or why there are no stats."""

    DEFAULT_CSS = """
    IndexStatsView {
        padding: 0 1;
        height: auto;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stats = None
        """The stats shown, if any."""

    def show_message(self, message: str, *, error: bool = False) -> None:
        self.stats = None
        self.update(Text(neutralize(message), style="red" if error else "dim italic"))

    def show(self, stats) -> None:
        self.stats = stats
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim", justify="right")
        table.add_column()
        for label, value in (
            ("index_id", stats.index_id),
            ("n_chunks", f"{stats.n_chunks:,}"),
            ("dim", str(stats.dim)),
            ("embedding_model", stats.embedding_model),
            ("tokenizer", stats.tokenizer),
            ("chunker", f"max_tokens {stats.max_tokens}, overlap {stats.overlap}"),
            ("created_at", fmt.when(stats.created_at)),
            ("IVF", f"nlist {stats.nlist}, nprobe "
                    + (str(stats.nprobe) if stats.nprobe else "auto")),
            ("IVF lists", stats.ivf_state),
        ):
            table.add_row(label, Text(neutralize(value), overflow="fold"))
        self.update(table)
