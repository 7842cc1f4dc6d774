"""The source view never cuts a line without a sign: "›" where a line goes on past the right edge, "‹" past the
left one once scrolled, and the head says how to see the rest."""

from __future__ import annotations

from ragtui.tui.screens.source import SourceScreen
from ragtui.tui.widgets.source_view import MORE_LEFT, MORE_RIGHT, LongLineMarks
from tests.tui import ingest, make_app, ready, search, wait_for


async def _open_source(pilot, query: str) -> SourceScreen:
    app = pilot.app
    await ready(pilot)
    await search(pilot, query)
    await pilot.press("escape", "enter")
    await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
    screen = app.screen
    await wait_for(pilot, lambda: screen.view.scroll_y == 0 and screen.query_one(LongLineMarks).rows, "the marks")
    return screen


async def test_long_lines_are_marked_at_the_edge_they_cross(tmp_path):
    folder = tmp_path / "src" / "docs"
    folder.mkdir(parents=True)
    (folder / "long.md").write_text("short line\n" + "zebra " + "word " * 60 + "END\n\tnext line\n", encoding="utf-8")
    ingest(folder, tmp_path / "art")
    app = make_app(tmp_path / "art")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open_source(pilot, "zebra")
        marks = screen.query_one(LongLineMarks)
        assert marks.rows[:3] == [" ", MORE_RIGHT, " "] and set(marks.rows[3:]) == {" "}
        assert screen.long_lines and MORE_RIGHT in str(screen.query_one("#source-head").render())
        screen.view.scroll_to(x=screen.view.max_scroll_x, animate=False, immediate=True)
        await wait_for(pilot, lambda: marks.rows[1] == MORE_LEFT, "the left mark after scrolling to the end")
        assert marks.rows[0] == MORE_LEFT and marks.rows[3] == " "  # short lines: gone from view, nothing to mark


async def test_a_file_of_short_lines_has_no_marks(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await _open_source(pilot, "ivf probe")
        await pilot.pause()
        assert set(screen.query_one(LongLineMarks).rows) == {" "} and not screen.long_lines
