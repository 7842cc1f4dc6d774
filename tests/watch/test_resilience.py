"""Lost events, kernel limits, a busy index, stopping mid-sync, bugs, and following an index from outside.

A change that inotify never reports is made by writing through a hard link
that lives outside the watched folder: the kernel reports the write to the
folder the path was opened in, so the agent hears nothing, exactly as if the
event had been lost.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.ingest.publish import IndexLock
from ragtui.core.ingest.sync import sync
from ragtui.watch import IndexFollower, make_observer
from tests.unit.fakes import HashEmbedder
from tests.watch import WAIT, harness_for, indexed, write

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


class Observers:
    """An observer factory that keeps what it built (the agent's construction seam)."""

    def __init__(self, fail_inotify: OSError | None = None) -> None:
        self.built = []
        self.fail_inotify = fail_inotify

    def __call__(self, kind, hooks, poll_seconds):
        if kind == "inotify" and self.fail_inotify is not None:
            raise self.fail_inotify
        observer = make_observer(kind, hooks, poll_seconds)
        self.built.append((kind, observer))
        return observer


def silent_edit(harness, name: str, text: str) -> None:
    """Change ``docs/name`` without any event reaching the agent (through an outside hard link)."""
    link = harness.tmp / f"outside-link-{name}"
    if not link.exists():
        os.link(harness.folder / name, link)
    with open(link, "r+", encoding="utf-8") as f:
        f.truncate()
        f.write(text)


def test_queue_overflow_triggers_a_full_reconcile(harness):
    write(harness.folder / "a.md", "alpha before\n")
    observers = Observers()
    agent, rec = harness.agent(observer_factory=observers)
    silent_edit(harness, "a.md", "alpha changed while events were lost")
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent

    # Through the same path the kernel's IN_Q_OVERFLOW takes: the inotify reader's handle_event.
    kind, observer = observers.built[-1]
    observer.inotify_fd.handle_event(InotifyEvent(-1, InotifyConstants.IN_Q_OVERFLOW, 0, b""))
    rec.wait_event("reconcile", reason="overflow")
    rec.wait_for(lambda: indexed(harness.artifacts)["docs/a.md"] == "alpha changed while events were lost", "the lost edit")


def test_a_real_kernel_queue_overflow(harness):
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"fs.inotify.max_queued_events is {limit}: too many events to flood in a test")
    write(harness.folder / "a.md", "alpha\n")
    observers = Observers()
    agent, rec = harness.agent(observer_factory=observers)
    fd = observers.built[-1][1].inotify_fd
    # Park watchdog's reader so the kernel queue fills up, as under a real storm.
    parked, gate, read = threading.Event(), threading.Event(), fd.read_events

    def gated_read(*args, **kwargs):
        parked.set()
        gate.wait(WAIT)
        return read(*args, **kwargs)

    fd.read_events = gated_read
    try:
        (harness.folder / "wake.log").touch()  # wakes the reader if it sits in the old read
        assert parked.wait(WAIT)
        noise = [harness.folder / "n1.log", harness.folder / "n2.log"]  # not documents
        for p in noise:
            p.touch()
        for i in range(limit + 2000):  # alternate names: identical consecutive events would merge
            os.utime(noise[i % 2])
        write(harness.folder / "late.md", "late arrival whose events the kernel dropped\n")
    finally:
        gate.set()
    rec.wait_event("reconcile", reason="overflow")
    rec.wait_for(lambda: "docs/late.md" in indexed(harness.artifacts), "late.md, by the reconcile")
    write(harness.folder / "after.md", "after the overflow\n")  # the watches still work
    rec.wait_for(lambda: "docs/after.md" in indexed(harness.artifacts), "after.md")


def test_periodic_reconcile_catches_what_events_missed(harness):
    write(harness.folder / "a.md", "alpha before\n")
    agent, rec = harness.agent(reconcile_every=0.5)
    silent_edit(harness, "a.md", "alpha changed silently")
    rec.wait_for(lambda: indexed(harness.artifacts)["docs/a.md"] == "alpha changed silently", "the periodic reconcile")
    assert any(e.kind == "reconcile" and e.data["reason"] == "periodic" for e in rec.events)


def test_no_inotify_watches_left_falls_back_to_polling(harness):
    write(harness.folder / "a.md", "alpha\n")
    failing = Observers(fail_inotify=OSError(errno.ENOSPC, "inotify watch limit reached"))
    agent, rec = harness.agent(observer_factory=failing, poll_seconds=0.2)
    event = rec.events[[e.kind for e in rec.events].index("fallback")]
    assert "fs.inotify.max_user_watches" in event.message and "polling" in event.message
    assert agent.mode == "polling" and [k for k, _ in failing.built] == ["polling"]
    write(harness.folder / "b.md", "bravo, seen by polling\n")
    rec.wait_for(lambda: "docs/b.md" in indexed(harness.artifacts), "b.md by polling")


def test_watch_limit_hit_by_a_new_subfolder_falls_back_at_run_time(harness, monkeypatch):
    from watchdog.observers import inotify_c

    real_add_watch = inotify_c.inotify_add_watch

    def add_watch(fd, path, mask):
        if b"/limited" in path:  # the kernel's answer once max_user_watches is used up
            ctypes.set_errno(errno.ENOSPC)
            return -1
        return real_add_watch(fd, path, mask)

    monkeypatch.setattr(inotify_c, "inotify_add_watch", add_watch)
    write(harness.folder / "a.md", "alpha\n")
    agent, rec = harness.agent(poll_seconds=0.2)
    assert agent.mode == "inotify"
    write(harness.folder / "limited" / "deep.md", "in a folder watchdog could not watch\n")
    event = rec.wait_event("fallback")
    assert "fs.inotify.max_user_watches" in event.message
    rec.wait_for(lambda: "docs/limited/deep.md" in indexed(harness.artifacts), "deep.md after the fallback")
    assert agent.mode == "polling"
    write(harness.folder / "limited" / "more.md", "seen by polling\n")
    rec.wait_for(lambda: "docs/limited/more.md" in indexed(harness.artifacts), "more.md by polling")


def test_a_locked_index_is_retried_not_lost(harness):
    agent, rec = harness.agent()
    with IndexLock(harness.artifacts, "docs"):  # another writer, e.g. `ragtui ingest`
        write(harness.folder / "a.md", "alpha written while the index was locked\n")
        rec.wait_event("retry")
        assert "docs/a.md" not in indexed(harness.artifacts)
    rec.wait_for(lambda: "docs/a.md" in indexed(harness.artifacts), "a.md after the lock was released")
    assert type(rec.errors[0]).__name__ == "LockedError" and agent.running


class GatedEmbedder(HashEmbedder):
    """Blocks inside embed() once ``block`` is set, until ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__()
        self.block = False
        self.entered, self.gate = threading.Event(), threading.Event()

    def embed(self, texts):
        if self.block:
            self.entered.set()
            self.gate.wait(WAIT)
        return super().embed(texts)


def test_stop_abandons_a_sync_that_has_not_begun_writing(harness):
    write(harness.folder / "a.md", "alpha\n")
    emb = GatedEmbedder()
    agent, rec = harness.agent(embedder=emb)
    publishes = len(rec.publishes)
    emb.block = True
    write(harness.folder / "b.md", "bravo, embedded when the stop came\n")
    assert emb.entered.wait(WAIT)
    assert agent.stop(timeout=0) is False  # asks; the sync is inside embed()
    emb.gate.set()
    assert agent.join(WAIT)
    assert len(rec.publishes) == publishes and set(indexed(harness.artifacts)) == {"docs/a.md"}
    assert rec.events[-1].kind == "stopped" and agent.error is None
    agent2, rec2 = harness.agent()  # the next start picks the change up
    assert set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md"}


def test_a_bug_stops_the_agent_loudly(harness):
    class Broken(HashEmbedder):
        def embed(self, texts):
            raise ZeroDivisionError("a bug in an embedder")

    write(harness.folder / "a.md", "alpha\n")
    agent, rec = harness.agent(embedder=Broken(), start=False)
    harness.agents.remove(agent)
    agent.start()
    assert agent.join(WAIT)
    assert isinstance(agent.error, ZeroDivisionError) and isinstance(rec.errors[-1], ZeroDivisionError)
    assert rec.events[-1].kind == "stopped" and "a bug in an embedder" in rec.events[-1].message


def test_index_follower_sees_publishes_from_another_writer(harness):
    write(harness.folder / "a.md", "alpha\n")
    sync(harness.folder, artifacts=harness.artifacts, embedder=HashEmbedder())
    changed = threading.Event()
    with IndexFollower(harness.artifacts, "docs", changed.set):
        write(harness.folder / "b.md", "bravo\n")
        assert sync(harness.folder, artifacts=harness.artifacts, embedder=HashEmbedder()).published
        assert changed.wait(WAIT)


def test_index_follower_sees_the_overlay_a_watch_agent_writes_before_it_publishes(harness):
    from ragtui.core.index.index_format import read_index
    from ragtui.core.index.overlay import generation_dir_of, overlay_path, write_overlay

    write(harness.folder / "a.md", "alpha\n")
    sync(harness.folder, artifacts=harness.artifacts, embedder=HashEmbedder())
    base = read_index(harness.artifacts / "rag" / "docs")
    changed = threading.Event()
    with IndexFollower(harness.artifacts, "docs", changed.set):
        # The overlay of a save that adds nothing: what matters here is its rename into .gen/docs/.
        where = write_overlay(generation_dir_of(base), base_chunks=base.n_chunks, dim=base.meta.dim,
                              segments=[("old", 0, base.n_chunks)], docs_lines=b"",
                              vectors=np.zeros((0, base.meta.dim), dtype=np.float32))
        assert where == overlay_path(generation_dir_of(base))
        assert changed.wait(WAIT)


def test_polling_mode_sees_edits_renames_and_deletes_but_never_follows_links(harness):
    outside = harness.tmp / "outside"
    write(outside / "secret.md", "outside the folder\n")
    os.symlink(outside, harness.folder / "linked")  # the walk never follows a link to a folder; nor does the poller
    write(harness.folder / "a.md", "alpha\n")
    write(harness.folder / "b.md", "bravo\n")
    agent, rec = harness.agent(poll=True, poll_seconds=0.2)
    assert agent.mode == "polling" and set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md"}
    write(harness.folder / "a.md", "alpha edited under polling\n")
    os.rename(harness.folder / "b.md", harness.folder / "c.md")
    write(outside / "secret2.md", "also outside\n")
    rec.wait_for(lambda: indexed(harness.artifacts) == {"docs/a.md": "alpha edited under polling", "docs/c.md": "bravo"},
                 "the edit and the rename")
    (harness.folder / "c.md").unlink()
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/a.md"}, "the delete")
    assert not any("linked" in p for paths in rec.batches() for p in paths)
