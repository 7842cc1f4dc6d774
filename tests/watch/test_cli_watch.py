"""``ragtui watch``: --once and exit codes in-process; a running watch, its JSON log lines and signals as a process
(the installed command)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time

import pytest

from tests.helpers.cli import ragtui_exe
from tests.helpers.cli import run as ragtui
from tests.watch import WAIT, write

pytestmark = pytest.mark.timeout(180)


class Process:
    """A running ``ragtui watch --json``; its stdout lines parsed as they come."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([*ragtui_exe(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def close(self) -> None:
        self.proc.stdout.close()
        self.proc.stderr.close()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def wait_line(self, predicate, what: str, timeout: float = WAIT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                obj = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                obj = "timeout"
            if obj is None or obj == "timeout":
                self.proc.kill()
                pytest.fail(f"no line with {what} ({obj or 'exited'}); seen {self.seen}; stderr {self.proc.stderr.read()}")
            self.seen.append(obj)
            if predicate(obj):
                return obj


@pytest.fixture()
def docs(tmp_path):
    folder = tmp_path / "docs"
    write(folder / "a.md", "alpha document about the command line\n")
    return folder


def test_once_reconciles_and_exits(docs, tmp_path):
    art = tmp_path / "art"
    result = ragtui("watch", str(docs), "--artifacts", str(art), "--once", "--json")
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stdout.splitlines()[-1])
    assert line["event"] == "publish" and line["added"] == ["docs/a.md"] and line["chunks"]["embedded"] == 1
    again = ragtui("watch", str(docs), "--artifacts", str(art), "--once")
    assert again.returncode == 0 and "is up to date (1 documents" in again.stdout


def test_bad_usage_exits_2_with_one_line(tmp_path):
    result = ragtui("watch", str(tmp_path / "missing"), "--artifacts", str(tmp_path), "--once")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "is not a folder" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_follows_changes_and_stops_cleanly_on_a_signal(docs, tmp_path, signum):
    art = tmp_path / "art"
    p = Process(["watch", str(docs), "--artifacts", str(art), "--json", "--quiet-ms", "200"])
    p.wait_line(lambda o: o["event"] == "started" and o["mode"] == "inotify", "started")
    p.wait_line(lambda o: o["event"] == "publish" and o["added"] == ["docs/a.md"], "the start publish")
    write(docs / "b.md", "bravo arrives while watching\n")
    line = p.wait_line(lambda o: o["event"] == "publish", "the publish of b.md")
    assert line["added"] == ["docs/b.md"] and line["chunks"]["embedded"] == 1 and line["ms"] > 0
    # Written and closed: released after the short quiet period of a close after writing, not --quiet-ms.
    assert 0 < line["latency_ms"]
    os.kill(p.proc.pid, signum)
    assert p.proc.wait(WAIT) == 0
    p.wait_line(lambda o: o["event"] == "stopped", "stopped")
    assert [o["event"] for o in p.seen][-2:] == ["stopping", "stopped"]
    assert p.proc.stderr.read() == ""
    p.close()


def test_rm_is_refused_while_a_watch_keeps_the_index_and_works_once_it_stops(docs, tmp_path):
    """Between two saves the agent holds no writer lock, so a removal used to go through and the agent's
    next sync rebuilt the index: `ragtui rm` is refused, naming the agent, until the watch stops."""
    art = tmp_path / "art"
    p = Process(["watch", str(docs), "--artifacts", str(art), "--json"])
    p.wait_line(lambda o: o["event"] == "publish", "the start publish")
    p.wait_line(lambda o: o["event"] == "ready", "ready")
    rm = ragtui("rm", "docs", "--yes", "--artifacts", str(art))
    assert rm.returncode == 3, rm.stderr
    assert f"kept up to date by `ragtui watch` (pid {p.proc.pid})" in rm.stderr
    assert "stop the watch first" in rm.stderr and len(rm.stderr.strip().splitlines()) == 1
    assert (art / "rag" / "docs" / "meta.json").is_file()
    os.kill(p.proc.pid, signal.SIGTERM)
    assert p.proc.wait(WAIT) == 0
    p.close()
    rm = ragtui("rm", "docs", "--yes", "--artifacts", str(art))
    assert rm.returncode == 0, rm.stderr
    assert not os.path.lexists(art / "rag" / "docs")


def test_a_watch_does_not_start_while_the_index_is_being_removed(docs, tmp_path):
    from ragtui.core.errors import LockedError
    from ragtui.core.ingest.keeper import KeeperLock
    from ragtui.watch import WatchAgent
    from tests.unit.fakes import HashEmbedder

    art = tmp_path / "art"
    with KeeperLock(art, "docs").remove():
        agent = WatchAgent(docs, artifacts=art, embedder=HashEmbedder())
        with pytest.raises(LockedError, match="being removed by another process"):
            agent.start()
        assert not agent.running and not (art / "rag" / "docs").exists()
    agent = WatchAgent(docs, artifacts=art, embedder=HashEmbedder()).start()
    try:
        assert agent.wait_idle(WAIT) and (art / "rag" / "docs" / "meta.json").is_file()
        with pytest.raises(LockedError, match="kept up to date"):
            KeeperLock(art, "docs").remove()
    finally:
        assert agent.stop()
    KeeperLock(art, "docs").remove().release()  # free again once the agent has stopped
