"""The README and the guide stay true: their install, run and test lines are CI's, their commands parse and run.

The run command and the quick start run as a shell runs them (the shell line is the contract), with
a home of their own; every other `ragtui ...` line of a shell block in README.md and docs/ is parsed by
ragtui's own parser, so a renamed or removed flag fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragtui.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def sh_blocks(path: Path) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def command_lines(block: str) -> list[str]:
    """The shell lines of a block, comments removed, each `&&` part on its own."""
    lines = []
    for line in block.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
            lines.extend(part.strip() for part in line.split("&&"))
    return lines


def marked(mark: str) -> str:
    """The line of README's "Install, run, test" block that ends with ``# mark``."""
    for block in sh_blocks(README):
        for line in block.splitlines():
            if re.search(rf"\s#\s{mark}$", line):
                return re.sub(r"\s+#\s.*$", "", line).strip()
    raise AssertionError(f"README.md has no line marked '# {mark}'")


def test_the_install_and_test_lines_are_what_ci_and_make_run():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    install, test = marked("install"), marked("test")
    assert install == "python3 -m pip install -e '.[test]'"
    assert "$(PYTHON) -m pip install -e '.[test]'" in make
    pip = next(line for line in ci.splitlines() if "pip install" in line and "-e '.[" in line)
    assert re.search(r"-e '\.\[test[,\]]", pip), pip  # CI installs the test extra (with more)
    assert test == "python3 -m pytest"
    assert ci.rstrip().splitlines()[-1] == "python -m pytest"  # CI's last step is the README's test command
    assert "$(PYTHON) -m pytest\n" in make


def _snapshot(root: Path) -> set[str]:
    """Every file and folder of the clone but caches (what the run command must leave as it was)."""
    seen = set()
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis",
                                                ".ruff_cache")]
        rel = os.path.relpath(base, root)
        seen.update(os.path.join(rel, name) for name in dirs + files)
    return seen


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_") or k.startswith("RAGTUI_REQUIRE_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"))
    if os.access("/artifacts", os.W_OK):  # the default root of this machine: keep the test's index out of it
        env["RAGTUI_ARTIFACTS"] = str(home / "artifacts")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _bash(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    if shutil.which("ragtui", path=env["PATH"]) is None:
        pytest.skip("the ragtui command is not installed (pip install -e .)")
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_the_run_command_works_offline_and_writes_nothing_into_the_clone(tmp_path):
    run = marked("run")
    env = _env(tmp_path)
    before = _snapshot(ROOT)
    result = _bash(run, env, ROOT)
    assert result.returncode == 0, result.stderr
    assert "demo/watching.md#0" in result.stdout.splitlines()[1]  # the best hit for "keep an index fresh"
    assert _snapshot(ROOT) == before
    # The next plain command finds the same index, as `ragtui` (the UI) would.
    info = _bash("ragtui info", env, ROOT)
    assert info.returncode == 0 and "demo" in info.stdout, info.stderr


def test_the_quick_start_runs_on_a_folder_of_ones_own(tmp_path):
    block = next(b for b in sh_blocks(README) if "ragtui ingest ~/notes" in b)
    lines = command_lines(block)
    env = _env(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "logs.md").write_text("# Logs\n\nTo rotate log files, use logrotate.\n", encoding="utf-8")
    runnable = [line for line in lines if line not in ("ragtui",) and not line.startswith("ragtui watch")]
    assert len(runnable) == 2  # ingest and search; the UI and the agent wait for a person
    for line in runnable:
        result = _bash(line, env, tmp_path)
        assert result.returncode == 0, (line, result.stderr)
    assert "notes/logs.md#0" in result.stdout
    watch = next(line for line in lines if line.startswith("ragtui watch"))
    once = _bash(watch + " --once", env, tmp_path)  # the agent's reconcile, then exit
    assert once.returncode == 0, once.stderr


def ragtui_lines() -> list[tuple[str, str]]:
    found = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for block in sh_blocks(page):
            for line in command_lines(block):
                if line.startswith("ragtui"):
                    found.append((f"{page.relative_to(ROOT)}", line))
    return found


@pytest.mark.parametrize(("page", "line"), ragtui_lines(), ids=[f"{p}: {line}" for p, line in ragtui_lines()])
def test_every_ragtui_line_of_the_readme_and_guide_parses(page, line):
    words = shlex.split(line)
    words = words[: next((i for i, w in enumerate(words) if w.startswith((">", "|", "<"))), len(words))]
    try:
        args = build_parser().parse_args(words[1:])
    except SystemExit as e:
        pytest.fail(f"{page}: `{line}` is refused by ragtui's parser (exit {e.code})")
    assert args is not None


def test_the_readme_shows_one_example_per_command():
    from ragtui.commands import COMMANDS

    shown = {shlex.split(line)[1] for _, line in ragtui_lines() if _ == "README.md" and len(shlex.split(line)) > 1}
    missing = [name for name in COMMANDS if name not in shown]
    assert missing == [], f"README.md has no example of: {', '.join(missing)}"
