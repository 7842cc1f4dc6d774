"""The watch agent against real files and real inotify events.

Shared harness: ``Recorder`` collects the agent's callbacks and lets a test
wait for a condition (re-checked on every callback, up to a generous
timeout) instead of sleeping; ``indexed`` reads what the index holds now.
Fixtures are imported by the test modules that use them.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ragtui.core.errors import IndexMissingError
from ragtui.core.index.index_format import read_index
from ragtui.watch import WatchAgent
from tests.unit.fakes import HashEmbedder

WAIT = 30.0
"""Seconds a test waits for a condition before failing (a loaded 2-core CI machine is slow, never this slow)."""


class Recorder:
    """The agent's callbacks, kept in order, with a condition to wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.syncs: list = []
        self.publishes: list = []
        self.events: list = []
        self.errors: list = []

    def on_sync(self, report) -> None:
        with self.cond:
            self.syncs.append(report)
            if report.published:
                self.publishes.append(report)
            self.cond.notify_all()

    def on_event(self, event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def on_error(self, exc) -> None:
        with self.cond:
            self.errors.append(exc)
            self.cond.notify_all()

    def kinds(self) -> list[str]:
        with self.cond:
            return [e.kind for e in self.events]

    def batches(self) -> list[tuple]:
        with self.cond:
            return [tuple(e.data["paths"]) for e in self.events if e.kind == "batch"]

    def wait_for(self, predicate, what: str, timeout: float = WAIT):
        """Wait until ``predicate()`` is true (checked now and after every callback)."""
        with self.cond:
            ok = self.cond.wait_for(_safe(predicate), timeout)
            if not ok:
                pytest.fail(
                    f"timed out after {timeout:.0f} s waiting for {what}; "
                    f"syncs={[r.summary() for r in self.syncs]} events={[(e.kind, e.message) for e in self.events]} "
                    f"errors={self.errors!r}"
                )
            return ok

    def wait_event(self, kind: str, timeout: float = WAIT, **match):
        def found():
            return [e for e in self.events if e.kind == kind and all(e.data.get(k) == v for k, v in match.items())]

        self.wait_for(lambda: found(), f"an agent event {kind!r} {match or ''}", timeout)
        return found()[0]


def _safe(predicate):
    """A predicate that counts an exception (an index caught mid-read) as "not yet"."""

    def check():
        try:
            return bool(predicate())
        except (OSError, ValueError, IndexMissingError):
            return False

    return check


def indexed(artifacts: Path, index_id: str = "docs") -> dict[str, str]:
    """doc_id -> the text of its chunks joined (small test documents are one chunk each)."""
    try:
        data = read_index(artifacts / "rag" / index_id)
    except IndexMissingError:
        return {}
    out: dict[str, list[str]] = {}
    for r in data.records:
        out.setdefault(r.doc_id, []).append(r.text)
    return {d: "".join(t) for d, t in out.items()}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def gen_snapshot(artifacts: Path) -> dict[str, tuple]:
    """Every path of the published index (link, generations) with inode, size and mtime."""
    out = {}
    rag = artifacts / "rag"
    for top in (rag / "docs", rag / ".gen"):
        out[str(top)] = (os.lstat(top).st_ino, os.readlink(top) if top.is_symlink() else None)
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                out[p] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


class Harness:
    """Builds agents on ``tmp_path/docs`` with a Recorder, and stops them all at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.folder = tmp_path / "docs"
        self.folder.mkdir(exist_ok=True)
        self.artifacts = tmp_path / "art"
        self.agents: list[WatchAgent] = []

    def agent(self, *, start: bool = True, embedder=None, **options) -> tuple[WatchAgent, Recorder]:
        rec = Recorder()
        options.setdefault("artifacts", self.artifacts)
        agent = WatchAgent(
            options.pop("folder", self.folder),
            embedder=embedder or HashEmbedder(),
            on_sync=rec.on_sync,
            on_event=rec.on_event,
            on_error=rec.on_error,
            **options,
        )
        self.agents.append(agent)
        if start:
            agent.start()
            rec.wait_for(lambda: rec.syncs or agent.mode == "paused", "the start reconcile")
        return agent, rec

    def close(self) -> None:
        for agent in self.agents:
            assert agent.stop(timeout=WAIT), "the agent did not stop"
            assert agent.error is None, f"the agent stopped on an error: {agent.error!r}"


def harness_for(tmp_path):
    """The body of each module's ``harness`` fixture: a Harness, closed (agents stopped) at teardown."""
    h = Harness(tmp_path)
    yield h
    h.close()
