"""bm25doc in the TUI (F5 / 5), hybrid's fusion toggle (f) and the ``[search]`` table read as the CLI reads it."""

from __future__ import annotations

from ragtui import app as app_layer
from ragtui.config import Settings
from ragtui.core.errors import EmbeddingError
from ragtui.tui.history import QueryHistory
from ragtui.tui.ragtui_app import create_app
from ragtui.tui.widgets.mode_bar import ModeBar, ModeChip
from tests.tui import make_app, ready, search, settled
from tests.unit.fakes import HashEmbedder


def bar(app) -> str:
    return app.main.query_one(ModeBar)._shown.plain


async def test_f5_and_5_search_with_bm25doc_also_without_vectors(demo_index):
    def broken(settings):
        raise EmbeddingError("model server down")

    app = make_app(demo_index[0], embedder_factory=broken)
    async with app.run_test() as pilot:
        await ready(pilot, vectors="off")
        await search(pilot, "ivf lists")
        await pilot.press("f5")  # works while typing, and without an embedder (lexical)
        await settled(pilot)
        assert app.mode == "bm25doc" and app.results.request.mode == "bm25doc"
        assert app.main.query_one("#mode-bm25doc", ModeChip).has_class("-current")
        assert not app.main.query_one("#mode-bm25doc", ModeChip).has_class("-off")
        assert app.main.query_one("#mode-hybrid", ModeChip).has_class("-off")
        want = app.retriever.search("ivf lists", mode="bm25doc", k=app.k)
        assert [h.chunk_id for h in app.results.hits] == [h.chunk_id for h in want] != []
        assert len(app.main.results.get_row_at(0)[1].plain.split(".")[1]) == 2  # an unbounded sum, as BM25
        await pilot.press("f3", "escape", "5")
        await settled(pilot)
        assert app.results.request.mode == "bm25doc"


async def test_the_search_table_sets_the_defaults_and_f_toggles_the_fusion(demo_index, notices):
    settings = Settings(artifacts=demo_index[0], search={"fusion": "rrf", "rrf_k": 30, "weight": 0.8})
    app = create_app(settings, embedder_factory=lambda s: HashEmbedder(), debounce=0.0, poll_seconds=0.1,
                     history=QueryHistory(None))
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await search(pilot, "vectors")
        assert "nprobe" in bar(app) and "rrf" not in bar(app)  # bm25: no fusion shown
        await pilot.press("f4")
        await settled(pilot)
        # The CLI's parameters for `ragtui search --mode hybrid` with this [search] table.
        cli = app_layer.search_options(settings, "hybrid")
        assert app.results.request.params == cli and cli["fusion"] == "rrf" and cli["rrf_k"] == 30
        # No lexical in [search]: the arm of the index's embedder's fit (fusion_fit; the test embedder is unknown).
        assert "rrf 30 · bm25stem" in bar(app) and "nprobe" not in bar(app)
        want = app.retriever.search("vectors", mode="hybrid", k=app.k, **cli)
        assert [h.chunk_id for h in app.results.hits] == [h.chunk_id for h in want]

        await pilot.press("escape", "f")
        await settled(pilot)
        assert app.fusion == "weighted"
        params = app.results.request.params
        assert params["fusion"] == "weighted" and params["weight"] == 0.8 and "rrf_k" not in params
        assert "weighted 0.8 · bm25stem" in bar(app)
        want = app.retriever.search("vectors", mode="hybrid", k=app.k, **params)
        assert [h.chunk_id for h in app.results.hits] == [h.chunk_id for h in want]

        await pilot.press("3", "f")  # outside hybrid: the toggle is kept and said, no search needed
        await settled(pilot)
        assert app.fusion == "rrf" and app.results.request.params == {}
        assert notices.any("hybrid fusion: rrf 30")
        await pilot.press("4")
        await settled(pilot)
        assert app.results.request.params == cli


async def test_a_search_table_the_mode_refuses_is_said_not_raised(demo_index):
    """Settings made in Python skip the config file's checks: a weight out of range is a notice, not a crash."""
    settings = Settings(artifacts=demo_index[0], search={"weight": 5})
    app = create_app(settings, embedder_factory=lambda s: HashEmbedder(), debounce=0.0, poll_seconds=0.1,
                     history=QueryHistory(None))
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "vectors")  # bm25 takes no weight: it searches
        assert app.results.hits
        await pilot.press("f4")
        await pilot.pause()
        assert app.is_running and app.mode == "hybrid"
        # Said where the results would be, and the results of bm25 are not left under hybrid's name.
        head = str(app.main.detail.query_one("#detail-head").render())
        assert "cannot search: fusion weight must be from 0 to 1" in head and app.main.results.hits == ()
        assert "[search]: fusion weight must be from 0 to 1" in bar(app)


async def test_the_compare_view_ranks_with_the_search_table_too(demo_index):
    """`v` lines up flat, IVF and BM25 as the results list and `ragtui search` rank them: the options of
    [search] that those modes take (here mmr and min_score) apply in each column."""
    from ragtui.tui.screens.compare import CompareScreen
    from tests.tui import wait_for

    query = "vectors lists index"
    settings = Settings(artifacts=demo_index[0], search={"mmr": 0.3, "min_score": 0.01})
    app = create_app(settings, embedder_factory=lambda s: HashEmbedder(), debounce=0.0, poll_seconds=0.1,
                     history=QueryHistory(None))
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, query)
        await pilot.press("escape", "v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.outcome is not None,
                       "the comparison")
        runs = app.screen.outcome.runs
        assert set(runs) == {"flat", "ivf", "bm25"}
        for mode in ("flat", "ivf", "bm25"):
            params = app_layer.search_options(settings, mode)
            assert params["mmr"] == 0.3 and params["min_score"] == 0.01
            want = app.retriever.search(query, mode=mode, k=app.k, **params)
            assert [h.chunk_id for h in runs[mode]] == [h.chunk_id for h in want]
        # Without the table the BM25 column would read otherwise: the options were really applied.
        plain = app.retriever.search(query, mode="bm25", k=app.k)
        assert [h.chunk_id for h in plain] != [h.chunk_id for h in runs["bm25"]]
