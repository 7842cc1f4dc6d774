"""Escapes in index metadata and names, markup in names, broken entries under rag/.

Each generator of cases is the one bench/reliability.py runs at full size; here at CI size.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_escapes import (
    broken_cases,
    check_screen,
    escape_cli_cases,
    escape_tui_cases,
    markup_cases,
)


@pytest.fixture(autouse=True)
def _quiet_tui(monkeypatch, tmp_path):
    from ragtui.tui.ragtui_app import RagtuiApp

    monkeypatch.setattr(RagtuiApp, "CURSOR_BLINK", False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("EDITOR", "VISUAL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("case", params(escape_cli_cases(CI)))
def test_cli_surface(case, tmp_path):
    case(tmp_path)


def test_the_surfaces_are_the_ones_checked(tmp_path):
    from types import SimpleNamespace

    from tests.reliability.helpers_escapes import CLI_SURFACES, cli_surfaces

    h = SimpleNamespace(art="art", index_id="idx", base=tmp_path, folder="docs", payload="p", marker="m", chunk_id="c")
    assert tuple(label for label, _ in cli_surfaces(h, "osc52")) == CLI_SURFACES


@pytest.mark.parametrize("case", params(escape_tui_cases(CI)))
def test_tui_views(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(markup_cases(CI)))
def test_markup_in_names(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(broken_cases(CI)))
def test_broken_entries_under_rag(case, tmp_path):
    case(tmp_path)


def test_a_raw_string_in_any_widget_never_reaches_the_terminal(tmp_path):
    """The backstop alone: text put into widgets without neutralising it is still made safe."""
    from rich.text import Text
    from textual.screen import Screen
    from textual.widgets import DataTable, Static

    from tests.reliability.helpers_escapes import PAYLOADS
    from tests.tui import make_app, wait_for

    raw = "".join(PAYLOADS.values())

    class RawScreen(Screen):
        def compose(self):
            yield Static(Text(f"TEXT-START {raw} TEXT-END"))  # bypasses every neutraliser
            yield Static(f"PLAIN-START {raw} PLAIN-END", markup=False)
            yield DataTable(id="raw-table")

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_column("name")
            table.add_row(Text(f"CELL-START {raw} CELL-END"))

    app = make_app(tmp_path / "no-artifacts")

    async def scenario():
        async with app.run_test(size=(200, 30)) as pilot:
            await wait_for(pilot, lambda: app.index_state == "missing", "the missing notice")
            await app.push_screen(RawScreen())
            await pilot.pause()
            check_screen(app, "TEXT-START", "TEXT-END", "PLAIN-START", "PLAIN-END", "CELL-START")
            app.copy_to_clipboard("line one\nline two\x1b]0;T\x07")  # as a mouse selection is copied
            assert app.clipboard == "line one\nline two\u241b]0;T\u2407"  # lines kept, controls shown

    asyncio.run(scenario())


def test_markup_in_queries_shows_literally_in_the_command_palette(tmp_path):
    """History entries are offered in the palette; a str prompt there is parsed as markup."""
    from textual.command import CommandPalette

    from ragtui.tui.history import QueryHistory
    from tests.reliability.helpers_escapes import screen_text
    from tests.tui import make_app, wait_for

    history = QueryHistory(None)
    for query in ("y[link=http:] docs", "x[/] tail", "[b]bold[/b] words"):
        history.add(query)
    app = make_app(tmp_path / "no-artifacts", history=history)

    async def scenario():
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.index_state == "missing", "the missing notice")
            app.action_command_palette()
            await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette) and "Compare modes" in screen_text(app),
                           "the palette's list")  # every offered command is built: history entries included
            assert app.is_running
            await pilot.press(*"link")
            await wait_for(pilot, lambda: "search: y[link=http:] docs" in screen_text(app), "the matching entry")
            await pilot.press(*["backspace"] * 4, *"bold")
            await wait_for(pilot, lambda: "search: [b]bold[/b] words" in screen_text(app), "the other entry")
            assert app.is_running

    asyncio.run(scenario())
