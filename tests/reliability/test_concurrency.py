"""Concurrency: a reader searching all four modes through 500 publishes, and with reloads injected
mid-search; two writers; a lock left by a killed writer."""

from __future__ import annotations

import json
import signal

import pytest

from ragtui.core.errors import LockedError
from tests.reliability.helpers import leftovers, make_folder, one_clear_line, ragtui, run_sync, snapshot
from tests.reliability.helpers_concurrency import (
    MODES,
    publish_generation,
    run_reader_vs_writer,
    run_reload_mid_search,
    spawn,
)

GENERATIONS = 500


def test_reader_sees_one_whole_generation_through_500_publishes(tmp_path):
    """The reader process checks every read in all four modes against that generation alone."""
    tally, summary = run_reader_vs_writer(tmp_path, GENERATIONS)
    assert tally.failures == [], summary
    assert summary["reads"] >= 1 and summary["publishes"] == GENERATIONS


def test_a_reload_injected_mid_search_never_mixes_generations(tmp_path):
    """Before every 5th line of ragtui's code that a flat, ivf, bm25 or hybrid search runs, another thread
    publishes and reloads: each search answers as its old generation alone or its new one alone would."""
    tally, notes = run_reload_mid_search(tmp_path, step=5)
    assert tally.failures == [], notes
    assert notes["missed"] == 0 and set(notes["lines"]) == set(MODES)
    assert tally.tried == notes["publishes"] >= sum(lo // 5 for lo, _ in notes["lines"].values())


@pytest.fixture
def indexed(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    make_folder(folder, 1)
    run_sync(folder, art)
    make_folder(folder, 2)
    return folder, art


def _holder(art):
    holder = spawn("hold", str(art), "docs")
    assert holder.stdout.readline().strip() == "LOCKED"
    return holder


def test_a_second_writer_is_refused_and_changes_nothing(indexed):
    folder, art = indexed
    before = snapshot(art / "rag" / "docs")
    holder = _holder(art)
    try:
        with pytest.raises(LockedError, match=f"being written by another process \\(pid {holder.pid}\\)"):
            run_sync(folder, art)
        r = ragtui("ingest", str(folder), "--artifacts", str(art))
        assert r.returncode == 3 and one_clear_line(r.stderr), r.stderr
        assert f"pid {holder.pid}" in r.stderr
        assert snapshot(art / "rag" / "docs") == before
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    assert run_sync(folder, art).published  # the lock is free again


def test_a_lock_left_by_a_killed_writer_is_recovered(indexed):
    folder, art = indexed
    holder = _holder(art)
    holder.send_signal(signal.SIGKILL)
    assert holder.wait(timeout=60) == -signal.SIGKILL
    lock = art / "rag" / ".locks" / "docs.lock"
    assert lock.exists()  # the file stays; the kernel dropped the flock with its holder
    assert run_sync(folder, art).published
    assert leftovers(art) == []
    assert lock.read_bytes() == b""  # nothing is ever written into it


def test_two_writers_racing(tmp_path):
    """Two processes publishing at once: each publish either succeeds or is refused, never a third outcome."""
    art = tmp_path / "art"
    publish_generation(art, "docs", 0)
    racers = [spawn("race", str(art), str(start)) for start in (1000, 2000)]
    for proc in racers:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in racers:
        out, _ = proc.communicate(timeout=300)
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["other"] == [] for r in results), results
    assert sum(r["published"] for r in results) >= 1
    assert sum(r["published"] + r["refused"] for r in results) == 2 * 50
    snapshot(art / "rag" / "docs")  # the last publish is whole: it validates
    assert leftovers(art) == []
