"""The results table (a Line API widget): cursor keys, paging, scrolling, mouse hover, re-layout on resize,
and the one-frame-per-keystroke hold around typed searches."""

from __future__ import annotations

from ragtui.core.errors import RagtuiError
from ragtui.tui import backend
from tests.tui import make_app, ready, search, settled, wait_for


async def test_keys_move_the_cursor_page_by_page_and_to_either_end(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, vectors="ready")
        # Flat mode at k 50: every chunk of the demo, more rows than the pane shows.
        await pilot.press("escape", "1", "plus", "plus", "slash")
        assert app.k == 50 and app.mode == "flat"
        await search(pilot, "index")
        table, detail = app.main.results, app.main.detail
        n = len(table.hits)
        page = table.scrollable_content_region.height - 1  # rows under the header
        assert n > page + 1, "the demo should give more hits than one page"
        await pilot.press("escape")  # the cursor stayed on the chunk it was on as the query grew
        assert app.focused is table

        await pilot.press("end")
        await settled(pilot)
        assert table.cursor_row == n - 1 and detail.chunk_id == table.hits[-1].chunk_id
        # The last row is on screen, under the fixed header.
        assert table.scroll_offset.y > 0
        assert 1 <= table.cursor_row + 1 - table.scroll_offset.y < table.scrollable_content_region.height

        await pilot.press("home")
        await settled(pilot)
        assert table.cursor_row == 0 and table.scroll_offset.y == 0 and detail.chunk_id == table.hits[0].chunk_id

        await pilot.press("pagedown")
        assert table.cursor_row == page
        await pilot.press("pageup")
        assert table.cursor_row == 0
        await pilot.press("up")  # stays at the top
        assert table.cursor_row == 0
        await pilot.press("down", "down")
        await settled(pilot)
        assert table.cursor_row == 2 and detail.chunk_id == table.hits[2].chunk_id


async def test_each_row_is_laid_out_to_the_columns_and_follows_the_width(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        table = app.main.results
        widths = [c.width for c in table.columns.values()]
        assert sum(widths) + 2 * len(widths) == table.size.width  # one blank cell either side of each column
        for i in range(table.row_count):
            cells = table.get_row_at(i)
            assert [c.cell_len for c in cells] <= widths and cells[0].plain == str(table.hits[i].rank)
            strip = table.render_line(i + 1)
            assert strip.cell_length == table.size.width
        narrow = table.columns["snippet"].width
        await pilot.resize_terminal(110, 30)
        await wait_for(pilot, lambda: table.columns["snippet"].width > narrow, "the wider snippet column")
        assert table.render_line(1).cell_length == table.size.width
        assert table.hits[0].chunk_id in table.render_line(1).text


async def test_the_mouse_lights_the_row_under_it_until_a_key_moves_the_cursor(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        table = app.main.results
        await pilot.hover("#results", offset=(10, 2))  # header, then row 0, row 1
        assert table.hover_row == 1
        lit, plain = table.render_line(2), table._strip(1, False, False)
        assert lit.text == plain.text and lit != plain  # the same text, another background
        await pilot.hover("#results", offset=(10, 0))  # over the header: no row
        assert table.hover_row is None
        await pilot.hover("#results", offset=(10, 3))
        await pilot.press("escape", "down")
        assert table.hover_row is None and table.cursor_row == 1


async def test_a_typed_keys_echo_waits_for_its_results_but_never_long(demo_index, monkeypatch):
    app = make_app(demo_index[0])
    real = backend.run_search
    calls = []

    def failing_for_boom(retriever, request):
        calls.append(request.query)
        if request.query == "boom":
            raise RagtuiError("the search broke")
        return real(retriever, request)

    monkeypatch.setattr(backend, "run_search", failing_for_boom)
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "index")
        assert not app.frames_held  # released once the results were in
        app.main.query_box.value = ""
        await settled(pilot)
        await pilot.press(*"boom")
        await wait_for(pilot, lambda: "boom" in calls, "the failing search")
        await wait_for(pilot, lambda: not app.frames_held, "the frames to be let through")
        await pilot.pause()
        assert "boom" in app.main.query_box.render_line(0).text
