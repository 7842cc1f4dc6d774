"""How real tools save a file: each pattern ends with exactly one current document and one publish.

The quiet period is 1 s here so that a save's few system calls can only be
split across two batches by a one-second stall of this process; the
assertions never depend on how fast the machine is otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from tests.watch import gen_snapshot, harness_for, indexed, write

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)

QUIET = 1.0


@pytest.fixture()
def watched(harness):
    write(harness.folder / "a.md", "alpha original text about cats\n")
    write(harness.folder / "b.md", "beta stays the same\n")
    agent, rec = harness.agent(quiet_seconds=QUIET)
    assert set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md"}
    return harness, agent, rec


def expect_one_publish(rec, harness, text: str, *, changed=("docs/a.md",)):
    """Wait until a.md holds ``text``; then exactly one publish did it, naming only a.md."""
    n = len(rec.publishes)
    # A chunk's text ends without the document's final newline.
    rec.wait_for(lambda: indexed(harness.artifacts).get("docs/a.md") == text.strip(), f"a.md to read {text!r}")
    assert set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md"}
    new = rec.publishes[n:]
    assert len(new) == 1, [r.summary() for r in new]
    assert new[0].changed == list(changed) and new[0].added == [] and new[0].removed == []


def test_write_in_place(watched):
    harness, agent, rec = watched
    with open(harness.folder / "a.md", "r+", encoding="utf-8") as f:
        f.seek(0)
        f.truncate()
        f.write("alpha ")
        f.flush()
        f.write("edited in place\n")
    expect_one_publish(rec, harness, "alpha edited in place\n")


@pytest.mark.parametrize("temp_name", [".a.md.XXXXXX", "a.md.tmp", "tmpq8x1_2k"])
def test_temp_file_renamed_over_the_target(watched, temp_name):
    harness, agent, rec = watched
    if "XXXXXX" in temp_name:
        fd, tmp = tempfile.mkstemp(prefix=".a.md.", dir=harness.folder)
        os.close(fd)
    else:
        tmp = harness.folder / temp_name
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("alpha replaced atomically\n")
    os.replace(tmp, harness.folder / "a.md")  # only "moved" reaches the target's name
    expect_one_publish(rec, harness, "alpha replaced atomically\n")
    assert all("tmp" not in d and "XX" not in d for r in rec.syncs for d in r.added + r.changed)


def test_vim_backup_and_recreate(watched):
    harness, agent, rec = watched
    d = harness.folder
    write(d / ".a.md.swp", "b0VIM swap")  # while editing
    # :w with 'writebackup' and 'backupcopy=no': probe, backup by rename, new file, drop the backup
    probe = d / "4913"
    probe.write_text("")
    probe.unlink()
    os.rename(d / "a.md", d / "a.md~")
    with open(d / "a.md", "w", encoding="utf-8") as f:
        f.write("alpha saved by vim\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(d / "a.md", 0o644)
    os.unlink(d / "a.md~")
    write(d / ".a.md.swp", "b0VIM swap, updated")
    (d / ".a.md.swp").unlink()  # :q
    expect_one_publish(rec, harness, "alpha saved by vim\n")


@pytest.mark.skipif(shutil.which("sed") is None, reason="needs sed")
def test_sed_in_place(watched):
    harness, agent, rec = watched
    subprocess.run(["sed", "-i", "s/original/edited by sed/", str(harness.folder / "a.md")], check=True)
    expect_one_publish(rec, harness, "alpha edited by sed text about cats\n")


def test_swap_and_temp_files_are_never_indexed(watched):
    harness, agent, rec = watched
    d = harness.folder
    names = [".a.md.swp", "a.md~", "4913", ".goutputstream-QW12ER", "draft.tmp", "#a.md#", ".#a.md"]
    for name in names:
        write(d / name, "swap content that must never be indexed\n")
        with open(d / name, "a", encoding="utf-8") as f:
            f.write("more\n")
    n = len(rec.publishes)
    write(d / "marker.md", "marker\n")  # events arrive in order: once this is in, the swap files were seen
    rec.wait_for(lambda: "docs/marker.md" in indexed(harness.artifacts), "the marker document")
    assert set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md", "docs/marker.md"}
    assert len(rec.publishes) == n + 1
    batched = [p for paths in rec.batches() for p in paths]
    assert not any(os.path.basename(p) in names for p in batched), batched


def test_unchanged_save_and_touch_write_nothing(watched):
    harness, agent, rec = watched
    before = gen_snapshot(harness.artifacts)
    publishes = len(rec.publishes)
    a = harness.folder / "a.md"
    same = a.read_bytes()
    syncs = len(rec.syncs)
    with open(a, "wb") as f:  # saved with the same bytes
        f.write(same)
    rec.wait_for(lambda: len(rec.syncs) > syncs, "the sync of an unchanged save")
    syncs = len(rec.syncs)
    os.utime(harness.folder / "b.md")  # touch
    rec.wait_for(lambda: len(rec.syncs) > syncs, "the sync of a touch")
    assert all(not r.published and r.chunks_embedded == 0 for r in rec.syncs[-2:])
    assert len(rec.publishes) == publishes
    assert gen_snapshot(harness.artifacts) == before


def test_nothing_is_read_while_a_file_is_still_being_written(harness):
    agent, rec = harness.agent(quiet_seconds=0.3, settle_seconds=60)
    f = open(harness.folder / "big.md", "w", encoding="utf-8")
    try:
        f.write("first half of the document\n")
        f.flush()
        write(harness.folder / "other.md", "a complete neighbour\n")
        rec.wait_event("held")  # the neighbour's batch went ahead without the open file
        rec.wait_for(lambda: "docs/other.md" in indexed(harness.artifacts), "the neighbour")
        assert "docs/big.md" not in indexed(harness.artifacts)
        f.write("second half\n")
    finally:
        f.close()
    rec.wait_for(lambda: "docs/big.md" in indexed(harness.artifacts), "the closed file")
    assert indexed(harness.artifacts)["docs/big.md"] == "first half of the document\nsecond half"
    assert all("docs/big.md" not in r.added or r is rec.publishes[-1] for r in rec.publishes)


def test_a_burst_of_1000_creates_is_one_publish_or_very_few(harness):
    agent, rec = harness.agent()
    n = len(rec.publishes)
    for i in range(1000):
        with open(harness.folder / f"note{i:04d}.md", "w", encoding="utf-8") as f:
            f.write(f"note number {i} about topic{i % 37}\n")
    rec.wait_for(lambda: len(indexed(harness.artifacts)) == 1000, "all 1,000 notes", timeout=60)
    new = rec.publishes[n:]
    assert sum(len(r.added) for r in new) == 1000
    # One is what happens; a stall of this process longer than the quiet period may cut it in two or three.
    assert 1 <= len(new) <= 3, [r.summary() for r in new]
    assert agent.wait_idle(30)
