"""Picking the index when there are several, and each one's stats."""

from __future__ import annotations

import shutil
from pathlib import Path

from ragtui.tui.screens.indexes import IndexScreen
from ragtui.tui.widgets.index_stats import IndexStatsView
from tests.tui import DEMO, FIXED_TIME, ingest, make_app, ready, search, settled, wait_for


def _ingest_two(tmp_path) -> tuple[Path, dict[str, int]]:
    """(artifacts, the number of chunks each ingest wrote, by index) for a demo and a faq index."""
    artifacts = tmp_path / "artifacts"
    written = {}
    for name, files in (("demo", None), ("faq", ["faq.md"])):
        folder = tmp_path / "src" / name
        folder.mkdir(parents=True)
        for f in DEMO.iterdir():
            if files is None or f.name in files:
                shutil.copy(f, folder / f.name)
        written[name] = ingest(folder, artifacts).chunks_total
    return artifacts, written


def _two_indexes(tmp_path) -> Path:
    """The artifacts root of a demo and a faq index."""
    return _ingest_two(tmp_path)[0]


async def test_several_indexes_ask_which_one_and_show_stats(tmp_path):
    artifacts, written = _ingest_two(tmp_path)
    app = make_app(artifacts)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen), "the index picker")
        assert app.index_state == "choose" and app.main.showing_notice == "choose"
        picker = app.screen
        await wait_for(pilot, lambda: picker.names == ["demo", "faq"], "the list")
        view = picker.query_one(IndexStatsView)
        await wait_for(pilot, lambda: view.stats is not None and view.stats.index_id == "demo", "demo's stats")
        s = view.stats
        assert (s.n_chunks, s.dim, s.embedding_model, s.tokenizer, s.created_at) == (
            written["demo"], 16, "test-hash", "test-words", FIXED_TIME)
        assert written["demo"] > 5 and written["faq"] < written["demo"] and s.ivf_state.startswith("not built")
        await pilot.press("down")
        await wait_for(pilot, lambda: view.stats is not None and view.stats.index_id == "faq", "faq's stats")
        assert view.stats.n_chunks == written["faq"]
        await pilot.press("enter")
        await ready(pilot)
        assert app.index_id == "faq" and app.retriever.meta.index_id == "faq"
        await search(pilot, "index")
        assert {h.doc_id for h in app.results.hits} == {"faq/faq.md"}


async def test_switching_index_reruns_the_query_and_shows_the_ivf_state(tmp_path):
    app = make_app(_two_indexes(tmp_path), index="demo")
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "index")
        assert any(h.doc_id.startswith("demo/") for h in app.results.hits)
        await pilot.press("escape", "i")
        await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen), "the picker")
        view = app.screen.query_one(IndexStatsView)
        await wait_for(pilot, lambda: view.stats is not None and view.stats.index_id == "demo", "the open one's stats")
        assert view.stats.ivf_state.startswith("built")  # the open index's lists are built
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: app.index_id == "faq" and app.retriever.meta.index_id == "faq", "the switch")
        await settled(pilot)
        assert {h.doc_id for h in app.results.hits} == {"faq/faq.md"}
        assert "faq" in app.main.query_one("#status").state.index


async def test_escape_keeps_the_open_index(tmp_path):
    app = make_app(_two_indexes(tmp_path), index="faq")
    async with app.run_test() as pilot:
        await ready(pilot)
        await pilot.press("escape", "i")
        await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen), "the picker")
        await pilot.press("escape")
        assert app.screen is app.main and app.index_id == "faq"
