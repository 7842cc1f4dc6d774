"""The kill harness: SIGKILL a publishing writer before each of its filesystem steps in turn.

A realistic publish (scenario ``update``): a folder of sixteen documents is
indexed, then two are changed, one added and one deleted, and ``sync`` runs
again in a child process (helpers_child) that kills itself before step N —
for every N from 1 to one past the last step. Scenario ``first`` is the
first publish of a new index (the previous state is "no index"); ``adopt``
replaces an index another tool wrote as a plain directory; ``watch`` is ``update`` by the watch agent's
writer, which writes the overlay of the generation it splices from before the publish. After each kill:

* the index opens and validates (``read_index``) and is byte for byte the
  previous generation or the next one (meta.json compared without created_at);
* an overlay beside it (``watch``) is either ignored by readers or, read
  through it, the next generation's docs.jsonl and vectors.f32 byte for byte;
* the lock the dead writer held is free, and a following ``sync`` completes,
  publishes exactly the next generation and leaves nothing behind
  (no ``*.tmp``, no stale generation, no journal).

``export_kill_cases`` does the same for ``ragtui export`` (scenarios
``new``, ``empty``, ``replace``): after each kill the target holds the old or
the new export, never nothing, and the next export gives the new one and
leaves nothing beside it (no ``.site.export-<pid>``, no ``.site.old-<pid>``).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
from pathlib import Path

from ragtui.core.errors import IndexMissingError
from tests.reliability.cases import Case
from tests.reliability.helpers import MAX_TOKENS, OVERLAP, doc_text, leftovers, make_folder, run_sync, snapshot
from tests.reliability.helpers_child import ForkServer

WRITE_MAX = 2048
"""Bytes per write in the child: files are written in several short writes, each a kill point."""


N_DOCS = 16
SCENARIOS = ("update", "first", "adopt", "watch")


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


def _job(folder: Path, art: Path, scenario: str = "update", **trace) -> dict:
    return {"action": "sync", "folder": str(folder), "artifacts": str(art), "max_tokens": MAX_TOKENS,
            "overlap": OVERLAP, "overlay": scenario == "watch", "trace": {"write_max": WRITE_MAX, **trace}}


def count_steps(server: ForkServer, base: Path, scenario: str = "update") -> tuple[list[str], dict | None, dict]:
    """(the steps of one complete publishing sync, the old snapshot or None, the new snapshot)."""
    folder, art = _prepare(base, scenario)
    old = _snapshot_or_none(art / "rag" / "docs")
    log = base / "steps.log"
    job = {**_job(folder, art, scenario, log=str(log)), "stderr": str(base / "stderr")}
    answer = server.run(job)
    if answer["exit"] != 0:
        raise RuntimeError(f"the counting run failed: {answer}: {(base / 'stderr').read_text()}")
    steps = log.read_text(encoding="utf-8").splitlines()
    return steps, old, snapshot(art / "rag" / "docs")


def _counted(scenario: str) -> tuple[list[str], dict | None, dict]:
    from tests.reliability.cases import fork_server, once

    return once(("kill-count", scenario), lambda base: count_steps(fork_server(), base, scenario))


def _step_id(scenario: str, n: int, steps: list[str]) -> str:
    # By number, not by the call's name: the writer's write-behind thread interleaves its calls with the main
    # thread's, so which call is n-th differs from one process to the next, while the count does not (an id
    # must name the same test in every process, pytest-xdist's workers included).
    return f"{scenario}-{n}" if n <= len(steps) else f"{scenario}-after-the-last"


def kill_cases(size: str = "ci", scenarios=SCENARIOS, every: int = 1) -> list[Case]:
    """One case per kill point: before each step of a publish (1 .. the last), and after the last.

    The steps are counted by one traced publish of the scenario; ids read ``update-17``."""
    out = []
    for scenario in scenarios:
        steps = _counted(scenario)[0]
        points = list(range(1, len(steps) + 2, every))
        if points[-1] != len(steps) + 1:
            points.append(len(steps) + 1)
        out += [Case(_step_id(scenario, n, steps), functools.partial(check_kill, scenario, n)) for n in points]
    return out


def check_kill(scenario: str, n: int, case: Path) -> None:
    """Kill the publishing child before step ``n``; then old or new index, and the next sync completes."""
    from tests.reliability.cases import fork_server

    server = fork_server()
    steps, old, new = _counted(scenario)
    folder, art = _prepare(case, scenario)
    answer = server.run(_job(folder, art, scenario, kill_at=n))
    expect_signal = signal.SIGKILL if n <= len(steps) else None
    assert answer["signal"] == expect_signal, f"child ended {answer}"
    after_kill = _snapshot_or_none(art / "rag" / "docs")
    assert after_kill in (old, new), "the index is neither the old nor the new generation"
    if scenario == "watch":
        _check_overlay(art / "rag" / "docs", new)
    report = run_sync(folder, art)
    assert snapshot(art / "rag" / "docs") == new, "the next sync did not give the new generation"
    assert leftovers(art) == [], f"left behind: {leftovers(art)}"
    # Only what the dead writer had not embedded (or journaled) is embedded again.
    full = _embedded_by_full_run(scenario)
    assert report.chunks_embedded <= full, f"re-embedded {report.chunks_embedded} chunks, more than a full run's {full}"


def _check_overlay(link: Path, new: dict[str, bytes]) -> None:
    """A reader of ``link`` that layers an overlay reads exactly the next generation ``new`` through it."""
    from ragtui.core.search.overlaid import OverlaidData
    from ragtui.core.search.retriever import Retriever

    view = Retriever.open(link).data
    if isinstance(view, OverlaidData):
        assert view.records.raw_lines(0, view.n_chunks) == new["docs.jsonl"], "the overlay's rows are not the next"
        assert view.vectors.take(range(view.n_chunks)).tobytes() == new["vectors.f32"], "nor are its vectors"


def _embedded_by_full_run(scenario: str) -> int:
    """Chunks a plain (unkilled) sync of the scenario embeds."""
    from tests.reliability.cases import once

    return once(("kill-full", scenario), lambda base: run_sync(*_prepare(base, scenario)).chunks_embedded)


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


def _export_counted(scenario: str) -> tuple[list[str], dict | None, dict]:
    from tests.reliability.cases import fork_server, once

    def count(base: Path):
        server = fork_server()
        art, out = _prepare_export(base, scenario, server)
        old = tree(out)
        log = base / "steps.log"
        answer = server.run(_export_job(art, out, NEW_STAMP, log=str(log)))
        if answer["exit"] != 0:
            raise RuntimeError(f"the counting export failed: {answer}")
        new = tree(out)
        assert new is not None and new != old, "the counting export did not change the target"
        return log.read_text(encoding="utf-8").splitlines(), old, new

    return once(("export-count", scenario), count)


def export_kill_cases(size: str = "ci", scenarios=EXPORT_SCENARIOS) -> list[Case]:
    """``ragtui export`` killed before each of its steps, and after the last: one case per kill point."""
    out = []
    for scenario in scenarios:
        steps = _export_counted(scenario)[0]
        out += [Case(_step_id(scenario, n, steps), functools.partial(check_export_kill, scenario, n))
                for n in range(1, len(steps) + 2)]
    return out


def check_export_kill(scenario: str, n: int, case: Path) -> None:
    """The target holds the old or the new export, never nothing (``new``: nothing or the new export), and
    the next export leaves nothing else beside it."""
    from tests.reliability.cases import fork_server

    server = fork_server()
    steps, old, new = _export_counted(scenario)
    art, out = _prepare_export(case, scenario, server)
    answer = server.run(_export_job(art, out, NEW_STAMP, kill_at=n))
    assert answer["signal"] == (signal.SIGKILL if n <= len(steps) else None), f"child ended {answer}"
    after = tree(out)
    assert after == old or after == new, "the target holds neither the old nor the new export"
    answer = server.run(_export_job(art, out, NEW_STAMP))
    assert answer["exit"] == 0, f"the next export failed: {answer}"
    assert tree(out) == new, "the next export did not give the new export"
    assert sorted(os.listdir(out.parent)) == ["site"], f"left beside it: {sorted(os.listdir(out.parent))}"
