"""The TUI with a FIFO in its index (it shows the error and quits), and a pasted megabyte (cut, with a notice)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragtui.core.search.retriever import MAX_QUERY_CHARS
from tests.tui import build_demo, make_app, ready, settled, wait_for

pytestmark = pytest.mark.timeout(120)


def _free_readers(fifo: Path) -> None:
    """Open the FIFO's write end if a reader is blocked on it (a regression), so that reader returns."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # nobody waiting


async def test_a_fifo_in_the_index_shows_the_error_state_and_the_app_quits(tmp_path):
    artifacts, _ = build_demo(tmp_path)
    meta = Path(os.path.realpath(artifacts / "rag" / "demo")) / "meta.json"
    meta.unlink()
    os.mkfifo(meta)
    app = make_app(artifacts, poll_seconds=0.05)
    try:
        async with app.run_test() as pilot:
            try:
                await wait_for(pilot, lambda: app.index_state == "invalid", "the invalid state")
                assert app.main.showing_notice == "invalid"
                assert "meta.json" in app.main.notice.body and "FIFO" in app.main.notice.body
                await pilot.press(*"cats")  # typing does no harm, and no worker is stuck
                # The live reload keeps retrying the open; each attempt must end (a FIFO read would
                # block forever), so a moment with no open worker running always comes.
                await wait_for(pilot, lambda: not any(w.is_running for w in app.workers if w.group == "open"),
                               "every attempt to open the index to end")
            finally:
                _free_readers(meta)
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: not app.is_running, "the app to quit")
    finally:
        _free_readers(meta)
    assert app.return_code in (None, 0)


async def test_a_pasted_megabyte_is_cut_to_the_cap_with_a_notice_and_typing_goes_on(tmp_path, notices):
    from textual import events

    artifacts, _ = build_demo(tmp_path)
    app = make_app(artifacts)
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        box = app.main.query_box
        box.post_message(events.Paste("index " * 200_000 + "\nsecond line"))
        await wait_for(pilot, lambda: len(box.value) == MAX_QUERY_CHARS, "the paste, cut")
        assert box.value == ("index " * 200_000)[:MAX_QUERY_CHARS]
        assert notices.any("cut to 8,192 characters")
        await settled(pilot, box.value)  # the long query is searched like any other
        assert app.results is not None and app.results.hits
        await pilot.press("x")  # over the cap: refused with a notice, not a freeze
        await wait_for(pilot, lambda: notices.any("at most 8,192 characters"),
                       "the notice for a key over the cap")
        assert len(box.value) == MAX_QUERY_CHARS
        await pilot.press(*"yyyy")  # a key held down: still one notice
        await pilot.pause()
        assert notices.count("at most 8,192 characters") == 1
        await pilot.press("ctrl+a")
        for _ in range(3):
            await pilot.press("delete")
        await pilot.press(*"dog")
        await settled(pilot, "dog" + ("index " * 200_000)[3:MAX_QUERY_CHARS])
