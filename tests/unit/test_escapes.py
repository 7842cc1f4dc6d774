"""The neutraliser's character set and its choke points: CLI streams, rich consoles, the TUI's line filter, rag/ listing."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text

from ragtui.core.textsafe import inline, json_text, neutralize, strip_unsafe

SCOTLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji, three people joined by ZWJ
HOSTILE = (
    "a\x1b]52;c;cm0gLXJmIH4=\x07b\x9b2J\u200e\u200f\u061c\u202e\u2067\u206a"
    "\U000e0041\U000e0042\U000e0043\x7f\x01"
)
UNSAFE = set(
    "\x1b\x07\x9b\u200e\u200f\u061c\u202e\u2067\u206a\U000e0041\U000e0042\U000e0043\x7f\x01"
)


def test_bidi_marks_tags_and_controls_become_visible():
    shown = neutralize(HOSTILE)
    assert not UNSAFE & set(shown)
    assert shown == (
        "a\u241b]52;c;cm0gLXJmIH4=\u2407b\\u009b2J\\u200e\\u200f\\u061c\\u202e\\u2067\\u206a"
        "\\U000e0041\\U000e0042\\U000e0043\u2421\u2401"
    )


def test_ordinary_text_is_kept():
    text = f"naïve 東京 {FAMILY} \u200c\u200d \u200b\u2060\ufeff می‌خواهم {SCOTLAND} a\tb\nc"
    assert neutralize(text) == text


def test_only_a_well_formed_subdivision_flag_keeps_its_tags():
    stray = "\U000e0067\U000e0062\U000e007f"  # tags without the black flag
    long = "\U0001f3f4" + "\U000e0061" * 7 + "\U000e007f"  # longer than any region code
    upper = "\U0001f3f4\U000e0041\U000e007f"  # tag capital letters: not a flag
    for text in (stray, long, upper):
        assert not any(0xE0000 <= ord(c) <= 0xE007F for c in neutralize(text)), text


def test_inline_shows_newline_and_tab():
    assert inline("a\nb\tc\x1b") == "a\u240ab\u2409c\u241b"
    assert inline("plain [b]name[/b].md") == "plain [b]name[/b].md"


def test_strip_unsafe_keeps_cell_widths():
    text = f"x{HOSTILE}y {FAMILY}"
    stripped = strip_unsafe(text)
    assert not UNSAFE & set(stripped)
    assert cell_len(stripped) == cell_len(text)  # everything removed occupied no cell


def test_json_text_round_trips_and_passes_the_neutraliser_unchanged():
    obj = {"name": HOSTILE, "flag": SCOTLAND, "family": FAMILY, "ls": "a\u2028b"}
    text = json_text(obj)
    assert json.loads(text) == obj
    assert not UNSAFE & set(text) and "\u2028" not in text
    assert neutralize(text) == text
    assert "\\udb40\\udc41" in text  # U+E0041 as a surrogate pair: JSON has no \U escape


# -- the CLI's streams and consoles ----------------------------------------------------------


def test_safe_stdio_neutralises_every_write_and_restores_the_streams(capsys):
    from ragtui.terminal import SafeStream, safe_stdio

    before = sys.stdout, sys.stderr
    with safe_stdio():
        assert isinstance(sys.stdout, SafeStream)
        print(f"name: {HOSTILE}")
        print(HOSTILE, file=sys.stderr)
        sys.stdout.write(json_text({"k": HOSTILE}) + "\n")
    assert (sys.stdout, sys.stderr) == before
    out, err = capsys.readouterr()
    assert not UNSAFE & set(out + err)
    assert out.startswith("name: a\u241b]52;")
    assert json.loads(out.splitlines()[1]) == {"k": HOSTILE}  # JSON output is left as it was


def test_console_styles_but_neutralises_text_and_ignores_markup():
    from ragtui.terminal import SafeStream, console

    raw = io.StringIO()
    con = console(file=SafeStream(raw), force_terminal=True, color_system="standard", width=200)
    assert con.file is raw  # beneath the filter: its own escape sequences must reach the terminal
    con.print(Text(f"styled {HOSTILE}", style="bold red"))
    con.print(f"[b]draft[/b] {HOSTILE}")
    out = raw.getvalue()
    assert "\x1b[1;31m" in out  # rich's own SGR passes
    assert "]52;" in out and "\x1b]52" not in out and not (UNSAFE - {"\x1b"}) & set(out)
    assert "[b]draft[/b]" in out  # markup is not parsed


def test_console_override_is_in_effect():
    """SafeConsole relies on rich's private ``Console._render_buffer``; a rich release that renames it fails here."""
    from rich.console import Console

    from ragtui.terminal import _console_class

    assert "_render_buffer" in vars(Console)
    raw = io.StringIO()
    _console_class()(file=raw, force_terminal=False, markup=False).print(Text("x\x1b[2Jy"))
    assert raw.getvalue() == "x\u241b[2Jy\n"


# -- the TUI's line filter --------------------------------------------------------------------


def test_safe_text_filter_removes_unsafe_characters_and_keeps_the_width():
    from rich.control import Control
    from rich.style import Style

    from ragtui.tui.safe import SAFE_TEXT

    control = Control.move_to(1, 1).segment
    segments = [Segment("ok ", Style(bold=True)), Segment(HOSTILE), control, Segment("\x1b"), Segment(FAMILY)]
    out = SAFE_TEXT.apply(segments, None)
    assert control in out  # Textual's own control segments pass
    text = "".join(s.text for s in out if not s.control)
    assert not UNSAFE & set(text) and FAMILY in text
    assert sum(cell_len(s.text) for s in out if not s.control) == sum(cell_len(s.text) for s in segments if not s.control)
    assert all(s.text for s in out)  # no empty segment left behind
    clean = [Segment("plain")]
    assert SAFE_TEXT.apply(clean, None) is clean


# -- rag/ listing ------------------------------------------------------------------------------


@pytest.fixture
def rag(tmp_path):
    root = tmp_path / "art" / "rag"
    (root / ".gen" / "good" / "g1").mkdir(parents=True)
    os.symlink(".gen/good/g1", root / "good")
    (root / "plaindir").mkdir()
    (root / "stray.txt").write_text("not an index\n")
    (root / ".cache").mkdir()
    return root


@pytest.mark.parametrize("kind, problem", [
    ("loop", "a loop of symbolic links"),
    ("dangling", "a link to nothing (its generation is gone)"),
    ("to-file", "a link to something that is not a directory"),
])
def test_scan_indexes_names_broken_entries_and_keeps_the_others(rag, kind, problem):
    from ragtui.app import list_indexes, scan_indexes
    from ragtui.config import Settings

    target = {"loop": "bad", "dangling": ".gen/bad/gone", "to-file": "stray.txt"}[kind]
    os.symlink(target, rag / "bad")
    settings = Settings(artifacts=rag.parent)
    assert scan_indexes(settings) == (["good", "plaindir"], [("bad", problem)])
    assert list_indexes(settings) == ["good", "plaindir"]


def test_scan_indexes_of_a_missing_root_is_empty(tmp_path):
    from ragtui.app import scan_indexes
    from ragtui.config import Settings

    assert scan_indexes(Settings(artifacts=Path(tmp_path / "nothing"))) == ([], [])
