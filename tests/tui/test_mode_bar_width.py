"""The mode bar fits an 80-column terminal: the other modes' chips shorten to their keys so k, the fusion and
the query time stay whole; a wide terminal names every mode."""

from __future__ import annotations

from ragtui.tui.widgets.mode_bar import MODE_KEYS, MODE_LABELS, ModeBar, ModeChip
from tests.tui import make_app, ready, search, settled


def chips(app) -> dict[str, str]:
    return {chip.mode: str(chip.render()) for chip in app.main.query(ModeChip)}


def params(app) -> str:
    return str(app.main.query_one(ModeBar).query_one("#mode-params").render())


async def test_at_80_columns_only_the_current_mode_is_named_and_the_figures_fit(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("f4")
        await search(pilot, "ivf lists")
        await settled(pilot)
        shown = chips(app)
        assert shown["hybrid"] == f"{MODE_KEYS['hybrid']} {MODE_LABELS['hybrid']}"
        assert all(shown[m] == MODE_KEYS[m] for m in shown if m != "hybrid"), shown
        bar = app.main.query_one(ModeBar)
        used = sum(chip.outer_size.width for chip in app.main.query(ModeChip))
        text = params(app)
        assert "k 10" in text and "ms" in text, text
        assert used + len(text) + 2 <= bar.size.width, (used, text)  # the figures and their padding fit whole
        await pilot.press("f1")  # the name follows the current mode
        await settled(pilot)
        shown = chips(app)
        assert shown["flat"] == f"{MODE_KEYS['flat']} {MODE_LABELS['flat']}" and shown["hybrid"] == MODE_KEYS["hybrid"]


async def test_a_wide_terminal_names_every_mode(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        assert chips(app) == {m: f"{MODE_KEYS[m]} {MODE_LABELS[m]}" for m in MODE_LABELS}
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert sum(len(t) == 2 for t in chips(app).values()) == len(MODE_LABELS) - 1
