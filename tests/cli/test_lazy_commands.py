"""`ragtui --version` and `ragtui --help` import no command module; each command imports its own only."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragtui.cli import build_parser
from ragtui.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import contextlib, io, json, sys
from ragtui import cli
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        code = cli.main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
mods = sorted(m for m in sys.modules if m.startswith("ragtui.commands."))
heavy = sorted(m for m in ("numpy", "ragtui.app", "textual", "rich", "httpx") if m in sys.modules)
print(json.dumps({"code": code, "commands": mods, "heavy": heavy, "out": out.getvalue(),
                  "metadata": "importlib.metadata" in sys.modules}))
"""


def _probe(*args: str) -> dict:
    # A fresh interpreter: the question is what one command imports, and this process has imported everything.
    result = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_command_module(flag):
    seen = _probe(flag)
    assert seen["code"] == 0
    assert seen["commands"] == ["ragtui.commands.options"]  # the shared flag helpers, not a command
    assert seen["heavy"] == []
    if flag == "--help":
        for name, line in COMMANDS.items():
            assert f"    {name} " in seen["out"] and line.split()[0] in seen["out"], name


def test_a_command_imports_its_own_module_only():
    seen = _probe("info", "--help")
    assert seen["code"] == 0 and "which artifacts root" in seen["out"]
    assert seen["commands"] == ["ragtui.commands.info", "ragtui.commands.options"]


def test_the_listed_help_is_each_modules_own():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(COMMANDS)
    assert sub.helps == COMMANDS  # what `ragtui --help` lists is what each module says of itself


def test_the_version_is_read_only_when_asked_for():
    """``--version`` prints the installed package's version; any other command never reads the metadata."""
    from ragtui import __version__

    seen = _probe("--version")
    assert seen["code"] == 0 and seen["out"] == f"ragtui {__version__}\n"
    for argv in (["--help"], ["info", "--help"], ["search", "--help"]):
        seen = _probe(*argv)
        assert seen["code"] == 0 and seen["metadata"] is False, argv
