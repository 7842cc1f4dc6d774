"""The kill harness: SIGKILL a publishing writer before each of its filesystem steps in turn.

A realistic publish (scenario ``update``): a folder of sixteen documents is
indexed, then two are changed, one added and one deleted, and ``sync`` runs
again in a child process (helpers_child) that kills itself before step N —
for every N from 1 to one past the last step. Scenario ``first`` is the
first publish of a new index (the previous state is "no index"); ``adopt``
replaces an index another tool wrote as a plain directory. After each kill:

* the index opens and validates (``read_index``) and is byte for byte the
  previous generation or the next one (meta.json compared without created_at);
* the lock the dead writer held is free, and a following ``sync`` completes,
  publishes exactly the next generation and leaves nothing behind
  (no ``*.tmp``, no stale generation, no journal).
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

from ragtui.core.errors import IndexMissingError
from tests.reliability.helpers import MAX_TOKENS, OVERLAP, Tally, leftovers, make_folder, run_sync, snapshot
from tests.reliability.helpers_child import ForkServer

WRITE_MAX = 2048
"""Bytes per write in the child: files are written in several short writes, each a kill point."""


N_DOCS = 16
SCENARIOS = ("update", "first", "adopt")


def _prepare(base: Path, scenario: str = "update") -> tuple[Path, Path]:
    """``base/docs`` at version 1, indexed into ``base/art`` (as the scenario says); the folder then at version 2."""
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1, N_DOCS)
    if scenario != "first":
        run_sync(folder, art)
    if scenario == "adopt":
        link = art / "rag" / "docs"
        real = link.resolve()
        link.unlink()
        shutil.copytree(real, link)
        shutil.rmtree(art / "rag" / ".gen")
    make_folder(folder, 2, N_DOCS)
    return folder, art


def _snapshot_or_none(link: Path):
    try:
        return snapshot(link)
    except IndexMissingError:
        return None


def _job(folder: Path, art: Path, **trace) -> dict:
    return {"action": "sync", "folder": str(folder), "artifacts": str(art), "max_tokens": MAX_TOKENS,
            "overlap": OVERLAP, "trace": {"write_max": WRITE_MAX, **trace}}


def count_steps(server: ForkServer, base: Path, scenario: str = "update") -> tuple[list[str], dict | None, dict]:
    """(the steps of one complete publishing sync, the old snapshot or None, the new snapshot)."""
    folder, art = _prepare(base, scenario)
    old = _snapshot_or_none(art / "rag" / "docs")
    log = base / "steps.log"
    job = {**_job(folder, art, log=str(log)), "stderr": str(base / "stderr")}
    answer = server.run(job)
    if answer["exit"] != 0:
        raise RuntimeError(f"the counting run failed: {answer}: {(base / 'stderr').read_text()}")
    steps = log.read_text(encoding="utf-8").splitlines()
    return steps, old, snapshot(art / "rag" / "docs")


def run_kill_harness(base: Path, server: ForkServer, scenario: str = "update", every: int = 1) -> tuple[Tally, list[str]]:
    """Kill at every ``every``-th step (1: all of them); return the tally and the step list."""
    steps, old, new = count_steps(server, base / "count", scenario)
    tally = Tally("Writer killed (SIGKILL) at each I/O step of a publish")
    points = list(range(1, len(steps) + 2, every))
    if points[-1] != len(steps) + 1:
        points.append(len(steps) + 1)
    for n in points:
        case = base / f"kill{n}"
        label = f"kill before step {n}" + (f" ({steps[n - 1]})" if n <= len(steps) else " (after the last step)")

        def check(case=case, n=n):
            folder, art = _prepare(case, scenario)
            answer = server.run(_job(folder, art, kill_at=n))
            expect_signal = signal.SIGKILL if n <= len(steps) else None
            assert answer["signal"] == expect_signal, f"child ended {answer}"
            after_kill = _snapshot_or_none(art / "rag" / "docs")
            assert after_kill in (old, new), "the index is neither the old nor the new generation"
            report = run_sync(folder, art)
            assert snapshot(art / "rag" / "docs") == new, "the next sync did not give the new generation"
            assert leftovers(art) == [], f"left behind: {leftovers(art)}"
            # Only what the dead writer had not embedded (or journaled) is embedded again.
            assert report.chunks_embedded <= _embedded_by_full_run(base, scenario), "re-embedded more than a full run"

        tally.check(label, check)
        shutil.rmtree(case, ignore_errors=True)
    return tally, steps


_FULL: dict[tuple[Path, str], int] = {}


def _embedded_by_full_run(base: Path, scenario: str) -> int:
    """Chunks a plain (unkilled) sync of the scenario embeds."""
    if (base, scenario) not in _FULL:
        folder, art = _prepare(base / "full", scenario)
        _FULL[base, scenario] = run_sync(folder, art).chunks_embedded
        shutil.rmtree(base / "full", ignore_errors=True)
    return _FULL[base, scenario]
