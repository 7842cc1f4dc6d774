"""The compare view: flat, IVF and BM25 side by side, overlap@k, ranks in the other modes, IVF recall."""

from __future__ import annotations

from ragtui.tui import backend
from ragtui.tui.screens.compare import CompareScreen
from ragtui.tui.screens.source import SourceScreen
from ragtui.tui.widgets.compare_panel import ComparePanel
from tests.tui import make_app, ready, search, wait_for


async def _open_compare(pilot, query: str) -> CompareScreen:
    app = pilot.app
    await search(pilot, query)
    await pilot.press("escape", "v")
    await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.outcome is not None,
                   "the comparison")
    return app.screen


async def test_compare_lines_up_the_three_modes_with_their_agreement(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = await _open_compare(pilot, "vectors lists")
        outcome = screen.outcome
        assert set(outcome.runs) == {"flat", "ivf", "bm25"} and not outcome.off
        ids = {m: [h.chunk_id for h in hits] for m, hits in outcome.runs.items()}
        for (a, b), n in outcome.overlap.items():
            assert n == len(set(ids[a]) & set(ids[b]))
        assert outcome.ivf_recall == len(set(ids["ivf"]) & set(ids["flat"])) / len(ids["flat"])
        # Each panel lists its own top-k and, per chunk, its rank in the other two modes.
        for panel in screen.query(ComparePanel):
            assert [h.chunk_id for h in panel.hits] == ids[panel.mode]
            others = [m for m in ("flat", "ivf", "bm25") if m != panel.mode]
            for row, hit in enumerate(panel.hits):
                cell = panel.table.get_row_at(row)[2].plain.split()
                expected = [f"{m[0].upper()}{outcome.rank_in(m, hit.chunk_id) or '–'}" for m in others]
                assert cell == expected
        head = str(screen.query_one("#compare-head").render())
        assert f"overlap@{app.k}" in head and f"IVF recall@{app.k} vs flat" in head


async def test_probing_every_list_gives_ivf_full_recall(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        nlist, _ = backend.resolved_ivf(app.retriever)
        screen = await _open_compare(pilot, "the index")
        for _ in range(nlist):
            await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.outcome is not None and screen.outcome.nprobe == nlist, "the re-run")
        assert screen.outcome.ivf_recall == 1.0
        assert screen.outcome.overlap[("flat", "ivf")] == len(screen.outcome.runs["flat"])


async def test_enter_on_a_compared_chunk_jumps_to_its_source(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        screen = await _open_compare(pilot, "watch folder")
        panel = screen.query_one("#compare-flat", ComparePanel)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        assert app.screen.citation.chunk_id == panel.hits[1].chunk_id
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("escape")
        assert app.screen is app.main


async def test_compare_needs_a_query(demo_index, notices):
    app = make_app(demo_index[0])
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await pilot.press("escape", "v")
        await pilot.pause()
        assert app.screen is app.main
        assert notices.any("type a query first")
