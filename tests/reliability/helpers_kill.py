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

``run_export_kill_harness`` does the same for ``ragtui export`` (scenarios
``new``, ``empty``, ``replace``): after each kill the target holds the old or
the new export, never nothing, and the next export gives the new one and
leaves nothing beside it (no ``.site.export-<pid>``, no ``.site.old-<pid>``).
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from ragtui.core.errors import IndexMissingError
from tests.reliability.helpers import MAX_TOKENS, OVERLAP, Tally, doc_text, leftovers, make_folder, run_sync, snapshot
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


# -- the export ----------------------------------------------------------------------------------

EXPORT_SCENARIOS = ("new", "empty", "replace")
"""``new``: nothing at the target; ``empty``: an empty folder there; ``replace``: a previous export there."""
OLD_STAMP, NEW_STAMP = "2026-01-01T00:00:00Z", "2026-02-02T00:00:00Z"
EXPORT_DOCS = {f"docs/d{i}.md": [f"# Part {i}\n\n" + doc_text(i, 40), f"## More {i}\n\n" + doc_text(i + 50, 30)]
               for i in range(6)}


def tree(folder: Path) -> dict[str, bytes] | None:
    """Every file under ``folder`` by relative path (folders as b"/"); None when nothing is at ``folder``."""
    if not os.path.lexists(folder):
        return None
    out: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        out[path.relative_to(folder).as_posix()] = b"/" if path.is_dir() else path.read_bytes()
    return out


EXPORT_WRITE_MAX = 1 << 20
"""The export writes each file in one call (short writes are the index writer's to loop on): its steps are its
files' opens, writes and closes, its folders, the swap, and the removal of the old export."""


def _export_job(art: Path, out: Path, stamp: str, **trace) -> dict:
    return {"action": "cli", "argv": ["export", str(out), "--artifacts", str(art), "--generated-at", stamp, "--json"],
            "trace": {"write_max": EXPORT_WRITE_MAX, **trace}}


def _prepare_export(base: Path, scenario: str, server: ForkServer) -> tuple[Path, Path]:
    """(artifacts with an index, the target: ``base/pub/site``, as the scenario says)."""
    from tests.unit.indexgen import build

    art, out = base / "art", base / "pub" / "site"
    build(art, "docs", EXPORT_DOCS, dim=8)
    out.parent.mkdir(parents=True)
    if scenario == "empty":
        out.mkdir()
    elif scenario == "replace":
        answer = server.run(_export_job(art, out, OLD_STAMP))
        if answer["exit"] != 0:
            raise RuntimeError(f"the previous export failed: {answer}")
    return art, out


def run_export_kill_harness(base: Path, server: ForkServer, scenario: str = "replace") -> tuple[Tally, list[str]]:
    """``ragtui export`` killed before each of its steps: the target holds the old or the new export, never
    nothing (``new``: nothing or the new export), and the next export leaves nothing else beside it."""
    count = base / "count"
    art, out = _prepare_export(count, scenario, server)
    old = tree(out)
    log = count / "steps.log"
    answer = server.run(_export_job(art, out, NEW_STAMP, log=str(log)))
    if answer["exit"] != 0:
        raise RuntimeError(f"the counting export failed: {answer}")
    steps = log.read_text(encoding="utf-8").splitlines()
    new = tree(out)
    assert new is not None and new != old
    tally = Tally("Export killed (SIGKILL) before each of its steps")
    for n in range(1, len(steps) + 2):
        case = base / f"kill{n}"
        label = f"{scenario}: kill before step {n}" + (f" ({steps[n - 1]})" if n <= len(steps) else " (after the last)")

        def check(case=case, n=n):
            art, out = _prepare_export(case, scenario, server)
            answer = server.run(_export_job(art, out, NEW_STAMP, kill_at=n))
            assert answer["signal"] == (signal.SIGKILL if n <= len(steps) else None), f"child ended {answer}"
            after = tree(out)
            assert after == old or after == new, "the target holds neither the old nor the new export"
            answer = server.run(_export_job(art, out, NEW_STAMP))
            assert answer["exit"] == 0, f"the next export failed: {answer}"
            assert tree(out) == new, "the next export did not give the new export"
            assert sorted(os.listdir(out.parent)) == ["site"], f"left beside it: {sorted(os.listdir(out.parent))}"

        tally.check(label, check)
        shutil.rmtree(case, ignore_errors=True)
    return tally, steps
