"""Memory: the agent leaves the allocator alone; ``ragtui.watch.memory`` really keeps and returns freed heap;
the agent's ``on_idle`` runs once per idle spell.

The allocator checks run in fresh interpreters: the settings are the whole process's and cannot be undone,
so they must not leak into the test process (which is the point of the first test, too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.watch import WAIT, harness_for, write

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
glibc_only = pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION"), reason="the heap knobs are glibc's")

# Watches glibc's own counters: mallinfo2().hblkhd is the bytes in blocks that have their own mmap.
PROBE = """
import ctypes, os, sys

libc = ctypes.CDLL("libc.so.6")
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
BIG = 64 << 20  # above glibc's largest dynamic mmap threshold (32 MiB)

def own_mmap(size=BIG):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    mapped = libc.mallinfo2().hblkhd - before >= size
    libc.free(block)
    return mapped

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
"""


def _python(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", PROBE + script, *args], capture_output=True, text=True,
                            env=env, cwd=REPO, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


@glibc_only
def test_the_agent_leaves_the_allocator_settings_alone(tmp_path):
    """A library class must not change the process's malloc thresholds (glibc cannot restore them)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("alpha\n")
    out = _python("""
from ragtui.watch import WatchAgent
from tests.unit.fakes import HashEmbedder

assert own_mmap(), "glibc's defaults give a 64 MiB block its own mmap"
agent = WatchAgent(sys.argv[1], artifacts=sys.argv[2], embedder=HashEmbedder()).start()
assert agent.wait_idle(60) and agent.last_report is not None and agent.last_report.published
assert agent.stop(60)
print("defaults kept" if own_mmap() else "thresholds changed")
""", str(tmp_path / "docs"), str(tmp_path / "art"))
    assert out == "defaults kept"


@glibc_only
def test_retained_memory_stays_in_the_heap_until_released():
    out = _python("""
import ctypes
from ragtui.watch.memory import release_freed_memory, retain_freed_memory

assert own_mmap()
assert retain_freed_memory() is True
assert not own_mmap(), "a retained 64 MiB block still got its own mmap"
block = libc.malloc(BIG)
ctypes.memset(block, 1, BIG)  # resident now
libc.free(block)
kept = resident()
assert libc.mallinfo2().fordblks >= BIG, "the freed block left the heap"
assert release_freed_memory() is True
returned = kept - resident()
assert returned >= BIG // 2, f"malloc_trim returned only {returned} bytes"
print("ok")
""")
    assert out == "ok"


@glibc_only
def test_a_grown_heap_stays_in_the_agents_thread():
    """``grow_heap`` faults in heap that a thread other than the main one keeps once freed (only when retaining)."""
    out = _python("""
import threading
from ragtui.watch.memory import grow_heap, grow_heap_for, retain_freed_memory

assert grow_heap(128 << 20) is False, "grew the heap of a process that does not keep freed memory"
assert retain_freed_memory() is True
def work():
    before = resident()
    assert grow_heap(240 << 20) is True
    kept = resident() - before
    assert kept >= 120 << 20, f"only {kept} bytes stayed"  # (the last block may go back with its heap)
    assert libc.mallinfo2().fordblks >= 120 << 20, "the grown heap is not free for the next arrays"
    assert grow_heap_for(10 ** 8) is False  # a save's arrays that large are maps of their own: nothing to grow
    print("ok")
thread = threading.Thread(target=work)
thread.start()
thread.join()
""")
    assert out == "ok"


@glibc_only
def test_before_a_save_too_large_for_the_kept_heap_the_freed_heap_is_given_back():
    """Above ``grow_heap_for``'s bound a save's arrays are maps of their own: what was freed since the last save
    would only lie under them, so ``release_before_save`` returns it; below the bound it is kept for the save."""
    out = _python("""
import ctypes
from ragtui.watch.memory import release_before_save, retain_freed_memory

assert release_before_save(10 ** 8) is False, "released for a process that does not keep freed memory"
assert retain_freed_memory() is True
block = libc.malloc(BIG)
ctypes.memset(block, 1, BIG)
libc.free(block)
kept = resident()
assert release_before_save(1000) is False and resident() >= kept - BIG // 8, "a small index's heap was given back"
assert release_before_save(10 ** 8) is True
returned = kept - resident()
assert returned >= BIG // 2, f"only {returned} bytes were given back"
print("ok")
""")
    assert out == "ok"


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


def test_on_idle_runs_once_per_idle_spell(harness):
    cond = threading.Condition()
    ticks = 0
    idle_at: list[int] = []  # the agent's sync count at each on_idle
    write(harness.folder / "a.md", "alpha\n")
    agent, rec = harness.agent(start=False, idle_seconds=0.0, root_check_seconds=0.02,
                               on_idle=lambda: _note(cond, idle_at, agent.stats.syncs))
    tick = agent._tick

    def counted_tick():  # once per turn of the worker's loop
        nonlocal ticks
        with cond:
            ticks += 1
            cond.notify_all()
        return tick()

    agent._tick = counted_tick
    agent.start()
    rec.wait_for(lambda: rec.publishes, "the start reconcile's publish")
    with cond:
        assert cond.wait_for(lambda: idle_at, WAIT), "the idle agent never called on_idle"
        first = ticks
        # Ten more turns of an idle loop, each a chance to call on_idle again: it must not.
        assert cond.wait_for(lambda: ticks >= first + 10, WAIT)
        assert idle_at == [agent.stats.syncs]
    write(harness.folder / "a.md", "alpha edited\n")
    rec.wait_for(lambda: len(rec.publishes) == 2, "the edit's publish")
    with cond:
        assert cond.wait_for(lambda: len(idle_at) == 2, WAIT), "no on_idle after the next sync"
        assert idle_at[1] > idle_at[0]  # a sync came between the two


def _note(cond: threading.Condition, calls: list[int], value: int) -> None:
    with cond:
        calls.append(value)
        cond.notify_all()
