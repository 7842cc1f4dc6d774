"""Jump to the citation, hand the source to $EDITOR and come back, copy the chunk_id."""

from __future__ import annotations

import os
import stat
import sys

from ragtui.tui.screens.search import SearchScreen
from ragtui.tui.screens.source import SourceScreen
from tests.tui import make_app, ready, search, settled, wait_for


def _later_chunk(app):
    """A hit whose chunk starts below the first screenful of its file (so jumping must scroll)."""
    for row, hit in enumerate(app.results.hits):
        if not hit.chunk_id.endswith("#0"):
            return row, hit
    raise AssertionError("expected a result that is not a document's first chunk")


async def test_jump_opens_the_source_scrolled_to_the_chunk_with_its_lines_marked(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await search(pilot, "nprobe lists probed")
        row, hit = _later_chunk(app)
        await pilot.press("escape", *["down"] * row)
        await settled(pilot)
        citation = app.main.detail.citation
        assert citation.chunk_id == hit.chunk_id and citation.start_line > 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        screen = app.screen
        view = screen.view
        # The chunk's first line sits just below the top (unless the file ends first).
        target = citation.start_line - 1 - 3
        await wait_for(pilot, lambda: view.scroll_y == min(target, view.max_scroll_y) > 0, "the scroll to the chunk")
        assert screen.citation.chunk_id == hit.chunk_id
        assert view.chunk_lines == (citation.start_line, citation.end_line)
        assert view.lexer == "markdown"  # coloured by file type
        head = str(screen.query_one("#source-head").render())
        assert hit.doc_id in head and "fresh" in head and f"lines {citation.start_line}–{citation.end_line}" in head
        await pilot.press("escape")
        assert isinstance(app.screen, SearchScreen)


async def test_jump_from_the_keyboard_key_o_and_from_the_palette(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "watch")
        await pilot.press("escape", "o")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        assert app.screen.citation.chunk_id == app.results.hits[0].chunk_id


def _fake_editor(tmp_path):
    record = tmp_path / "editor-args"
    script = tmp_path / "fake-editor"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(record)!r}, 'w').write('\\n'.join(sys.argv[1:]))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record


async def test_the_editor_opens_the_file_at_the_chunk_line_and_the_app_comes_back(demo_index, tmp_path, monkeypatch):
    script, record = _fake_editor(tmp_path)
    monkeypatch.setenv("EDITOR", str(script))
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "nprobe lists probed")
        row, hit = _later_chunk(app)
        await pilot.press("escape", *["down"] * row)
        await settled(pilot)
        citation = app.main.detail.citation
        await pilot.press("e")
        await wait_for(pilot, lambda: app.editor_runs, "the editor to run")
        await wait_for(pilot, record.exists, "the editor's record")
        assert record.read_text().splitlines() == [f"+{citation.start_line}", str(citation.path)]
        assert app.editor_runs == [[str(script), f"+{citation.start_line}", str(citation.path)]]
        # Back in the app, in the same place, and the freshness is checked again.
        await settled(pilot)
        assert isinstance(app.screen, SearchScreen) and app.is_running
        assert app.main.results.selected_hit == hit
        await wait_for(pilot, lambda: app.main.detail.citation is not None, "the citation again")
        # From the source view too.
        record.unlink()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        await pilot.press("e")
        await wait_for(pilot, record.exists, "the editor's record from the source view")
        assert record.read_text().splitlines()[0] == f"+{citation.start_line}"


async def test_a_missing_editor_is_reported_not_fatal(demo_index, monkeypatch, tmp_path, notices):
    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    app = make_app(demo_index[0])
    async with app.run_test(message_hook=notices) as pilot:
        await ready(pilot)
        await search(pilot, "watch")
        await pilot.press("escape", "e")
        await wait_for(pilot, lambda: app.editor_runs, "the attempt")
        await wait_for(pilot, lambda: notices.any("cannot run"), "the notice")
        assert app.is_running


async def test_copy_puts_the_chunk_id_on_the_clipboard(demo_index):
    app = make_app(demo_index[0])
    async with app.run_test() as pilot:
        await ready(pilot)
        await search(pilot, "index")
        await pilot.press("escape", "down", "c")
        assert app.clipboard == app.results.hits[1].chunk_id
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        await pilot.press("y")
        assert app.clipboard == app.results.hits[1].chunk_id


def test_editor_command_forms():
    from pathlib import Path

    from ragtui.tui.backend import editor_command

    p = Path("/d/a.md")
    assert editor_command(p, 7, {"EDITOR": "vim"}) == ["vim", "+7", "/d/a.md"]
    assert editor_command(p, 7, {"VISUAL": "code --wait", "EDITOR": "vim"}) == ["code", "--wait", "--goto", "/d/a.md:7"]
    assert editor_command(p, None, {"EDITOR": "vi"}) == ["vi", "/d/a.md"]
    assert os.path.basename(editor_command(p, 3, {"EDITOR": "/usr/bin/nano"})[0]) == "nano"
