"""The TUI searches through Retriever.search, so it takes the query syntax as the CLI does."""

from __future__ import annotations

from tests.tui import make_app, ready, search, wait_for


async def test_filters_phrases_and_exclusions_apply_in_the_tui(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        everywhere = {h.doc_id for h in app.results.hits}
        assert len(everywhere) > 1
        await pilot.press(*" path:faq.md")
        await wait_for(pilot, lambda: app.results.request.query == "index path:faq.md", "the filtered search")
        await pilot.pause()
        hits = app.results.hits
        assert hits and {h.doc_id.rsplit("/", 1)[1] for h in hits} == {"faq.md"}
        assert [h.chunk_id for h in app.main.results.hits] == [h.chunk_id for h in hits]


async def test_a_pasted_query_that_is_not_syntax_is_searched_as_text(demo_index, notices):
    app = make_app(demo_index[0])
    async with app.run_test(message_hook=notices, size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        await pilot.press(*" pth:x")  # not a filter: text, as pasted error messages and URLs are
        await wait_for(pilot, lambda: app.results is not None and app.results.request.query == "index pth:x",
                       "the search of the text")
        want = app.retriever.search("index pth:x", mode=app.mode, k=app.k)
        assert [h.chunk_id for h in app.results.hits] == [h.chunk_id for h in want] and want
        assert notices.sent == []


async def test_a_query_that_cannot_be_searched_clears_the_results_and_says_why(demo_index):
    from ragtui.core.search.retriever import MAX_QUERY_CHARS

    app = make_app(demo_index[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        assert app.main.results.hits
        app.main.query_box.value = "index " * (MAX_QUERY_CHARS // 6 + 1)
        await wait_for(pilot, lambda: app.results is None, "the failed search")
        assert app.main.results.hits == ()  # the previous query's results are not left under the new query
        head = str(app.main.detail.query_one("#detail-head").render())
        assert "cannot search" in head and "characters long" in head
        # Fixing the query searches again.
        app.main.query_box.value = "index ext:md"
        await wait_for(pilot, lambda: app.results is not None and app.results.request.query == "index ext:md",
                       "the fixed search")
        assert app.results.hits

