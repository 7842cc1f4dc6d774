"""Clear, non-crashing states: no index, an empty index, an index that fails validation, no embedder."""

from __future__ import annotations

import os

from ragtui.core.errors import EmbeddingError
from ragtui.tui import backend
from ragtui.tui.screens.compare import CompareScreen
from tests.tui import build_demo, ingest, make_app, ready, search, settled, wait_for
from tests.unit.fakes import HashEmbedder


async def test_no_index_says_how_to_make_one_and_opens_it_when_it_appears(tmp_path):
    artifacts = tmp_path / "artifacts"
    app = make_app(artifacts, poll_seconds=0.05)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "missing", "the missing state")
        notice = app.main.notice
        assert app.main.showing_notice == "missing"
        assert "No index yet" in notice.title and "ragtui ingest" in notice.body and "--watch" in notice.body
        await pilot.press(*"apples")  # typing does no harm
        build_demo(tmp_path)
        await ready(pilot)
        assert app.main.showing_notice == ""
        await settled(pilot, "apples")


async def test_an_empty_index_says_so(tmp_path):
    folder = tmp_path / "src" / "empty"
    folder.mkdir(parents=True)
    ingest(folder, tmp_path / "artifacts")
    app = make_app(tmp_path / "artifacts")
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "empty", "the empty state")
        assert app.main.showing_notice == "empty"
        assert "is empty" in app.main.notice.title and "ragtui ingest" in app.main.notice.body
        await pilot.press(*"anything")
        await pilot.pause()
        assert app.results is None


async def test_an_index_that_fails_validation_is_explained_and_recovers(tmp_path, monkeypatch):
    artifacts, folder = build_demo(tmp_path)
    vectors = os.path.realpath(artifacts / "rag" / "demo" / "vectors.f32")
    with open(vectors, "r+b") as f:
        f.truncate(7)  # no longer n_chunks × dim float32s
    calls = {"open": 0, "generation": 0}
    real_open, real_generation = backend.open_index, backend.generation

    def counting(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(backend, "open_index", counting("open", real_open))
    monkeypatch.setattr(backend, "generation", counting("generation", real_generation))
    app = make_app(artifacts, poll_seconds=0.05)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "invalid", "the invalid state")
        # The poller looks at the generation, but reads a broken one only once.
        await wait_for(pilot, lambda: calls["generation"] >= 4, "a few polls")
        assert calls["open"] == 1
        assert app.main.showing_notice == "invalid" and app.main.notice.has_class("-error")
        assert "failed validation" in app.main.notice.title
        assert "vectors.f32" in app.main.notice.body and "ragtui ingest" in app.main.notice.body
        (folder / "new.md").write_text("# New\n\nA new document forces a new generation.\n")
        ingest(folder, artifacts)  # the writer rebuilds what it cannot trust
        await ready(pilot)
        await search(pilot, "generation")
        assert "demo/new.md#0" in [h.chunk_id for h in app.results.hits]


async def test_an_unavailable_embedder_leaves_bm25_working_and_says_why(demo_index, notices):
    def broken(settings):
        raise EmbeddingError("wordllama could not load its weights")

    app = make_app(demo_index[0], embedder_factory=broken)
    async with app.run_test(message_hook=notices) as pilot:
        app = await ready(pilot, vectors="off")
        assert "wordllama could not load" in app.vectors_reason
        status = app.main.query_one("#status").state
        assert status.vectors_off and "vectors off: wordllama could not load" in status.vectors
        await search(pilot, "bm25")
        assert app.results.hits and app.results.request.mode == "bm25"
        await pilot.press("f1")  # refused, with the reason
        await pilot.pause()
        assert app.mode == "bm25"
        assert notices.any("flat is off")
        assert app.main.query_one("#mode-flat").has_class("-off")
        await pilot.press("escape", "v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.outcome, "the comparison")
        outcome = app.screen.outcome
        assert set(outcome.runs) == {"bm25"} and "wordllama could not load" in outcome.off["flat"]
        assert outcome.ivf_recall is None


async def test_an_embedder_for_another_model_turns_vectors_off(demo_index):
    app = make_app(demo_index[0], embedder_factory=lambda s: HashEmbedder(dim=32, model="other-model"))
    async with app.run_test() as pilot:
        await ready(pilot, vectors="off")
        assert "other-model" in app.vectors_reason and "test-hash" in app.vectors_reason
        await search(pilot, "index")
        assert app.results.hits


async def test_a_vector_mode_chosen_while_the_embedder_loads_runs_once_it_is_ready(demo_index):
    import threading

    gate = threading.Event()

    def slow(settings):
        gate.wait(30)
        return HashEmbedder()

    app = make_app(demo_index[0], embedder_factory=slow)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "ready", "the index")
        await search(pilot, "lists")  # BM25 works before the embedder is ready
        assert app.vectors == "loading" and app.results.hits
        await pilot.press("f1")
        await pilot.pause()
        assert app.mode == "flat" and app.results.request.mode == "bm25"
        assert "loading embedder" in str(app.main.query_one("#mode-params").render())
        gate.set()
        await wait_for(pilot, lambda: app.results.request.mode == "flat", "the flat search")


async def test_no_index_suggests_the_artifacts_root_the_ui_was_started_with(tmp_path):
    """Once, the suggested `ragtui ingest ./docs` built the index where this UI does not look."""
    from dataclasses import replace

    from ragtui.config import Settings
    from ragtui.tui.history import QueryHistory
    from ragtui.tui.ragtui_app import create_app

    artifacts = tmp_path / "my artifacts"
    app = make_app(artifacts)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "missing", "the missing state")
        assert f"ragtui ingest ./docs --artifacts '{artifacts}'" in app.main.notice.body
    default = replace(Settings(artifacts=artifacts), artifacts_from="default: /artifacts does not exist")
    app = create_app(default, embedder_factory=lambda s: HashEmbedder(), debounce=0.0, poll_seconds=0.1,
                     history=QueryHistory(None))
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "missing", "the missing state")
        assert "    ragtui ingest ./docs\n" in app.main.notice.body  # the default root needs no flag


async def test_an_unknown_index_lists_the_indexes_that_exist(tmp_path):
    artifacts, _folder = build_demo(tmp_path)
    ingest(tmp_path / "src" / "demo", artifacts, index_id="other")
    app = make_app(artifacts, index="nosuch")
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "missing", "the missing state")
        body = app.main.notice.body
        assert "no index 'nosuch'" in body and "The indexes there: demo, other" in body
        assert "ragtui ingest ./docs --index nosuch --artifacts" in body


def test_an_index_only_looked_at_is_not_the_one_used_last(tmp_path):
    """The picker's statistics open the highlighted index to read them: that does not make it the one the next
    ``ragtui`` opens, as opening it to search does."""
    from ragtui import app as app_layer
    from ragtui.config import Settings

    artifacts, _folder = build_demo(tmp_path)
    ingest(tmp_path / "src" / "demo", artifacts, index_id="other")
    settings = Settings(artifacts=artifacts)
    backend.open_index(artifacts / "rag" / "other", settings)
    backend.open_index(artifacts / "rag" / "demo", settings, remember=False)
    assert app_layer.resolve_index(settings, note=None).name == "other"


async def test_several_indexes_open_the_one_used_last_without_asking(tmp_path):
    """app.resolve_index decides for the TUI too: the picker only when the choice is not clear."""
    from ragtui import app as app_layer
    from ragtui.config import Settings

    artifacts, _folder = build_demo(tmp_path)
    ingest(tmp_path / "src" / "demo", artifacts, index_id="other")
    app = make_app(artifacts)
    async with app.run_test() as pilot:  # nothing remembered, cwd outside both folders: ask
        await wait_for(pilot, lambda: app.index_state == "choose", "the picker")
        picker = app.screen
        await wait_for(pilot, lambda: getattr(picker, "names", None) == ["demo", "other"], "the list")
    app_layer.remember_index(Settings(artifacts=artifacts), "other")
    app = make_app(artifacts)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.index_state == "ready", "the index to open")
        assert app.index_id == "other"
