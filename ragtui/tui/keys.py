"""Key bindings that more than one screen has, defined once."""

from __future__ import annotations

from textual.binding import Binding

__all__ = ["k_nprobe_bindings"]


def k_nprobe_bindings(*, show: bool) -> list[Binding]:
    """The keys that change k and nprobe, for every screen that has them (the search and compare screens);
    ``show``: list them in the footer."""
    return [
        Binding("plus,equals_sign", "app.change_k(1)", "k+", show=show),
        Binding("minus", "app.change_k(-1)", "k−", show=show),
        Binding("right_square_bracket", "app.change_nprobe(1)", "nprobe+", show=show),
        Binding("left_square_bracket", "app.change_nprobe(-1)", "nprobe−", show=show),
        Binding("right_curly_bracket", "app.change_nprobe(0, 2)", "nprobe×2", show=False),
        Binding("left_curly_bracket", "app.change_nprobe(0, 0.5)", "nprobe÷2", show=False),
    ]
