"""Readers and writers at the same time: a searching reader process against a stream of publishes.

Each generation ``g`` is recognisable in every one of its four files: meta.json
names the model ``test-g<g>``, ``n_chunks`` is ``3 + g % 4``, every chunk's
text says ``generation g<g> chunk <i>``, row ``i`` of vectors.f32 is the unit
vector on axis ``(g + i) % DIM``, and the BM25 term ``g<g>`` is in every chunk.
A reader that mixed two generations, or read a file half-written, would see
a disagreement (``problems``), and ``read_index`` would raise.

Run as ``python -m tests.reliability.helpers_concurrency reader INDEX STOPFILE``
(prints ``READY``, then one JSON summary when STOPFILE exists),
``... hold ARTIFACTS ID`` (takes the writer lock, prints ``LOCKED``, keeps it
until stdin closes or it is killed) or ``... race ARTIFACTS START`` (after a
line on stdin, tries 50 publishes at once with another racer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ragtui.core.index_format import ChunkRecord, IndexMeta, fingerprint
from ragtui.core.publish import IndexLock, encode_index, publish
from tests.reliability.helpers import Tally

REPO = Path(__file__).resolve().parents[2]
DIM = 8


def generation_files(index_id: str, g: int) -> dict[str, bytes]:
    n = 3 + g % 4
    records = []
    for i in range(n):
        text = f"generation g{g} chunk {i} " + "filler " * (i + 1)
        records.append(ChunkRecord(f"docs/d{i}.md#0", f"docs/d{i}.md", "file", f"docs/d{i}.md", text,
                                   len(text.split()), fingerprint(text)))
    vectors = np.zeros((n, DIM), dtype=np.float32)
    vectors[np.arange(n), (g + np.arange(n)) % DIM] = 1.0
    meta = IndexMeta(index_id, "2026-01-01T00:00:00Z", n, DIM, f"test-g{g}", "test-tok", 256, 32)
    return encode_index(meta, records, vectors)


def publish_generation(artifacts: Path, index_id: str, g: int) -> None:
    with IndexLock(artifacts, index_id):
        publish(artifacts, index_id, generation_files(index_id, g))


def problems(retriever) -> tuple[int, list[str]]:
    """(the generation read, what in it disagrees with that generation)."""
    data = retriever.data
    g = int(data.meta.embedding_model.removeprefix("test-g"))
    out = []
    n = 3 + g % 4
    if data.meta.n_chunks != n:
        out.append(f"g{g}: n_chunks {data.meta.n_chunks}")
    for i in range(data.meta.n_chunks):
        if not data.records[i].text.startswith(f"generation g{g} chunk {i} "):
            out.append(f"g{g}: chunk {i} says {data.records[i].text[:30]!r}")
        if int(np.argmax(data.vectors[i])) != (g + i) % DIM:
            out.append(f"g{g}: vector {i} belongs to another generation")
    hits = retriever.search(f"g{g}", mode="bm25", k=100)
    if sorted(h.row for h in hits) != list(range(n)) or any(f"g{g} " not in h.text for h in hits):
        out.append(f"g{g}: BM25 for g{g} answered rows {[h.row for h in hits]}")
    if retriever.search(" ".join(f"g{x}" for x in (g - 1, g + 1) if x >= 0), mode="bm25", k=100):
        out.append(f"g{g}: BM25 found another generation's term")
    return g, out


def reader_main(index: str, stop: str) -> None:
    """Search in a loop until ``stop`` exists; print {"reads", "generations", "errors"}."""
    from ragtui.core.retriever import Retriever

    cache = Path(index).parent / ".cache"
    reads, bad, gens, errors = 0, 0, set(), []
    print("READY", flush=True)
    while True:
        stopping = os.path.exists(stop)
        try:
            g, found = problems(Retriever.open(index, cache_dir=cache))
            gens.add(g)
        except Exception as e:  # noqa: BLE001 - every error is a finding
            found = [f"{type(e).__name__}: {e}"]
        reads += 1
        bad += bool(found)
        errors += found
        if stopping or len(errors) > 20:
            break
    print(json.dumps({"reads": reads, "bad_reads": bad, "generations": len(gens), "errors": errors}), flush=True)


def hold_main(artifacts: str, index_id: str) -> None:
    with IndexLock(artifacts, index_id):
        print("LOCKED", flush=True)
        sys.stdin.read()


def spawn(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.helpers_concurrency", *args], cwd=REPO,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def run_reader_vs_writer(base: Path, generations: int = 500) -> tuple[Tally, dict]:
    """One reader process searching while this process publishes ``generations`` generations."""
    art = base / "art"
    publish_generation(art, "docs", 0)
    stop = base / "stop"
    reader = spawn("reader", str(art / "rag" / "docs"), str(stop))
    try:
        assert reader.stdout.readline().strip() == "READY"
        t0 = time.perf_counter()
        for g in range(1, generations + 1):
            publish_generation(art, "docs", g)
        seconds = time.perf_counter() - t0
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=300)
    summary = json.loads(out.strip().splitlines()[-1])
    summary.update(publishes=generations, publish_seconds=round(seconds, 2))
    tally = Tally(f"Reader searching during {generations} publishes")
    tally.tried, tally.passed = summary["reads"], summary["reads"] - summary["bad_reads"]
    tally.failures = summary["errors"]
    return tally, summary


def race_main(artifacts: str, start: int, n: int = 50) -> None:
    """Try ``n`` publishes as fast as possible; print {"published", "refused", "other"}."""
    from ragtui.core.errors import LockedError

    published, refused, other = 0, 0, []
    sys.stdin.readline()  # both racers start when the parent says so
    for g in range(start, start + n):
        try:
            publish_generation(Path(artifacts), "docs", g)
            published += 1
        except LockedError:
            refused += 1
        except Exception as e:  # noqa: BLE001
            other.append(f"{type(e).__name__}: {e}")
    print(json.dumps({"published": published, "refused": refused, "other": other}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "reader":
        reader_main(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "hold":
        hold_main(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "race":
        race_main(sys.argv[2], int(sys.argv[3]))


def run_lock_cases(base: Path, n: int = 10) -> Tally:
    """``n`` times: a live holder refuses a second writer (which changes nothing); ``n`` times: a
    holder killed with SIGKILL leaves a lock the next writer takes at once."""
    import signal

    from ragtui.core.errors import LockedError
    from tests.reliability.helpers import leftovers, make_folder, run_sync, snapshot

    tally = Tally("Second writer refused; lock of a killed writer recovered")
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1)
    run_sync(folder, art)
    for i in range(n):
        make_folder(folder, 2 if i % 2 == 0 else 1)

        def refused():
            before = snapshot(art / "rag" / "docs")
            holder = spawn("hold", str(art), "docs")
            try:
                assert holder.stdout.readline().strip() == "LOCKED"
                try:
                    run_sync(folder, art)
                except LockedError as e:
                    assert f"pid {holder.pid}" in str(e), str(e)
                else:
                    raise AssertionError("the second writer was not refused")
                assert snapshot(art / "rag" / "docs") == before
            finally:
                holder.stdin.close()
                holder.wait(timeout=60)

        def recovered():
            holder = spawn("hold", str(art), "docs")
            assert holder.stdout.readline().strip() == "LOCKED"
            holder.send_signal(signal.SIGKILL)
            assert holder.wait(timeout=60) == -signal.SIGKILL
            run_sync(folder, art)
            assert leftovers(art) == []

        tally.check(f"refused #{i}", refused)
        tally.check(f"recovered #{i}", recovered)
    return tally


def run_races(base: Path, rounds: int = 5) -> Tally:
    """``rounds`` times, two processes try 50 publishes each at once: every attempt publishes or is refused."""
    from tests.reliability.helpers import leftovers, snapshot

    tally = Tally("Two writers racing (each attempt publishes or is refused)")
    for r in range(rounds):
        art = base / f"race{r}" / "art"
        publish_generation(art, "docs", 0)
        racers = [spawn("race", str(art), str(start)) for start in (1000, 2000)]
        for proc in racers:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in racers:
            out, _ = proc.communicate(timeout=300)
            result = json.loads(out.strip().splitlines()[-1])
            tally.tried += result["published"] + result["refused"] + len(result["other"])
            tally.passed += result["published"] + result["refused"]
            tally.failures += result["other"]
        tally.check(f"round {r}: the index validates, nothing left behind",
                    lambda art=art: (snapshot(art / "rag" / "docs"), _no_leftovers(leftovers(art))))
    return tally


def _no_leftovers(found: list[str]) -> None:
    assert found == [], found
