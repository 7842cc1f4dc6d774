"""Terminal safety in the TUI: hostile document text and names are shown neutralised, never obeyed."""

from __future__ import annotations

import asyncio
import time

from ragtui.tui import ragtui_app as app_module
from tests.reliability.helpers import run_sync
from tests.reliability.helpers_terminal import HOSTILE, build, markers, unsafe
from tests.unit.fakes import HashEmbedder

WAIT = 30.0


async def _wait(pilot, predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


def test_hostile_text_in_results_and_detail(tmp_path, monkeypatch):
    from ragtui.config import Settings
    from ragtui.tui.history import QueryHistory

    monkeypatch.setattr(app_module.RagtuiApp, "CURSOR_BLINK", False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = build(tmp_path / "docs")
    art = tmp_path / "art"
    run_sync(folder, art)
    app = app_module.create_app(Settings(artifacts=art, index="docs"), embedder_factory=lambda s: HashEmbedder(),
                                debounce=0.0, poll_seconds=0.1, history=QueryHistory(None))
    words = markers()
    queries = [" ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2 :])]  # within the app's k

    async def scenario():
        async with app.run_test(size=(160, 50)) as pilot:
            await _wait(pilot, lambda: app.index_state == "ready", "the index to open")
            cells, screens, shown = [], [], 0
            for query in queries:
                app.use_query(query)
                await _wait(pilot, lambda q=query: app.results is not None and app.results.request.query == q
                            and app.rendered_seq == app.requested_seq, "the results")
                shown += len(app.results.hits)
                table = app.main.results
                cells += [cell.plain if hasattr(cell, "plain") else str(cell)
                          for i in range(table.row_count) for cell in table.get_row_at(i)]
                table.focus()
                for _ in range(len(app.results.hits)):  # walk every result into the detail pane
                    await pilot.pause()
                    screens.append(app.export_screenshot())
                    await pilot.press("down")
            assert shown == len(HOSTILE)
            assert cells and all(unsafe(c) == [] for c in cells), [c for c in cells if unsafe(c)]
            svg = "".join(screens)
            assert unsafe(svg.replace("\n", " ").replace("\t", " ")) == []
            assert "PWNED-TITLE" in svg and "HIDDEN-TEXT" in svg and "\u241b" in svg
            assert app.title == "ragtui"

    asyncio.run(scenario())
