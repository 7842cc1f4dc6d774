"""Hostile documents: skipped with a reason or indexed correctly; never a crash or a hang; nothing read outside."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.walk import WalkRules
from tests.helpers.cli import one_error_line, run
from tests.reliability.cases import CI, groups, params
from tests.reliability.helpers import leftovers, run_sync, write
from tests.reliability.helpers_child import ForkServer
from tests.reliability.helpers_hostile import (
    SECRET,
    OpenRecorder,
    build_hostile,
    hostile_cases,
    hostile_run,
    same_name_cases,
)

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("case", params(hostile_cases(CI)))
def test_hostile_document(case, tmp_path):
    """Each file of the hostile folder skipped with its reason or indexed correctly, from one sync."""
    case(tmp_path)


def test_the_10_mb_line_is_indexed_whole_and_a_second_sync_reads_nothing():
    folder, art, _report, expect, _problems, _rec = hostile_run()
    # The 10 MB line is indexed whole: its chunks start at its start and end at its end.
    line = (folder / "oneline.txt").read_text()
    chunks = [r.text for r in read_index(art / "rag" / "docs").records if r.doc_id == "docs/oneline.txt"]
    assert len(chunks) > 100 and line.startswith(chunks[0]) and line.rstrip("\n").endswith(chunks[-1].rstrip("\n"))
    assert all(c in line for c in chunks[:50])
    # A second sync writes nothing and reads nothing: files skipped for their content are remembered
    # with their stamp beside the writer's state, and reported again with the same reason.
    with OpenRecorder() as rec:
        again = run_sync(folder, art)
    content_skips = {rel for rel, o in expect.items() if o in ("binary", "not UTF-8")}
    assert not again.published and {os.path.relpath(p, folder) for p in rec.opened} == set()
    assert content_skips <= {os.path.relpath(p, folder) for p, _ in again.skipped}
    assert leftovers(art) == []


def test_size_limit_is_checked_before_reading(tmp_path):
    folder = tmp_path / "docs"
    write(folder / "at-limit.md", "a" * 999 + "\n")
    write(folder / "over-limit.md", "b" * 1000 + "\n")
    with open(folder / "sparse.md", "wb") as f:
        f.truncate(1 << 40)  # a terabyte, sparse
    with OpenRecorder() as rec:
        report = run_sync(folder, tmp_path / "art", rules=WalkRules(max_bytes=1000))
    reasons = {Path(p).name: r for p, r in report.skipped}
    assert reasons == {"over-limit.md": "larger than the 1,000-byte limit",
                       "sparse.md": "larger than the 1,000-byte limit"}
    assert [Path(p).name for p in rec.opened] == ["at-limit.md"]


@pytest.mark.parametrize("case", params(groups(same_name_cases(CI), lambda c: c.id[:2] if c.id[0] == "d" else c.id)))
def test_thousands_of_files_with_the_same_name(case, tmp_path):
    """2,000 folders each holding notes.md, in blocks of a thousand (``d0``, ``d1``), and a second sync."""
    case(tmp_path)


def test_a_link_swapped_to_outside_after_the_walk_is_not_read(tmp_path):
    """The link is checked when walked, then re-pointed outside before it is read: still not read."""
    folder, outside = tmp_path / "docs", tmp_path / "outside"
    write(folder / "real.md", "inside text\n")
    write(outside / "secret.md", SECRET + "\n")
    (folder / "swap.md").symlink_to("real.md")
    def swap(path):
        if Path(path).name == "swap.md":
            os.unlink(path)
            os.symlink(outside / "secret.md", path)

    art = tmp_path / "art"
    with OpenRecorder(before=swap) as rec:
        report = run_sync(folder, art)
    texts = [r.text for r in read_index(art / "rag" / "docs").records]
    assert not any(SECRET in t for t in texts)
    assert all(not p.startswith(str(outside)) for p in rec.opened)
    assert any(Path(p).name == "swap.md" and "outside the folder" in r for p, r in report.skipped), report.skipped


NOBODY = 65534


def test_permission_denied_files_and_folders():
    if os.geteuid() != 0:
        pytest.skip("needs root to run the writer as an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="ragtui-reliability-"))
    try:
        base.chmod(0o755)
        folder, art = base / "docs", base / "art"
        write(folder / "readable.md", "Anyone may read this.\n")
        write(folder / "denied.md", "Nobody may read this.\n").chmod(0o000)
        write(folder / "locked" / "inside.md", "Behind a folder nobody may list.\n")
        (folder / "locked").chmod(0o000)
        art.mkdir()
        os.chown(art, NOBODY, NOBODY)
        with ForkServer() as server:
            out = base / "out.json"
            answer = server.run({"action": "sync", "folder": str(folder), "artifacts": str(art), "user": NOBODY,
                                 "stdout": str(out), "stderr": str(base / "err")})
        assert answer["exit"] == 0, (base / "err").read_text()
        report = json.loads(out.read_text())
        reasons = {os.path.relpath(s["path"], folder): s["reason"] for s in report["skipped"]}
        assert reasons == {"denied.md": "unreadable: Permission denied (kept as it was until it can be read)",
                           "locked": "cannot list folder: Permission denied"}
        assert report["added"] == ["docs/readable.md"]
    finally:
        (base / "docs" / "locked").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_cli_reports_each_skip_on_one_safe_line(tmp_path):
    folder, expect = build_hostile(tmp_path, ten_mb_line=False)
    r = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"))
    assert r.returncode == 0, r.stderr
    skip_lines = [line for line in r.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skip_lines) == sum(1 for o in expect.values() if o != "indexed")
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and "\r" not in r.stderr
    r = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--json")
    report = json.loads(r.stdout)
    assert r.returncode == 0 and not report["published"]
    r = run("search", "odd name", "--artifacts", str(tmp_path / "art"), "-k", "100")
    assert r.returncode == 0 and "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert one_error_line("ragtui: error: x\n")
