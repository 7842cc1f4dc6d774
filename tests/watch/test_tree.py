"""Renames, folders moved or deleted, changes made while stopped, the agent's own writes, the folder vanishing."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.watch import harness_for, indexed, write

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


def test_rename_rekeys_without_duplicating_or_embedding(harness):
    write(harness.folder / "a.md", "alpha text about renames\n")
    write(harness.folder / "sub" / "x.md", "x inside a folder\n")
    write(harness.folder / "sub" / "y.md", "y inside a folder\n")
    agent, rec = harness.agent()
    n = len(rec.publishes)
    os.rename(harness.folder / "a.md", harness.folder / "b.md")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/b.md", "docs/sub/x.md", "docs/sub/y.md"}, "b.md only")
    r = rec.publishes[n]
    assert len(rec.publishes) == n + 1 and r.added == ["docs/b.md"] and r.removed == ["docs/a.md"]
    assert r.chunks_embedded == 0
    os.rename(harness.folder / "sub", harness.folder / "moved")  # a folder rename: one event for the folder
    want = {"docs/b.md", "docs/moved/x.md", "docs/moved/y.md"}
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == want, "the folder's documents re-keyed")
    assert rec.publishes[-1].chunks_embedded == 0 and rec.publishes[-1].chunks_total == 3


def test_folder_moved_out_deleted_and_moved_in(harness):
    outside = harness.tmp / "outside"
    outside.mkdir()
    write(harness.folder / "keep.md", "stays\n")
    for name in ("one", "two"):
        for i in range(3):
            write(harness.folder / name / f"f{i}.md", f"{name} file {i}\n")
    write(outside / "incoming" / "deep" / "n.md", "arrives with its folder\n")
    agent, rec = harness.agent()
    assert len(indexed(harness.artifacts)) == 7

    shutil.move(str(harness.folder / "one"), str(outside / "one"))  # only a folder event arrives
    rec.wait_for(lambda: not any(d.startswith("docs/one/") for d in indexed(harness.artifacts)), "one/ moved out")
    shutil.rmtree(harness.folder / "two")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/keep.md"}, "two/ deleted")

    os.rename(outside / "incoming", harness.folder / "incoming")
    rec.wait_for(lambda: "docs/incoming/deep/n.md" in indexed(harness.artifacts), "the moved-in folder scanned")
    # later edits inside the moved-in folder are seen: it is watched now
    write(harness.folder / "incoming" / "deep" / "n.md", "edited after the move\n")
    write(harness.folder / "incoming" / "deep" / "new.md", "created after the move\n")
    rec.wait_for(lambda: indexed(harness.artifacts).get("docs/incoming/deep/n.md") == "edited after the move"
                 and "docs/incoming/deep/new.md" in indexed(harness.artifacts), "edits inside the moved-in folder")
    assert set(indexed(harness.artifacts)) == {"docs/keep.md", "docs/incoming/deep/n.md", "docs/incoming/deep/new.md"}


def test_changes_made_while_stopped_are_reconciled_at_start(harness):
    d = harness.folder
    for name in ("gone.md", "edited.md", "same-size.md", "touched.md"):
        write(d / name, f"{name} original content\n")
    agent, rec = harness.agent()
    assert agent.stop(30)

    (d / "gone.md").unlink()
    write(d / "edited.md", "edited.md content that changed while nobody watched\n")
    st = os.stat(d / "same-size.md")
    write(d / "same-size.md", "same-size.md ORIGINAL content\n")  # same size, and the old mtime put back:
    os.utime(d / "same-size.md", ns=(st.st_atime_ns, st.st_mtime_ns))  # never decide by mtime alone
    os.utime(d / "touched.md")
    write(d / "added.md", "added while stopped\n")

    agent2, rec2 = harness.agent()
    r = rec2.syncs[0]
    assert r.added == ["docs/added.md"] and r.removed == ["docs/gone.md"]
    assert r.changed == ["docs/edited.md", "docs/same-size.md"] and r.unchanged == 1
    assert indexed(harness.artifacts)["docs/same-size.md"] == "same-size.md ORIGINAL content"


def test_the_agent_never_reacts_to_its_own_reads_and_writes(harness):
    # The artifacts root inside the watched folder: every publish writes under it.
    harness.artifacts = harness.folder / "artifacts"
    for i in range(5):
        write(harness.folder / f"doc{i}.md", f"document {i}\n")
    agent, rec = harness.agent()
    assert rec.publishes and agent.wait_idle(30)
    for k in range(2):
        write(harness.folder / f"marker{k}.md", f"marker {k}\n")
        rec.wait_for(lambda k=k: f"docs/marker{k}.md" in indexed(harness.artifacts), f"marker {k}")
        assert agent.wait_idle(30)
    # Exactly one batch per marker after the start: no publish, state write or
    # document read of the agent ever came back to it as a change.
    assert rec.batches() == [(), (str(harness.folder / "marker0.md"),), (str(harness.folder / "marker1.md"),)]
    # The artifacts root exists before the folder is watched (the agent's watch lock lives in it), so the
    # watch never enters it: the publishes' writes do not even arrive as events.
    assert agent.stats.ignored == 0 and (harness.artifacts / "rag" / ".locks" / "docs.watch").is_file()
    assert not any(d.startswith("docs/artifacts") for d in indexed(harness.artifacts))


def test_the_folder_vanishing_and_coming_back(harness):
    write(harness.folder / "a.md", "alpha before the folder vanished\n")
    agent, rec = harness.agent(root_check_seconds=0.2)
    before = indexed(harness.artifacts)
    shutil.rmtree(harness.folder)
    rec.wait_event("paused")
    assert agent.mode == "paused" and indexed(harness.artifacts) == before  # the index is kept
    write(harness.folder / "b.md", "bravo in the folder that came back\n")
    rec.wait_event("resumed")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/b.md"}, "the reconcile after the return")
    assert agent.mode == "inotify"
    write(harness.folder / "c.md", "charlie after the return\n")  # watched again
    rec.wait_for(lambda: "docs/c.md" in indexed(harness.artifacts), "an edit after the return")

    # Moved away (inotify says nothing to the moved folder's watchers) and back.
    os.rename(harness.folder, harness.tmp / "away")
    rec.wait_for(lambda: rec.kinds().count("paused") == 2, "the second pause")
    os.rename(harness.tmp / "away", harness.folder)
    rec.wait_for(lambda: rec.kinds().count("resumed") == 2, "the second return")
    write(harness.folder / "d.md", "delta after coming back\n")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/b.md", "docs/c.md", "docs/d.md"}, "d.md")
    assert agent.running and not rec.errors


def _inotify_watches(agent) -> int:
    """How many inotify watches the agent's observer holds (from the kernel's fdinfo)."""
    fd = agent._observer.inotify_fd._inotify_fd
    with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
        return sum(1 for line in f if line.startswith("inotify wd:"))


def test_folders_the_walk_skips_get_no_inotify_watch(harness):
    write(harness.folder / "a.md", "alpha\n")
    write(harness.folder / "sub" / "b.md", "beta\n")
    for skipped in (".git/objects/aa", "node_modules/pkg/lib", ".hidden/deep"):
        (harness.folder / skipped).mkdir(parents=True)
    art = harness.folder / "artifacts"
    agent, rec = harness.agent(artifacts=art)
    rec.wait_for(lambda: rec.publishes, "the start publish")
    assert agent.mode == "inotify"
    assert _inotify_watches(agent) == 2  # docs/ and docs/sub/: the artifacts root neither
    # A skipped folder renamed into view is watched from then on.
    write(harness.folder / ".hidden" / "deep" / "c.md", "gamma\n")
    os.rename(harness.folder / ".hidden", harness.folder / "shown")
    rec.wait_for(lambda: "docs/shown/deep/c.md" in indexed(art), "the folder renamed into view")
    write(harness.folder / "shown" / "deep" / "c.md", "gamma edited\n")
    rec.wait_for(lambda: indexed(art).get("docs/shown/deep/c.md") == "gamma edited",
                 "an edit inside it")
    assert _inotify_watches(agent) == 4


def test_the_agent_says_ready_once_after_the_start_reconcile_with_the_index_open(harness):
    write(harness.folder / "a.md", "alpha beta gamma\n")
    agent, rec = harness.agent()
    ev = rec.wait_event("ready")
    assert ev.data["warm"] is True  # the start reconcile published: the writer holds that generation
    write(harness.folder / "b.md", "delta epsilon\n")
    rec.wait_for(lambda: any("docs/b.md" in r.added for r in rec.syncs), "the save of b.md")
    assert agent.stop(30)
    assert rec.kinds().count("ready") == 1  # not again after the save's own publish

    # A second agent over the published index opens it ahead (it did not publish it itself).
    agent2, rec2 = harness.agent()
    assert rec2.wait_event("ready").data["warm"] is True
    assert agent2.stop(30)
