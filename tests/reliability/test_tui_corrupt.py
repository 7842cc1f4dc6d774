"""Corrupt indexes in the TUI: the app shows its error state (and recovers), it never crashes.

Cases come from the fuzzer (helpers_fuzz.invalid_cases): for each of the
four files, corruptions that the lazy open the TUI uses already rejects
(a damaged line of docs.jsonl is otherwise found when that line is shown).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import pytest

from ragtui.core.errors import IndexFormatError
from ragtui.core.index.index_format import FILES, read_index
from ragtui.tui import ragtui_app as app_module
from tests.reliability.helpers_fuzz import invalid_cases
from tests.reliability.helpers_mutations import INDEX_ID, base_files
from tests.unit.fakes import HashEmbedder

PER_FILE = 3
WAIT = 30.0


def _cases():
    """PER_FILE corruptions of each file that ``read_index(full=False)`` rejects at open."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / INDEX_ID
        for name, kind, data in invalid_cases(60, seed=1):
            if sum(1 for n, _, _ in out if n == name) < PER_FILE:
                _write(index, name, data)
                if _rejected_at_open(index):
                    out.append((name, kind, data))
    return out


def _write(index, name, data):
    index.mkdir(parents=True, exist_ok=True)
    for fname, content in {**base_files(), name: data}.items():
        (index / fname).unlink(missing_ok=True)
        (index / fname).write_bytes(content)


def _rejected_at_open(index) -> bool:
    try:
        read_index(index, full=False)
    except IndexFormatError:
        return True
    return False


CASES = _cases()


async def _wait(pilot, predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


@pytest.mark.parametrize("name,kind,data", CASES, ids=[f"{n}-{k}-{i}" for i, (n, k, _) in enumerate(CASES)])
def test_the_app_shows_its_error_state(tmp_path, monkeypatch, name, kind, data):
    from ragtui.config import Settings
    from ragtui.tui.history import QueryHistory

    monkeypatch.setattr(app_module.RagtuiApp, "CURSOR_BLINK", False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    art = tmp_path / "art"
    index = art / "rag" / INDEX_ID
    _write(index, name, data)
    app = app_module.create_app(Settings(artifacts=art, index=INDEX_ID), embedder_factory=lambda s: HashEmbedder(4),
                                debounce=0.0, poll_seconds=0.05, history=QueryHistory(None))

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await _wait(pilot, lambda: app.index_state == "invalid", "the invalid state")
            notice = app.main.notice
            assert app.main.showing_notice == "invalid" and "failed validation" in notice.title
            assert any(f in notice.body for f in FILES), notice.body
            # Fixed on disk (as a writer would: a new generation under the same name): the app recovers.
            for fname, content in base_files().items():
                (index / fname).unlink()
                (index / fname).write_bytes(content)
            await _wait(pilot, lambda: app.index_state == "ready", "the repaired index to open")

    asyncio.run(scenario())
    assert app.return_code in (None, 0)


def test_an_index_caught_half_rewritten_is_tried_again_when_any_file_changes(tmp_path, monkeypatch):
    """A broken generation is skipped until it changes; an index rewritten in place file by file, seen
    with only meta.json new, used to stay skipped forever (its identity was meta.json's alone)."""
    from ragtui.config import Settings
    from ragtui.tui.history import QueryHistory

    monkeypatch.setattr(app_module.RagtuiApp, "CURSOR_BLINK", False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    art = tmp_path / "art"
    index = art / "rag" / INDEX_ID
    _write(index, "bm25.idx", b"")
    app = app_module.create_app(Settings(artifacts=art, index=INDEX_ID), embedder_factory=lambda s: HashEmbedder(4),
                                debounce=0.0, poll_seconds=3600.0, history=QueryHistory(None))
    good = base_files()

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await _wait(pilot, lambda: app.index_state == "invalid", "the invalid state")
            # meta.json rewritten first, bm25.idx still the broken one: a poll sees it and fails again.
            (index / "meta.json").unlink()
            (index / "meta.json").write_bytes(good["meta.json"])
            skipped = app._bad_generation
            app.poll_index()
            await _wait(pilot, lambda: app._bad_generation not in (None, skipped), "the half-written index tried")
            assert app.index_state == "invalid"
            (index / "bm25.idx").unlink()
            (index / "bm25.idx").write_bytes(good["bm25.idx"])
            app.poll_index()
            await _wait(pilot, lambda: app.index_state == "ready", "the rewritten index to open")

    asyncio.run(scenario())
    assert app.return_code in (None, 0)


def test_files_repaired_while_a_failed_open_is_reported_are_tried_again(tmp_path, monkeypatch):
    """The broken generation is the one the worker read, not what is on disk when its failure is handled:
    taken then, it was the repaired files' identity, and they were skipped forever (a CI timeout)."""
    from ragtui.config import Settings
    from ragtui.tui import backend
    from ragtui.tui.history import QueryHistory

    monkeypatch.setattr(app_module.RagtuiApp, "CURSOR_BLINK", False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    art = tmp_path / "art"
    index = art / "rag" / INDEX_ID
    _write(index, "bm25.idx", b"")
    real_open = backend.open_index
    calls = []

    def open_then_repair(path, settings):
        calls.append(path)
        try:
            return real_open(path, settings)
        finally:
            if len(calls) == 1:  # the first open fails; the files are repaired before its failure is handled
                _write(index, "bm25.idx", base_files()["bm25.idx"])

    monkeypatch.setattr(backend, "open_index", open_then_repair)
    app = app_module.create_app(Settings(artifacts=art, index=INDEX_ID), embedder_factory=lambda s: HashEmbedder(4),
                                debounce=0.0, poll_seconds=3600.0, history=QueryHistory(None))

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await _wait(pilot, lambda: app.index_state == "invalid", "the invalid state")
            app.poll_index()
            await _wait(pilot, lambda: app.index_state == "ready", "the repaired index to open")

    asyncio.run(scenario())
    assert len(calls) == 2
