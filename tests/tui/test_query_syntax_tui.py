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


async def test_a_malformed_query_is_reported_and_the_ui_stays_live(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "index")
        await pilot.press(*" pth:x")
        await wait_for(pilot, lambda: any("unknown filter 'pth:'" in n.message for n in app._notifications),
                       "the query error")
        assert any("query column 7" in n.message for n in app._notifications)
        # Fixing the query searches again.
        for _ in "pth:x":
            await pilot.press("backspace")
        await pilot.press(*"ext:md")
        await wait_for(pilot, lambda: app.results.request.query == "index ext:md", "the fixed search")
        assert app.results.hits

