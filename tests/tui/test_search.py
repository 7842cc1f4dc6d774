"""Typing, debouncing, stale results, mode keys, k and nprobe, highlighting, selection, mouse."""

from __future__ import annotations

import threading

from ragtui.tui import backend
from ragtui.tui.highlight import TERM_STYLE, WEAK_TERM_STYLE
from ragtui.tui.messages import SearchDone
from ragtui.tui.screens.source import SourceScreen
from ragtui.tui.widgets.mode_bar import ModeChip
from tests.tui import idle, make_app, ready, search, settled, wait_for


async def test_results_appear_as_you_type_with_terms_highlighted(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "bm25 ranking")
        outcome = app.results
        assert outcome.request.mode == "bm25" and outcome.request.query == "bm25 ranking"
        assert outcome.hits and len(outcome.hits) <= app.k
        table = app.main.results
        assert [h.chunk_id for h in table.hits] == [h.chunk_id for h in outcome.hits]
        assert table.row_count == len(outcome.hits)
        # The snippet lights "BM25" (the analyzer lowercases it to the query term "bm25"), by its weight:
        # "ranking" is rarer in the demo than "bm25", so it is the strong one.
        snippet = table.get_row_at(0)[-1]
        lit = {snippet.plain[s.start:s.end].lower(): str(s.style) for s in snippet.spans}
        assert lit.get("bm25") in (TERM_STYLE, WEAK_TERM_STYLE) and lit.get("ranking") == TERM_STYLE
        assert app.query_time.endswith("ms")


async def test_the_debounce_waits_for_a_pause_and_enter_searches_at_once(demo_index):
    app = make_app(demo_index[0], debounce=600.0)  # a pause that never ends within the test
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press(*"watch")
        await pilot.pause()
        assert app.results is None and app.query_text == "watch"
        await pilot.press("enter")
        await settled(pilot, "watch")
        assert app.results.request.query == "watch" and app.results.hits
        assert app.history.entries == ["watch"]


async def test_a_slow_search_never_overwrites_a_newer_one_and_the_ui_stays_live(demo_index, monkeypatch):
    release, finished = threading.Event(), threading.Event()
    real = backend.run_search

    def slow_for_index(retriever, request):
        if request.query != "index":
            return real(retriever, request)
        release.wait(30)  # this search is still running when the person types on
        try:
            return real(retriever, request)
        finally:
            finished.set()

    monkeypatch.setattr(backend, "run_search", slow_for_index)
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press(*"index")
        await wait_for(pilot, lambda: any(w.group == "search" and w.is_running for w in app.workers), "the slow search")
        # Its key's echo was held for its results (one frame for both), but only for FRAME_HOLD.
        await wait_for(pilot, lambda: not app.frames_held, "the echo to be let through")
        # The UI keeps taking keys while the slow search blocks its worker thread.
        await pilot.press(*"ing")
        assert app.main.query_box.value == "indexing"
        try:
            await settled(pilot, "indexing")
        finally:
            release.set()
        newer = [h.chunk_id for h in app.results.hits]
        await wait_for(pilot, finished.is_set, "the slow search to finish")
        await wait_for(pilot, lambda: idle(app), "its worker to end")
        await pilot.pause()
        assert app.results.request.query == "indexing"
        assert [h.chunk_id for h in app.main.results.hits] == newer


async def test_a_result_for_an_older_request_is_dropped(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "watch")
        shown = app.results
        old = backend.SearchOutcome(backend.SearchRequest(app.requested_seq - 1, "old", "bm25", 10), (), 0.0)
        app.post_message(SearchDone(old))
        await wait_for(pilot, lambda: app.stale_dropped == 1, "the old result to be dropped")
        assert app.results is shown and app.main.results.hits == shown.hits


async def test_mode_keys_switch_the_retriever_and_the_bar_shows_it(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "ivf lists")
        for key, mode in (("f1", "flat"), ("f2", "ivf"), ("f4", "hybrid"), ("f3", "bm25")):
            await pilot.press(key)  # F-keys work while typing
            await settled(pilot)
            assert app.mode == mode and app.results.request.mode == mode
            assert app.main.query_one(f"#mode-{mode}", ModeChip).has_class("-current")
        await pilot.press("escape")  # leave the query box: digits now select modes
        assert app.focused is app.main.results
        for key, mode in (("1", "flat"), ("2", "ivf"), ("4", "hybrid"), ("3", "bm25")):
            await pilot.press(key)
            await settled(pilot)
            assert app.results.request.mode == mode
        assert app.query_text == "ivf lists"


async def test_scores_are_formatted_for_the_mode(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "vectors")
        bm25 = app.main.results.get_row_at(0)[1].plain
        assert len(bm25.split(".")[1]) == 2
        await pilot.press("f1")
        await settled(pilot)
        flat = app.main.results.get_row_at(0)[1].plain
        assert len(flat.split(".")[1]) == 4 and -1.0 <= float(flat) <= 1.0


async def test_k_and_nprobe_change_from_the_keyboard(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "the")
        await pilot.press("escape", "minus", "minus")
        await settled(pilot)
        assert app.k == 3 and len(app.results.hits) == 3 and app.results.request.k == 3
        await pilot.press("plus")
        await settled(pilot)
        assert app.k == 5 and len(app.results.hits) == 5
        nlist, default = backend.resolved_ivf(app.retriever)
        await pilot.press("2", "left_square_bracket")
        await settled(pilot)
        assert app.nprobe == max(1, default - 1) and app.results.request.nprobe == app.nprobe
        await pilot.press("right_curly_bracket", "right_curly_bracket", "right_curly_bracket")
        await settled(pilot)
        assert app.nprobe == nlist  # doubling stops at nlist
        params = app.main.query_one("#mode-params").render()
        assert "k 5" in str(params) and f"nprobe {nlist}/{nlist}" in str(params)


async def test_the_detail_pane_follows_the_selection(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "chunk")
        detail = app.main.detail
        first = app.results.hits[0]
        assert detail.chunk_id == first.chunk_id
        assert detail.citation.status == "fresh" and detail.citation.start_line >= 1
        await pilot.press("escape", "down")
        await settled(pilot)
        second = app.results.hits[1]
        assert app.main.results.selected_hit == second
        await wait_for(pilot, lambda: detail.citation is not None and detail.citation.chunk_id == second.chunk_id,
                       "the second chunk's citation")
        head = str(detail.query_one("#detail-head").render())
        c = detail.citation
        assert second.chunk_id in head and "fresh" in head
        assert f"n_tokens {c.record.n_tokens}" in head and c.record.fingerprint[:16] in head
        span = f"line {c.start_line}" if c.start_line == c.end_line else f"lines {c.start_line}–{c.end_line}"
        assert span in head
        body = detail.query_one("#detail-body").render()
        assert body.plain == second.text
        assert any(body.plain[s.start:s.end].lower() == "chunk" for s in body.spans)


async def test_the_mouse_selects_modes_and_rows(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        await pilot.click("#mode-flat")
        await settled(pilot)
        assert app.mode == "flat" and app.results.request.mode == "flat"
        await pilot.click("#results", offset=(10, 3))  # header row, then rows 0 and 1
        await settled(pilot)
        assert app.main.results.cursor_row == 2
        assert app.main.detail.chunk_id == app.results.hits[2].chunk_id
        await pilot.click("#results", offset=(10, 3))  # a click on the selected row opens its source
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        assert app.screen.citation.chunk_id == app.results.hits[2].chunk_id
