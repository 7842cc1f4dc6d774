"""Key bindings that more than one screen has, defined once."""

from __future__ import annotations

from textual.binding import Binding

from ragtui.core.search.modes import MODE_TABLE, ModeSpec

__all__ = ["MODES_BY_KEY", "k_nprobe_bindings", "mode_bindings", "mode_keys_text"]

MODES_BY_KEY: tuple[ModeSpec, ...] = tuple(sorted(MODE_TABLE, key=lambda m: m.key))
"""The modes in the order of their keys (1 / F1 first): the order of the mode bar's chips."""


def mode_bindings(*, function_keys: bool) -> list[Binding]:
    """A binding per mode of ``core.search.modes.MODE_TABLE``: its digit (the search screen, outside the
    query box) or F and its digit (``function_keys``: anywhere)."""
    if function_keys:
        return [Binding(f"f{m.key}", f"set_mode('{m.name}')", m.label, show=False) for m in MODES_BY_KEY]
    return [Binding(m.key, f"app.set_mode('{m.name}')", m.label, show=False) for m in MODES_BY_KEY]


def mode_keys_text(*, function_keys: bool) -> tuple[str, str]:
    """The help screen's line for the mode keys: ("F1–F6", "mode: flat · IVF · ..."); keys that do not run
    on from one digit to the next are listed one by one ("F1 F2 F4")."""
    names = [f"F{m.key}" if function_keys else m.key for m in MODES_BY_KEY]
    digits = [int(m.key) if m.key.isdigit() else -1 for m in MODES_BY_KEY]
    running = len(names) > 2 and digits[0] >= 0 and digits == list(range(digits[0], digits[0] + len(digits)))
    keys = f"{names[0]}–{names[-1]}" if running else " ".join(names)
    return keys, "mode: " + " · ".join(m.label for m in MODES_BY_KEY)


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
