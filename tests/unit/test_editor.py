"""One $EDITOR launcher for `inspect --open` and the TUI's `e`: each editor family's command, the order of the
variables, and a value that is not a command refused with the variable to fix (never an escaping error)."""

from __future__ import annotations

import io
import stat
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

from ragtui import cli
from ragtui.core.errors import UsageError
from ragtui.editor import FAMILIES, editor_command, editor_family

FILE = "/d/a.md"


@pytest.mark.parametrize(("editor", "want"), [
    ("vim", ["vim", "+7", FILE]),
    ("/usr/bin/nvim", ["/usr/bin/nvim", "+7", FILE]),
    ("nano", ["nano", "+7", FILE]),
    ("emacsclient -t", ["emacsclient", "-t", "+7", FILE]),
    ("kak", ["kak", "+7", FILE]),
    ("hx", ["hx", f"{FILE}:7"]),
    ("helix", ["helix", f"{FILE}:7"]),
    ("subl -w", ["subl", "-w", f"{FILE}:7"]),
    ("zed", ["zed", f"{FILE}:7"]),
    ("code --wait", ["code", "--wait", "--goto", f"{FILE}:7"]),
    ("codium", ["codium", "--goto", f"{FILE}:7"]),
    ("pycharm", ["pycharm", "--line", "7", FILE]),
    ("mate -w", ["mate", "-w", "-l", "7", FILE]),
    ("C:/Tools/code.exe", ["C:/Tools/code.exe", "--goto", f"{FILE}:7"]),
    ("my-own-editor", ["my-own-editor", "+7", FILE]),  # not listed: the +LINE convention most editors read
])
def test_each_family_gets_its_line_syntax(editor, want):
    assert editor_command(FILE, 7, {"EDITOR": editor}) == want
    assert editor_command(FILE, None, {"EDITOR": editor}) == [*want[: len(editor.split())], FILE]


def test_visual_then_editor_and_no_guess():
    assert editor_command(FILE, 3, {"VISUAL": "zed", "EDITOR": "vim"}) == ["zed", f"{FILE}:3"]
    assert editor_command(FILE, 3, {"VISUAL": "", "EDITOR": "vim"}) == ["vim", "+3", FILE]
    with pytest.raises(UsageError, match=r"no editor set: set \$VISUAL or \$EDITOR"):
        editor_command(FILE, 3, {})


@pytest.mark.parametrize(("env", "needle"), [({"EDITOR": "vim 'unclosed"}, "cannot read $EDITOR"),
                                             ({"VISUAL": '"'}, "cannot read $VISUAL"),
                                             ({"EDITOR": "   "}, "$EDITOR holds no command")])
def test_a_value_that_is_not_a_command_is_a_usage_error(env, needle):
    with pytest.raises(UsageError, match=needle.replace("$", r"\$")):
        editor_command(FILE, 1, env)


def test_every_listed_editor_is_in_one_family():
    seen: dict[str, str] = {}
    for family, names in FAMILIES.items():
        for name in names:
            assert name not in seen, (name, seen.get(name), family)
            seen[name] = family
            assert editor_family(f"/opt/bin/{name}") == family


def test_inspect_open_and_the_tui_run_the_same_command(tmp_path, monkeypatch):
    """`inspect --open` runs exactly the argv the TUI's `e` builds (tests/tui/test_citations.py runs that one)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha\n\nbeta line here\n", encoding="utf-8")
    art = tmp_path / "art"
    record = tmp_path / "argv"
    script = tmp_path / "zed"  # a colon-style editor, by its name
    script.write_text(f"#!{sys.executable}\nimport sys\nopen({str(record)!r}, 'w').write('\\n'.join(sys.argv[1:]))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert cli.main(["ingest", str(docs), "--artifacts", str(art)]) == 0
        monkeypatch.setenv("EDITOR", str(script))
        assert cli.main(["inspect", "docs/a.md#0", "--open", "--artifacts", str(art)]) == 0, err.getvalue()
    from ragtui.tui.backend import editor_command as tui_command

    path = (docs / "a.md").resolve()
    assert record.read_text().splitlines() == [f"{path}:1"] == tui_command(path, 1)[1:]
    monkeypatch.setenv("EDITOR", "vim 'unclosed")
    with redirect_stdout(out), redirect_stderr(err):
        assert cli.main(["inspect", "docs/a.md#0", "--open", "--artifacts", str(art)]) == 2
    assert "cannot read $EDITOR" in err.getvalue()
