"""Where `ragtui export` may write: refused with exit 2 and the reason, before any work, where a folder cannot be
replaced in one step; what killed exports left beside the target is removed by the next one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ragtui.core.errors import UsageError
from ragtui.core.export.writer import check_target, export_to
from tests.helpers.cli import run as ragtui
from tests.unit.indexgen import build

DOCS = {"docs/cats.md": ["# Cats\n\nCats are small carnivorous mammals."]}
STAMP = "2026-01-01T00:00:00Z"


@pytest.fixture
def art(tmp_path):
    build(tmp_path / "art", "docs", DOCS, dim=8)
    return tmp_path / "art"


def _listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_current_directory_and_folders_holding_it_are_refused_before_any_work(tmp_path, art):
    site = tmp_path / "site"
    r = ragtui("export", str(site), "--artifacts", str(art), "--generated-at", STAMP)
    assert r.returncode == 0, r.stderr
    before = _listing(tmp_path)
    for cwd, out, words in [(site, ".", "is the current directory"),
                            (site / "search", "..", "holds the current directory"),
                            (site / "search", str(site), "holds the current directory"),
                            (tmp_path, str(art / "rag" / "x"), "inside or holds the index's folder"),
                            (tmp_path, str(art), "inside or holds the index's folder")]:
        r = ragtui("export", out, "--artifacts", str(art), cwd=cwd)
        assert r.returncode == 2, (out, r)
        assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
        assert _listing(tmp_path) == before, "something was written"
    r = ragtui("export", ".", "--artifacts", str(art), cwd=site)
    assert "cd .. && ragtui export site" in r.stderr
    r = ragtui("export", "site", "--artifacts", str(art), "--generated-at", STAMP, "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["replaced"] is True


def test_a_mount_point_is_refused(tmp_path, art):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "none", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        r = ragtui("export", str(mnt), "--artifacts", str(art))
        assert r.returncode == 2 and "is a mount point" in r.stderr and f"e.g. {mnt}/site" in r.stderr, r.stderr
        assert os.listdir(mnt) == [] and sorted(os.listdir(tmp_path)) == ["art", "mnt"]
        r = ragtui("export", str(mnt / "site"), "--artifacts", str(art))
        assert r.returncode == 0 and (mnt / "site" / "index.html").is_file()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    # A bind mount of a folder of the same filesystem: the same st_dev as its parent, still a mount point.
    (tmp_path / "src").mkdir()
    assert subprocess.run(["mount", "--bind", str(tmp_path / "src"), str(mnt)], capture_output=True).returncode == 0
    try:
        r = ragtui("export", str(mnt), "--artifacts", str(art))
        assert r.returncode == 2 and "is a mount point" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_link_even_with_a_trailing_slash_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    for out in (tmp_path / "link", f"{tmp_path / 'link'}/"):
        with pytest.raises(UsageError, match="is not a folder"):
            check_target(out)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_what_killed_exports_left_is_removed_and_nothing_else(tmp_path):
    pub = tmp_path / "pub"
    pub.mkdir()
    dead, alive = _dead_pid(), os.getppid()
    for name in (f".site.export-{dead}", f".site.export-{alive}", f".site.export-{dead}x", f".site2.export-{dead}",
                 f".other.old-{dead}", f"site.export-{dead}"):
        (pub / name).mkdir()
        (pub / name / "f").write_bytes(b"x")
    (pub / "elsewhere").mkdir()
    (pub / f".site.old-{dead}").symlink_to("elsewhere")
    export_to(pub / "site", {"index.html": b"<p>", "search/manifest.json": b'{"format": "seekite"}'})
    assert sorted(os.listdir(pub)) == sorted([
        f".other.old-{dead}", f".site.export-{alive}", f".site.export-{dead}x", f".site.old-{dead}",
        f".site2.export-{dead}", "elsewhere", "site", f"site.export-{dead}"])
    assert (pub / "elsewhere").is_dir()


def test_a_previous_export_left_aside_by_a_killed_export_is_put_back(tmp_path):
    """Where the filesystem cannot swap two names, a kill between the two renames leaves the previous export
    aside as .site.old-<pid> and nothing at site: the next export puts it back first."""
    pub = tmp_path / "pub"
    export_to(pub / f".site.old-{_dead_pid()}", {"index.html": b"old", "search/manifest.json": b'{"format": "seekite"}'})

    def fails(sink):
        sink("index.html", [b"half"])
        raise RuntimeError("the export stopped")

    with pytest.raises(RuntimeError):
        export_to(pub / "site", fails)
    assert os.listdir(pub) == ["site"] and (pub / "site" / "index.html").read_bytes() == b"old"
