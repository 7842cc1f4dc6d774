"""The agent and the folder's ignore files, with real inotify; the watch flags --poll and --reconcile-every."""

from __future__ import annotations

import json
import os
import signal

import pytest

from ragtui.core.ingest.walk import WalkRules
from tests.helpers.cli import run as ragtui
from tests.watch import WAIT, harness_for, indexed, write
from tests.watch.test_cli_watch import Process

pytestmark = pytest.mark.timeout(180)


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


def all_batch_paths(rec) -> set[str]:
    return {p for batch in rec.batches() for p in batch}


def test_paths_a_gitignore_leaves_out_never_reach_a_batch(harness):
    d = harness.folder
    write(d / ".gitignore", "build/\n*.log.txt\ndrafts/*\n!drafts/keep.md\n")
    write(d / "a.md", "alpha\n")
    (d / "build").mkdir()
    (d / "drafts").mkdir()
    agent, rec = harness.agent()
    assert set(indexed(harness.artifacts)) == {"docs/a.md"}
    write(d / "build" / "out.md", "generated\n")  # no watch on build/: no event at all
    write(d / "run.log.txt", "a log\n")
    write(d / "drafts" / "wip.md", "not yet\n")
    write(d / "drafts" / "keep.md", "kept draft\n")  # re-included by the negation
    write(d / "b.md", "bravo\n")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md", "docs/drafts/keep.md"},
                 "b.md and the kept draft")
    assert agent.wait_idle(WAIT)
    seen = all_batch_paths(rec)
    assert not any(p.endswith(("out.md", "run.log.txt", "wip.md")) for p in seen)
    assert agent.stats.ignored >= 2  # the log and the draft were seen and dropped
    assert set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md", "docs/drafts/keep.md"}


def test_editing_the_gitignore_reconciles_and_watches_anew(harness):
    d = harness.folder
    write(d / ".gitignore", "build/\n")
    write(d / "a.md", "alpha\n")
    write(d / "build" / "out.md", "generated before\n")
    agent, rec = harness.agent()
    assert set(indexed(harness.artifacts)) == {"docs/a.md"}

    write(d / ".gitignore", "a.md\n")  # build/ is in now, a.md out
    event = rec.wait_event("reconcile", reason="ignore-file")
    assert event.message == "reconciling the whole folder (ignore-file)"
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/build/out.md"}, "the new rules applied")
    # build/ had no watch; it has one now, so an edit inside it is seen like any other.
    write(d / "build" / "out.md", "edited after the rules changed\n")
    rec.wait_for(lambda: indexed(harness.artifacts).get("docs/build/out.md") == "edited after the rules changed",
                 "the edit inside the newly watched folder")
    # Deleting the ignore file brings a.md back.
    os.unlink(d / ".gitignore")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/a.md", "docs/build/out.md"}, "a.md back")
    assert agent.mode == "inotify" and not rec.errors


def test_an_ignore_file_saved_by_rename_and_nested_ones(harness):
    d = harness.folder
    write(d / "sub" / "x.md", "x\n")
    write(d / "sub" / "y.md", "y\n")
    agent, rec = harness.agent()
    assert set(indexed(harness.artifacts)) == {"docs/sub/x.md", "docs/sub/y.md"}
    # An editor's save: a temporary file renamed over sub/.ignore.
    write(d / "sub" / ".ignore.tmp123", "y.md\n")
    os.rename(d / "sub" / ".ignore.tmp123", d / "sub" / ".ignore")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/sub/x.md"}, "sub/.ignore applied")


def test_no_ignore_files_means_no_reconcile_for_them(harness):
    d = harness.folder
    write(d / ".gitignore", "a.md\n")
    write(d / "a.md", "alpha\n")
    agent, rec = harness.agent(rules=WalkRules(ignore_files=False))
    assert set(indexed(harness.artifacts)) == {"docs/a.md"}
    write(d / ".gitignore", "*\n")
    write(d / "b.md", "bravo\n")
    rec.wait_for(lambda: set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md"}, "b.md")
    assert agent.wait_idle(WAIT)
    assert [e for e in rec.events if e.kind == "reconcile" and e.data.get("reason") == "ignore-file"] == []


# -- the flags, through the real command ---------------------------------------------------------------


def test_poll_follows_real_files_and_honours_gitignore(tmp_path):
    d = tmp_path / "docs"
    write(d / "a.md", "alpha\n")
    write(d / ".gitignore", "scratch/\n")
    p = Process(["watch", str(d), "--artifacts", str(tmp_path / "art"), "--json", "--poll", "--poll-seconds", "0.2"])
    try:
        p.wait_line(lambda o: o["event"] == "started", "started")
        assert p.seen[-1]["mode"] == "polling"
        p.wait_line(lambda o: o["event"] == "publish" and o["added"] == ["docs/a.md"], "the start publish")
        write(d / "scratch" / "note.md", "left out by .gitignore\n")
        write(d / "b.md", "bravo arrives while polling\n")
        line = p.wait_line(lambda o: o["event"] == "publish", "the publish of b.md")
        assert line["added"] == ["docs/b.md"] and line["removed"] == [] and line["changed"] == []
        os.kill(p.proc.pid, signal.SIGTERM)
        assert p.proc.wait(WAIT) == 0
        p.wait_line(lambda o: o["event"] == "stopped", "stopped")
        assert not any("scratch" in str(o) for o in p.seen if o["event"] == "publish")
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
        p.close()


def test_reconcile_every_finds_what_no_event_reported(tmp_path):
    d = tmp_path / "docs"
    write(d / "a.md", "alpha as it was\n")
    # A hard link outside the folder: writing through it changes docs/a.md, yet raises no event in
    # the folder's inotify watch (events go to the directory the write was made through).
    os.link(d / "a.md", tmp_path / "elsewhere.md")
    p = Process(["watch", str(d), "--artifacts", str(tmp_path / "art"), "--json", "--reconcile-every", "0.5"])
    try:
        p.wait_line(lambda o: o["event"] == "publish" and o["added"] == ["docs/a.md"], "the start publish")
        with open(tmp_path / "elsewhere.md", "w", encoding="utf-8") as f:
            f.write("alpha changed behind the watcher's back\n")
        line = p.wait_line(lambda o: o["event"] == "publish", "the publish of the change")
        assert line["changed"] == ["docs/a.md"]
        # The line before it opens the sync that published: a periodic reconcile, not an event's batch
        # (which logs no line of its own, and would follow the previous reconcile's "up-to-date").
        assert p.seen[-2]["event"] == "reconcile" and p.seen[-2]["reason"] == "periodic"
        os.kill(p.proc.pid, signal.SIGINT)
        assert p.proc.wait(WAIT) == 0
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
        p.close()


def test_watch_once_warns_once_and_refuses_a_malformed_pattern(tmp_path):
    d = tmp_path / "docs"
    write(d / "a.md", "alpha\n")
    write(d / "drafts" / "b.md", "bravo\n")
    art = str(tmp_path / "art")
    result = ragtui("watch", str(d), "--artifacts", art, "--once", "--json", "--exclude", "drafts/", "--exclude", "draft/")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    warnings = [o for o in lines if o["event"] == "warning"]
    assert [w["message"] for w in warnings] == [f"--exclude 'draft/' matches nothing in {d}"]
    assert lines[-1]["event"] == "publish" and lines[-1]["added"] == ["docs/a.md"]
    bad = ragtui("watch", str(d), "--artifacts", art, "--once", "--include", "a\\")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("ragtui: error: --include 'a\\\\' is not a valid gitignore-style pattern")
