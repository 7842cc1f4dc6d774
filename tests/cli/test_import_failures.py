"""Our own modules are never optional: a copy of the package with one module missing or broken
fails loudly (exit 3, one line; the traceback with --debug) instead of losing a command or the UI.

A command's module is imported when that command runs (so `ragtui --help` imports none): its
failure is reported by the command itself and by its --help, while `ragtui --help` still lists it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ragtui"


def _broken_copy(tmp_path: Path, module: str, content: str | None) -> Path:
    """A copy of ragtui/ in which ``module`` (a path inside the package) is deleted or replaced."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "ragtui", ignore=shutil.ignore_patterns("__pycache__"))
    target = root / "ragtui" / module
    if content is None:
        target.unlink()
    else:
        target.write_text(content, encoding="utf-8")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "ragtui", *args], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)


@pytest.mark.parametrize(
    ("module", "content", "needle", "command"),
    [
        ("commands/eval.py", None, "No module named 'ragtui.commands.eval'", ["eval", "x"]),
        ("commands/inspect.py", "import a_dependency_that_is_not_installed\n",
         "No module named 'a_dependency_that_is_not_installed'", ["inspect", "a#0"]),
        ("commands/watch.py", "from ragtui.core.search.retriever import no_such_name\n", "cannot import name 'no_such_name'",
         ["watch", "."]),
    ],
    ids=["missing", "third-party-import-inside", "broken-first-party-import"],
)
def test_a_command_module_that_fails_to_import_is_an_internal_error(tmp_path, module, content, needle, command):
    root = _broken_copy(tmp_path, module, content)
    for args in ([*command, "--artifacts", str(tmp_path / "art")], [command[0], "--help"]):
        result = _run(root, *args)
        assert result.returncode == 3, (args, result.returncode, result.stdout[-300:], result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ragtui: internal error: ") and needle in lines[0], lines
        assert result.stdout == ""  # no help text that silently lacks the command
    debug = _run(root, command[0], "--help", "--debug")
    assert debug.returncode == 3 and "Traceback" in debug.stderr and needle in debug.stderr
    # The command is still listed (never quietly lost), and the other commands are not affected.
    listing = _run(root, "--help")
    assert listing.returncode == 0 and f"    {command[0]} " in listing.stdout, listing.stderr
    other = _run(root, "info", "--artifacts", str(tmp_path / "art"))
    assert other.returncode == 2 and "internal error" not in other.stderr, other.stderr


def test_a_missing_tui_is_an_internal_error_not_help(tmp_path):
    root = _broken_copy(tmp_path, "tui/launch.py", None)
    result = _run(root, "--artifacts", str(tmp_path / "art"))
    assert result.returncode == 3, (result.stdout[-300:], result.stderr)
    assert result.stderr.strip() == (
        "ragtui: internal error: ModuleNotFoundError: No module named 'ragtui.tui.launch' (run with --debug for details)"
    )
    assert "usage:" not in result.stdout


def test_the_intact_copy_lists_every_command(tmp_path):
    """The control: the same copy, unbroken, lists every subcommand (so the failures above are the breakage)."""
    from ragtui.commands import COMMANDS

    root = _broken_copy(tmp_path, "commands/__init__.py", (PACKAGE / "commands" / "__init__.py").read_text())
    result = _run(root, "--help")
    assert result.returncode == 0, result.stderr
    for name in (*COMMANDS, "search", "ingest", "info"):
        assert f"    {name} " in result.stdout, name
