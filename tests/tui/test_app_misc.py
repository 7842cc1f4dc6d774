"""Help, the command palette, the query history, themes, and the layout at 80×24 and wide terminals."""

from __future__ import annotations

from textual.command import CommandList, CommandPalette

from ragtui.tui.history import QueryHistory
from ragtui.tui.screens.help import HelpScreen
from ragtui.tui.screens.indexes import IndexScreen
from tests.tui import make_app, ready, search, settled, wait_for


async def test_help_opens_with_question_mark_and_closes(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("?")  # in the query box, ? is just a character
        assert app.main.query_box.value == "?" and app.screen is app.main
        await pilot.press("backspace", "escape", "?")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.screen is app.main


async def test_help_is_reachable_from_the_query_box_and_the_footer_says_how(demo_index):
    """ctrl+g (nano's "Get Help") opens the help while typing, without taking a character; the footer shows it."""
    from textual.widgets import Footer

    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press(*"what?")
        assert app.focused is app.main.query_box
        footer_keys = {b.key for _, b, enabled, _ in app.screen.active_bindings.values() if b.show and enabled}
        assert "ctrl+g" in footer_keys and app.main.query_one(Footer).display
        await pilot.press("ctrl+g")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+g")
        assert app.screen is app.main and app.main.query_box.value == "what?"


def test_the_help_lists_every_key_of_every_screen():
    """Each key a screen binds appears in the help (x, the reranker's, was once missing)."""
    from ragtui.tui.ragtui_app import RagtuiApp
    from ragtui.tui.screens.compare import CompareScreen
    from ragtui.tui.screens.help import KEYS
    from ragtui.tui.screens.search import SearchScreen
    from ragtui.tui.screens.source import SourceScreen
    from ragtui.tui.widgets.query_input import QueryInput

    shown = {"plus": "+", "equals_sign": "+", "minus": "−", "right_square_bracket": "]",
             "left_square_bracket": "[", "right_curly_bracket": "}", "left_curly_bracket": "{",
             "question_mark": "?", "slash": "/", "escape": "esc", "up": "↑", "down": "↓"}
    listed = {section: " ".join(key for key, _ in rows).split() for section, rows in KEYS}
    every = {k for keys in listed.values() for k in keys}
    for run in [k for k in every if "–" in k]:  # a run of keys, "F1–F6" or "1–6": each of them listed
        first, last = run.split("–")
        prefix = first.rstrip("0123456789")
        every |= {f"{prefix}{n}" for n in range(int(first[len(prefix):]), int(last[len(prefix):]) + 1)}
    from ragtui.tui.screens.indexes import IndexScreen

    for owner in (RagtuiApp, SearchScreen, CompareScreen, SourceScreen, QueryInput, IndexScreen):
        for binding in owner.BINDINGS:
            for key in binding.key.split(","):
                name = shown.get(key, key.upper() if key.startswith("f") and key[1:].isdigit() else key)
                assert name in every, f"{owner.__name__} binds {key} ({binding.action}) but the help does not list it"
    assert "x" in listed["Results"]


async def test_the_palette_runs_app_commands(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"pick index")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a match")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen), "the index picker")


async def test_the_query_history_walks_with_the_arrows_and_is_kept(demo_index, tmp_path):
    path = tmp_path / "history"
    app = make_app(demo_index[0], history=QueryHistory(path))
    async with app.run_test() as pilot:
        await ready(pilot)
        box = app.main.query_box
        for query in ("bm25", "ivf lists"):
            await pilot.press(*query, "enter")
            await settled(pilot, query)
            box.focus()
            box.value = ""
            await pilot.pause()
        await pilot.press(*"dra")
        await pilot.press("up")
        assert box.value == "ivf lists"
        await pilot.press("up")
        assert box.value == "bm25"
        await pilot.press("up")
        assert box.value == "bm25"  # the oldest stays
        await pilot.press("down", "down")
        assert box.value == "dra"  # back to what was being typed
        await settled(pilot, "dra")
    assert path.read_text().splitlines() == ["bm25", "ivf lists"]
    again = QueryHistory(path).load()
    assert again.entries == ["bm25", "ivf lists"]


async def test_the_palette_offers_earlier_queries(demo_index):
    history = QueryHistory(None)
    history.add("watch folder")
    app = make_app(demo_index[0], history=history)
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"search: watch")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "the history entry")
        await pilot.press("enter")
        await settled(pilot, "watch folder")
        assert app.main.query_box.value == "watch folder" and app.results.hits


async def test_light_and_dark_themes(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        assert app.current_theme.dark
        await pilot.press("escape", "t")
        assert not app.current_theme.dark
        await pilot.press("t")
        assert app.current_theme.dark


async def test_layout_stacks_at_80_columns_and_goes_side_by_side_when_wide(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        table, detail = app.main.results, app.main.detail
        assert app.main.has_class("-narrow")
        assert detail.region.y > table.region.y and detail.region.x == table.region.x
        assert [str(c.label) for c in table.columns.values()] == ["#", "score", "chunk_id", "snippet"]
        assert table.region.right <= 80
        await pilot.resize_terminal(160, 45)
        await wait_for(pilot, lambda: app.main.has_class("-wide"), "the wide layout")
        await pilot.pause()
        assert detail.region.x > table.region.x and detail.region.y == table.region.y
        # chunk_id once (no document column repeating it), and the snippet gets the room.
        columns = {str(c.label): c.width for c in table.columns.values()}
        assert list(columns) == ["#", "score", "chunk_id", "snippet"]
        longest = max(len(h.chunk_id) for h in table.hits)
        assert columns["chunk_id"] == max(16, longest) and columns["snippet"] >= 55
        assert columns["snippet"] > 2 * columns["chunk_id"]


async def test_the_status_line_shows_the_index_and_vectors(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        state = app.main.query_one("#status").state
        n = app.retriever.meta.n_chunks
        assert state.index == f"demo · {n} chunks · test-hash (16d)"
        assert state.vectors == "vectors on" and not state.vectors_off
        assert state.live.startswith("live")


async def test_a_fifo_as_the_history_file_is_noted_replaced_and_the_app_exits(demo_index, tmp_path, notices):
    import os

    path = tmp_path / "history"
    os.mkfifo(path)
    app = make_app(demo_index[0], history=QueryHistory(path))
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: notices.any("is a FIFO"), "the history note")
        await pilot.press(*"bm25", "enter")
        await settled(pilot, "bm25")
    # The run ended (a worker blocked on the FIFO would keep it from exiting), and the query was kept in a file.
    assert path.is_file() and path.read_text() == "bm25\n"
