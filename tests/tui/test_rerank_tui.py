"""Reranking in the TUI with the real cross-encoder: the first results at once, the reranked order
when it arrives (marked in the mode bar), typing never blocked, a budget that merges and says so."""

from __future__ import annotations

import threading

from textual.widgets import Static

from ragtui.config import Settings
from ragtui.tui import backend
from ragtui.tui.history import QueryHistory
from ragtui.tui.ragtui_app import create_app
from tests.helpers.onnx_models import require_onnx
from tests.tui import idle, ready, search, settled, wait_for
from tests.unit.fakes import HashEmbedder


def make_rerank_app(artifacts, n: int = 5, budget_ms: int = 0):
    # threads fixed, so a budget's batches (one pair per thread) are the same on any machine
    settings = Settings(artifacts=artifacts, rerank={"n": n, "budget_ms": budget_ms, "threads": 2})
    return create_app(settings, embedder_factory=lambda s: HashEmbedder(), debounce=0.0, poll_seconds=0.1,
                      history=QueryHistory(None))


def mode_bar_text(app) -> str:
    return str(app.main.query_one("#mode-params", Static).render())


def table_ids(app) -> list[str]:
    return [h.chunk_id for h in app.main.results.hits]


async def reranked(pilot):
    app = pilot.app
    await wait_for(pilot, lambda: app.reranked is not None and not any(
        w.group == "rerank" and w.is_running for w in app.workers), "the reranked order")
    await pilot.pause()


async def test_the_reranked_order_replaces_the_first_results(demo_index):
    require_onnx()
    app = make_rerank_app(demo_index[0], n=5)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: app.reranker is not None, "the cross-encoder to load")
        await search(pilot, "how does the index stay fresh")
        await reranked(pilot)
        first = app.reranked.outcome.hits
        result = app.reranked.reranked
        assert app.results is app.reranked.outcome and len(first) >= 5
        # The same candidates, each once: the first five reordered, the rest in place.
        assert sorted(h.chunk_id for h in result.hits) == sorted(h.chunk_id for h in first)
        assert {h.chunk_id for h in result.hits[:5]} == {h.chunk_id for h in first[:5]}
        assert table_ids(app) == [h.chunk_id for h in result.hits[: app.k]]
        assert result.complete and app.rerank_text.startswith("reranked 5 · ")
        assert "reranked 5" in mode_bar_text(app)
        # Scores on screen are the cross-encoder's for the reranked five.
        scores = app.reranker.score("how does the index stay fresh", [h.text for h in result.hits[:5]])
        assert [round(h.score, 4) for h in result.hits[:5]] == [round(float(s), 4) for s in scores]


async def test_typing_goes_on_while_reranking_and_a_stale_rerank_is_dropped(demo_index, monkeypatch):
    require_onnx()
    release = threading.Event()
    real = backend.rerank_outcome
    superseded = []

    def slow_for_first(reranker, outcome, budget_ms, should_stop=None):
        if outcome.request.query != "index":
            return real(reranker, outcome, budget_ms, should_stop)
        release.wait(30)  # still reranking "index" while the person types on
        result = real(reranker, outcome, budget_ms, should_stop)
        superseded.append(result.reranked)
        return result

    monkeypatch.setattr(backend, "rerank_outcome", slow_for_first)
    app = make_rerank_app(demo_index[0], n=5)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: app.reranker is not None, "the cross-encoder to load")
        await search(pilot, "index")
        # The first-stage results are on screen although their reranking has not finished.
        assert app.results.request.query == "index" and table_ids(app)
        assert app.reranked is None and "reranking 5…" in mode_bar_text(app)
        await pilot.press(*" files")
        assert app.main.query_box.value == "index files"
        await settled(pilot, "index files")
        release.set()
        await reranked(pilot)
        await wait_for(pilot, lambda: idle(app) and not any(w.is_running for w in app.workers
                                                             if w.group == "rerank"), "every worker")
        assert app.reranked.outcome.request.query == "index files"
        # The superseded rerankings ("index", and "index " typed on) stopped before their first pair.
        assert superseded and all(r.reason == "cancelled" and r.scored == 0 for r in superseded)
        assert table_ids(app) == [h.chunk_id for h in app.reranked.reranked.hits[: app.k]]


async def test_a_spent_budget_merges_the_partial_order_and_says_so(demo_index, monkeypatch):
    require_onnx()
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(backend, "RERANK_CLOCK", lambda: next(ticks) * 0.010)  # 10 ms per reading
    app = make_rerank_app(demo_index[0], n=8, budget_ms=25)  # start, 10, 20: two batches, then 30 >= 25
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: app.reranker is not None, "the cross-encoder to load")
        await search(pilot, "bm25 ranking")
        await reranked(pilot)
        result = app.reranked.reranked
        m = 2 * app.reranker.batch_size  # a batch is one pair per thread
        assert result.scored == m and not result.complete and result.reason == "budget"
        first = app.reranked.outcome.hits
        assert result.asked == min(8, len(first)) > m
        assert app.rerank_text.startswith(f"reranked {m} of {result.asked} (time budget)")
        assert "time budget" in mode_bar_text(app)
        assert [h.chunk_id for h in result.hits[m:]] == [h.chunk_id for h in first[m:]]


async def test_x_turns_reranking_on_and_off(demo_index):
    require_onnx()
    app = make_rerank_app(demo_index[0], n=0)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "watch")
        assert app.rerank_n == 0 and app.reranker is None and app.rerank_text == ""
        app.main.results.focus()
        await pilot.press("x")
        await wait_for(pilot, lambda: app.reranker is not None, "the cross-encoder to load")
        await reranked(pilot)
        assert app.rerank_n == 20 and app.rerank_text.startswith("reranked ")
        await pilot.press("x")
        await settled(pilot, "watch")
        assert app.rerank_n == 0 and app.reranked is None and "rerank" not in mode_bar_text(app)
        assert table_ids(app) == [h.chunk_id for h in app.results.hits[: app.k]]
