"""Classification and debouncing without a filesystem: hand-made events and a fake clock."""

from __future__ import annotations

import os
import threading

import pytest
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)

from ragtui.core.ingest.walk import WalkRules
from ragtui.watch.events import ROOT_GONE, Batch, Change, ChangeBuffer, Scope, classify, compact_paths

pytestmark = pytest.mark.timeout(60)

F = "/w/docs"


@pytest.fixture()
def scope():
    return Scope(F, WalkRules(), ignore_under=[F + "/art"])


def test_document_writes_are_changes_that_track_the_writer(scope):
    assert classify(FileCreatedEvent(F + "/a.md"), scope) == [Change(F + "/a.md", True)]
    assert classify(FileModifiedEvent(F + "/a.md"), scope) == [Change(F + "/a.md", True)]
    assert classify(FileClosedEvent(F + "/a.md"), scope) == [Change(F + "/a.md", False, closed=True)]
    assert classify(FileDeletedEvent(F + "/sub/a.md"), scope) == [Change(F + "/sub/a.md", False)]
    assert classify(FileAttribEvent(F + "/a.md"), scope) == [Change(F + "/a.md", None)]


@pytest.mark.parametrize(
    "name", [".a.md.swp", "a.md~", "4913", ".goutputstream-X1Y2Z3", "notes.tmp", "#a.md#", ".#a.md", "sedAb12Cd", "img.png"]
)
def test_swap_backup_and_temp_files_imply_nothing(scope, name):
    for cls in (FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileDeletedEvent):
        assert classify(cls(f"{F}/{name}"), scope) == []


def test_reads_folder_modified_and_excluded_places_imply_nothing(scope):
    assert classify(FileOpenedEvent(F + "/a.md"), scope) == []
    assert classify(FileClosedNoWriteEvent(F + "/a.md"), scope) == []
    assert classify(DirModifiedEvent(F + "/sub"), scope) == []
    for path in (F + "/.git/x.md", F + "/node_modules/p/readme.md", F + "/art/rag/.gen/docs/g1/meta.json",
                 F + "/art/x.md", "/w/other/a.md", F + "/.hidden/a.md"):
        assert classify(FileModifiedEvent(path), scope) == [], path
    assert classify(DirCreatedEvent(F + "/.git"), scope) == []
    assert classify(DirCreatedEvent(F + "/art"), scope) == []


def test_moves_yield_the_sides_that_matter(scope):
    # temp file renamed over the target: an update of the target, nothing else
    assert classify(FileMovedEvent(F + "/.a.md.tmp123", F + "/a.md"), scope) == [Change(F + "/a.md", False)]
    assert classify(FileMovedEvent(F + "/sedXyZ123", F + "/a.md"), scope) == [Change(F + "/a.md", False)]
    # vim's backup: the document is gone under its name (a new one follows)
    assert classify(FileMovedEvent(F + "/a.md", F + "/a.md~"), scope) == [Change(F + "/a.md", False)]
    # a rename: both names
    assert classify(FileMovedEvent(F + "/a.md", F + "/b.md"), scope) == [Change(F + "/a.md", False), Change(F + "/b.md", False)]
    # folders moved within, out of (delete) and into (create) the tree
    assert classify(DirMovedEvent(F + "/sub", F + "/sub2"), scope) == [Change(F + "/sub", False), Change(F + "/sub2", False)]
    assert classify(DirDeletedEvent(F + "/sub"), scope) == [Change(F + "/sub", None)]
    assert classify(DirCreatedEvent(F + "/new"), scope) == [Change(F + "/new", None)]
    assert classify(DirMovedEvent(F + "/sub", F + "/.trash/sub"), scope) == [Change(F + "/sub", False)]


def test_the_root_itself(scope):
    assert classify(DirDeletedEvent(F), scope) == ROOT_GONE
    assert classify(DirModifiedEvent(F), scope) == []
    assert classify(FileModifiedEvent(os.fsencode(F + "/a.md")), scope) == [Change(F + "/a.md", True)]


def test_compact_paths_drops_what_a_folder_covers():
    assert compact_paths([F + "/sub/a.md", F + "/sub", F + "/b.md", F + "/sub/x/y.md", F + "/subway.md", F + "/b.md"]) == [
        F + "/b.md", F + "/sub", F + "/subway.md"]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def take(buf: ChangeBuffer) -> Batch | None:
    return buf.next_batch(timeout=0)


def test_buffer_releases_one_batch_after_the_quiet_period():
    clock = Clock()
    buf = ChangeBuffer(quiet_seconds=0.3, max_delay=3.0, settle_seconds=2.0, clock=clock)
    for i in range(100):  # "save all": 100 files, each create+modify+close
        p = f"{F}/f{i}.md"
        buf.record([Change(p, True), Change(p, True), Change(p, False)])
        clock.t += 0.001
    assert take(buf) is None
    clock.t += 0.29
    assert take(buf) is None
    clock.t += 0.02
    batch = take(buf)
    assert batch is not None and len(batch.paths) == 100 and batch.held == 0 and batch.full is None
    assert not buf.idle()
    buf.done()
    assert buf.idle() and take(buf) is None


def test_buffer_holds_a_file_until_closed_or_settled():
    clock = Clock()
    buf = ChangeBuffer(quiet_seconds=0.3, max_delay=3.0, settle_seconds=2.0, clock=clock)
    buf.record([Change(F + "/open.md", True), Change(F + "/done.md", True), Change(F + "/done.md", False)])
    clock.t += 0.5
    batch = take(buf)
    assert batch.paths == (F + "/done.md",) and batch.held == 1
    buf.done()
    clock.t += 0.5
    assert take(buf) is None  # still open, not settled
    buf.record([Change(F + "/open.md", False)])  # closed
    clock.t += 0.31
    assert take(buf).paths == (F + "/open.md",)
    buf.done()
    # a writer that never closes: read once nothing touched the file for settle_seconds
    buf.record([Change(F + "/log.md", True)])
    clock.t += 1.9
    assert take(buf) is None
    clock.t += 0.2
    assert take(buf).paths == (F + "/log.md",)


def test_buffer_under_endless_churn_still_releases_complete_files():
    clock = Clock()
    buf = ChangeBuffer(quiet_seconds=0.3, max_delay=3.0, settle_seconds=2.0, clock=clock)
    buf.record([Change(F + "/a.md", False)])
    for _ in range(40):  # another file written every 0.1 s, never quiet
        clock.t += 0.1
        buf.record([Change(F + "/busy.md", True)])
        batch = take(buf)
        if batch is not None:
            break
    assert batch is not None and F + "/a.md" in batch.paths and F + "/busy.md" not in batch.paths
    assert 2.9 <= clock.t - 1000.0 <= 3.1


def test_full_reconcile_covers_pending_paths_and_requeue_keeps_work():
    clock = Clock()
    buf = ChangeBuffer(quiet_seconds=0.3, clock=clock)
    buf.record([Change(F + "/a.md", False)])
    buf.request_full("overflow")
    batch = take(buf)
    assert batch.full == "overflow" and batch.paths == ()
    buf.requeue(batch, not_before=clock.t + 5)
    clock.t += 4
    assert take(buf) is None
    clock.t += 1
    assert take(buf).full == "overflow"
    buf.done()
    buf.record([Change(F + "/b.md", False)])
    clock.t += 1
    b = take(buf)
    buf.requeue(b)
    assert buf.pending_paths() == [F + "/b.md"]
    buf.clear()
    assert buf.idle()


def test_signals_wake_a_blocked_consumer():
    buf = ChangeBuffer()
    got = []
    t = threading.Thread(target=lambda: got.append(buf.next_batch(timeout=None)))
    t.start()
    buf.signal_root_gone()
    t.join(10)
    assert not t.is_alive() and got == [None]
    s = buf.take_signals()
    assert s.root_gone and not s.stop
    assert not buf.take_signals().root_gone
    buf.signal_stop()
    assert buf.next_batch(timeout=None) is None and buf.take_signals().stop and buf.stopping


def test_a_folder_waits_for_the_open_files_inside_it():
    clock = Clock()
    buf = ChangeBuffer(quiet_seconds=0.3, max_delay=3.0, settle_seconds=2.0, clock=clock)
    buf.record([Change(F + "/copied", None), Change(F + "/copied/done.md", True), Change(F + "/copied/done.md", False),
                Change(F + "/copied/big.md", True), Change(F + "/elsewhere.md", False)])
    clock.t += 0.5
    batch = take(buf)
    assert sorted(batch.paths) == [F + "/copied/done.md", F + "/elsewhere.md"] and batch.held == 2
    buf.done()
    buf.record([Change(F + "/copied/big.md", False)])
    clock.t += 0.5
    assert sorted(take(buf).paths) == [F + "/copied", F + "/copied/big.md"]


def test_files_closed_after_writing_wait_only_the_short_quiet_period():
    """An editor's save ends in one close: when that is every pending path's last event, the batch goes sooner."""
    clock = Clock()
    buf = ChangeBuffer(quiet_seconds=0.3, max_delay=3.0, settle_seconds=2.0, clock=clock, closed_quiet_seconds=0.01)
    a, b = F + "/a.md", F + "/b.md"
    buf.record([Change(a, True), Change(a, True), Change(a, False, closed=True)])
    assert take(buf) is None  # not even the short period has passed
    clock.t += 0.011
    batch = take(buf)
    assert batch is not None and batch.paths == (a,)
    buf.done()
    # Another path whose last event says nothing about a finished write (a touch) keeps the full quiet period.
    buf.record([Change(a, False, closed=True), Change(b, None)])
    clock.t += 0.011
    assert take(buf) is None
    clock.t += 0.3
    assert set(take(buf).paths) == {a, b}
    buf.done()
    # So does a file written again after its close (the last event decides).
    buf.record([Change(a, False, closed=True), Change(a, True)])
    clock.t += 0.011
    assert take(buf) is None
    buf.record([Change(a, False, closed=True)])
    clock.t += 0.011
    assert take(buf).paths == (a,)
    buf.done()
    # Many closed paths at once (a checkout, a copy) are one batch after the full quiet period.
    many = [Change(f"{F}/m{i}.md", False, closed=True) for i in range(65)]
    buf.record(many)
    clock.t += 0.011
    assert take(buf) is None
    clock.t += 0.3
    assert len(take(buf).paths) == 65


def test_a_close_wakes_a_consumer_waiting_for_the_long_quiet_period():
    buf = ChangeBuffer(quiet_seconds=3600.0, closed_quiet_seconds=0.0)
    path = F + "/a.md"
    buf.record([Change(path, True)])
    got = []
    consumer = threading.Thread(target=lambda: got.append(buf.next_batch(timeout=60.0)))
    consumer.start()
    buf.record([Change(path, False, closed=True)])
    consumer.join(60.0)
    assert got and got[0] is not None and got[0].paths == (path,)
