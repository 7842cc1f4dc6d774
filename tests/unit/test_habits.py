"""Habits that keep the repository readable: a README within its budget, no development history in prose."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

README_BUDGET = 300
"""Lines: what a newcomer reads in five minutes. The guide (docs/) holds the rest."""

HISTORY = re.compile(
    r"\bissues? #?\d+"  # the word issue, then a number (with or without #)
    r"|\(#\d+\)"  # a number after # in brackets
    r"|\bcommits? [0-9a-f]{7,40}\b"  # the word commit, then a hash
    r"|\b(?:PR|pull request) #?\d+",
    re.IGNORECASE,
)
"""Development history in prose: it belongs in commit messages (and CHANGELOG.md in user terms), never in files."""

BINARY_SUFFIXES = {".png", ".jpg", ".gif", ".pdf", ".gguf", ".onnx", ".whl", ".gz", ".zip", ".bin", ".f32", ".idx"}


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60, check=True).stdout
        names = [n for n in out.decode("utf-8", "surrogateescape").split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / n for n in names if Path(n).suffix.lower() not in BINARY_SUFFIXES and (ROOT / n).is_file()]


def history_mentions(text: str) -> list[str]:
    return [m.group(0) for m in HISTORY.finditer(text)]


def test_the_readme_fits_its_budget():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_BUDGET, (
        f"README.md has {lines} lines, over its budget of {README_BUDGET}: move detail to a page of docs/ "
        "(figures to docs/performance.md, how it works to spec/, history to CHANGELOG.md)"
    )


def test_no_tracked_file_mentions_an_issue_or_a_commit():
    found = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for mention in history_mentions(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {mention!r}")
    assert found == [], "development history in prose (say what is, not which ticket or commit made it so):\n" + \
        "\n".join(found[:50])


# Written in pieces, so that this file holds none of what it looks for.
ISSUE, COMMIT, HASH = "issue", "commit", "8ca9" + "ea4"


@pytest.mark.parametrize("text", [
    f"Over 500 lines on purpose ({ISSUE} #16): ...", f"before {ISSUE} 12 the default", "the ticket\n(" + "#4) left",
    f"as it was before ({COMMIT} {HASH})", "see P" + "R #31", f"{ISSUE.upper()} #2",
])
def test_the_check_sees_history(text):
    assert history_mentions(text)


@pytest.mark.parametrize("text", [
    "notes#17 is a chunk", "[path:L12-L18]", "docs/guide.md#L12", "an issue with the server", "commit the batch",
    "git commit message", "(#choosing-a-tier)", "a fix for issues like this", "#12 in the list",
])
def test_the_check_leaves_ordinary_text_alone(text):
    assert history_mentions(text) == []


def test_the_check_runs_on_this_checkout():
    files = tracked_files()
    assert ROOT / "README.md" in files and ROOT / "ragtui" / "cli.py" in files
    assert all(os.path.isfile(p) for p in files)
