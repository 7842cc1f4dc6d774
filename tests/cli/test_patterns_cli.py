"""``ragtui ingest`` in-process: --include/--exclude as gitignore patterns, ignore files, --max-bytes."""

from __future__ import annotations

import json

import pytest

from tests.files import write
from tests.helpers.cli import run as ragtui

pytestmark = pytest.mark.timeout(300)


@pytest.fixture()
def folder(tmp_path):
    f = tmp_path / "notes"
    write(f / "a.md", "alpha note about cats\n")
    write(f / "docs" / "guide.md", "the guide\n")
    write(f / "docs" / "drafts" / "wip.md", "work in progress\n")
    write(f / "drafts" / "top.md", "a top-level folder also named drafts\n")
    write(f / "cache" / "junk.md", "generated junk\n")
    write(f / ".gitignore", "cache/\n")
    return f


def ingest(folder, art, *flags):
    result = ragtui("ingest", str(folder), "--artifacts", str(art), "--json", *flags)
    report = json.loads(result.stdout) if result.returncode == 0 else None
    return result, report


def test_exclude_a_subfolder_by_its_path(folder, tmp_path):
    # With base-name matching this excluded nothing at all.
    result, report = ingest(folder, tmp_path / "art", "--exclude", "docs/drafts")
    assert result.returncode == 0, result.stderr
    assert report["added"] == ["notes/a.md", "notes/docs/guide.md", "notes/drafts/top.md"]
    assert report["warnings"] == [] and "warning" not in result.stderr


def test_gitignore_is_honoured_unless_no_ignore(folder, tmp_path):
    _, report = ingest(folder, tmp_path / "art")
    assert "notes/cache/junk.md" not in report["added"] and len(report["added"]) == 4
    # The same index with --no-ignore: the rules changed, so the ignored file is found and added.
    result, report = ingest(folder, tmp_path / "art", "--no-ignore")
    assert result.returncode == 0 and report["added"] == ["notes/cache/junk.md"] and report["published"]


def test_a_pattern_matching_nothing_is_one_warning_line(folder, tmp_path):
    result, report = ingest(folder, tmp_path / "art", "--exclude", "./docs/drafts", "--include", "*.md")
    assert result.returncode == 0
    want = f"--exclude './docs/drafts' matches nothing in {folder}"
    assert report["warnings"] == [want]
    assert result.stderr == f"ragtui: warning: {want}\n"
    text = ragtui("ingest", str(folder), "--artifacts", str(tmp_path / "art2"), "--exclude", "nope/", "--quiet")
    assert text.returncode == 0
    assert text.stderr.splitlines() == [f"ragtui: warning: --exclude 'nope/' matches nothing in {folder}"]


@pytest.mark.parametrize("pattern", ["docs\\", "!", "#drafts", "[unclosed"])
def test_a_malformed_pattern_exits_2_with_one_line_and_writes_nothing(folder, tmp_path, pattern):
    art = tmp_path / "art"
    result = ragtui("ingest", str(folder), "--artifacts", str(art), "--exclude", pattern)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ragtui: error: --exclude ")
    assert "Traceback" not in result.stderr and not art.exists()


def test_max_bytes(folder, tmp_path):
    write(folder / "big.txt", "word " * 100)  # 500 bytes
    art = tmp_path / "art"
    result, report = ingest(folder, art, "--max-bytes", "100")
    assert result.returncode == 0
    assert {"path": str(folder / "big.txt"), "reason": "larger than the 100-byte limit"} in report["skipped"]
    assert "notes/big.txt" not in report["added"] and "notes/a.md" in report["added"]
    # A higher limit is another rule: the next ingest finds the file.
    result, report = ingest(folder, art, "--max-bytes", "1000")
    assert report["added"] == ["notes/big.txt"] and report["skipped"] == []
    bad = ragtui("ingest", str(folder), "--artifacts", str(art), "--max-bytes", "0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--max-bytes must be at least 1" in bad.stderr
