"""Readers and writers at the same time: a searching reader against a stream of publishes.

Each generation ``g`` is recognisable in every one of its four files: meta.json
names the tokenizer ``test-tok-g<g>``, ``n_chunks`` is ``3 + g % 4``, every
chunk's text says ``generation g<g> chunk <i>``, row ``i`` of vectors.f32 is
the unit vector on axis ``(g + i) % DIM``, and the BM25 term ``g<g>`` is in
every chunk. A reader that mixed two generations, or read a file half-written,
would see a disagreement (``problems``), and ``read_index`` would raise. The
embedding model is the same in every generation (``MODEL``), so one embedder
(``QueryEmbedder``) serves all of them and all four modes can be searched.

Two runners: ``run_reader_vs_writer`` (a reader process searching all four
modes while this process publishes) and ``run_reload_mid_search`` (in this
process, a reload injected at each line a search executes in ragtui's code,
deterministically: no timing decides where it lands).

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
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np

from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint
from ragtui.core.ingest.publish import IndexLock, encode_index, publish
from tests.reliability.helpers import Tally

REPO = Path(__file__).resolve().parents[2]
PACKAGE = str(REPO / "ragtui") + os.sep
DIM = 8
MODEL = "test-gen"
MODES = ("flat", "ivf", "bm25", "hybrid")
QUERY_VECTOR = (np.arange(1, DIM + 1, dtype=np.float32) / np.linalg.norm(np.arange(1, DIM + 1))).astype(np.float32)
"""Distinct components: the score of row i (the unit vector on axis (g + i) % DIM) tells its generation."""


class QueryEmbedder:
    """The embedder of every generation: any text embeds to ``QUERY_VECTOR``."""

    model, dim = MODEL, DIM

    def embed(self, texts):
        return np.tile(QUERY_VECTOR, (len(texts), 1))


def generation_files(index_id: str, g: int) -> dict[str, bytes]:
    n = 3 + g % 4
    records = []
    for i in range(n):
        text = f"generation g{g} chunk {i} " + "filler " * (i + 1)
        records.append(ChunkRecord(f"docs/d{i}.md#0", f"docs/d{i}.md", "file", f"docs/d{i}.md", text,
                                   len(text.split()), fingerprint(text)))
    vectors = np.zeros((n, DIM), dtype=np.float32)
    vectors[np.arange(n), (g + np.arange(n)) % DIM] = 1.0
    meta = IndexMeta(index_id, "2026-01-01T00:00:00Z", n, DIM, MODEL, f"test-tok-g{g}", 256, 32)
    return encode_index(meta, records, vectors)


def publish_generation(artifacts: Path, index_id: str, g: int) -> None:
    with IndexLock(artifacts, index_id):
        publish(artifacts, index_id, generation_files(index_id, g))


def generation(data) -> int:
    return int(data.meta.tokenizer.removeprefix("test-tok-g"))


def query_for(mode: str, g: int):
    """A query every generation answers: a vector for flat and ivf, text naming ``g`` for bm25 and hybrid."""
    return QUERY_VECTOR if mode in ("flat", "ivf") else f"g{g} generation filler"


def searched(data, mode: str, query) -> list:
    """The hits of generation ``data`` alone: a Retriever that holds it and never reloads."""
    from ragtui.core.search.retriever import Retriever

    return Retriever(data, embedder=QueryEmbedder()).search(query, mode=mode, k=100)


def hit_problems(g: int, mode: str, hits) -> list[str]:
    """What in ``hits`` does not belong to generation ``g``."""
    n, out = 3 + g % 4, []
    for h in hits:
        if not (0 <= h.row < n and h.text.startswith(f"generation g{g} chunk {h.row} ")):
            out.append(f"g{g} {mode}: row {h.row} says {h.text[:30]!r}")
        elif mode in ("flat", "ivf") and abs(h.score - float(QUERY_VECTOR[(g + h.row) % DIM])) > 1e-5:
            out.append(f"g{g} {mode}: row {h.row} scored {h.score}, a vector of another generation")
    return out


def problems(retriever) -> tuple[int, list[str]]:
    """(the generation read, what in it disagrees with that generation), searching all four modes."""
    data = retriever.data
    g = generation(data)
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
    for mode in MODES:
        query = query_for(mode, g)
        hits = retriever.search(query, mode=mode, k=100)
        out += hit_problems(g, mode, hits)
        if mode != "bm25" and sorted(h.row for h in hits) != list(range(n)):
            out.append(f"g{g} {mode}: answered rows {[h.row for h in hits]} of {n}")
        if hits != searched(data, mode, query):
            out.append(f"g{g} {mode}: hits differ from a search of generation g{g} alone")
    return g, out


def reader_main(index: str, stop: str) -> None:
    """Search all four modes in a loop until ``stop`` exists; print {"reads", "generations", "errors"}.

    Reads alternate between a fresh ``Retriever.open`` and ``reload()`` of one
    long-lived Retriever (what the TUI does when the index changes)."""
    from ragtui.core.search.retriever import Retriever

    cache = Path(index).parent / ".cache"
    reads, bad, gens, errors = 0, 0, set(), []
    kept = None
    print("READY", flush=True)
    while True:
        stopping = os.path.exists(stop)
        try:
            if reads % 2 == 0 or kept is None:
                retriever = Retriever.open(index, cache_dir=cache, embedder=QueryEmbedder())
                kept = kept or retriever
            else:
                kept.reload()
                retriever = kept
            g, found = problems(retriever)
            gens.add(g)
        except Exception as e:  # noqa: BLE001 - every error is a finding
            found = [f"{type(e).__name__}: {e}"]
        reads += 1
        bad += bool(found)
        errors += found
        if stopping or len(errors) > 20:
            break
    print(json.dumps({"reads": reads, "bad_reads": bad, "generations": len(gens), "errors": errors}), flush=True)


def _lines_in_ragtui(fn, at_line=None):
    """Run ``fn()`` counting the lines it executes in ragtui's own code; call ``at_line()`` just before
    line number ``at`` (a pair (at, at_line)). Returns (fn's result, lines executed)."""
    count = 0
    at, action = at_line or (0, None)

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None  # no line events for this frame; calls it makes are still seen
        if event == "line":
            count += 1
            if count == at:
                action()  # runs untraced: CPython suspends tracing inside a trace function
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn()
    finally:
        sys.settrace(previous)
    return result, count


def run_reload_mid_search(base: Path, step: int = 1, modes=MODES) -> tuple[Tally, dict]:
    """For each mode, a search with a publish and ``reload()`` injected before its 1st, (1+step)th, ...
    line in ragtui's code, up to its last: each must answer exactly what a search of the old generation
    alone, or of the new one alone, answers. Each case publishes a new generation.

    The reload runs on another thread, as the TUI's does, while the search waits at that line; a reload
    that cannot finish while a search is paused (it waits for a lock the search holds) is a failure too.
    The line count of a case comes from the same search, uninjected, on a Retriever that opened the
    same generation separately (just as cold), so every injection lands inside the search.
    """
    from ragtui.core.search.retriever import Retriever

    tally = Tally("Reloads injected mid-search (before each line of ragtui's code a search runs)")
    art = base / "art"
    index = art / "rag" / "docs"
    g = 0
    publish_generation(art, "docs", g)
    retriever = Retriever.open(index, embedder=QueryEmbedder())
    lines: dict[str, list[int]] = {m: [] for m in modes}
    missed = 0
    for mode in modes:
        point = 1
        while True:
            before = retriever.data
            query = query_for(mode, generation(before))
            # Searched only through twins, so that `retriever` meets each generation as cold as they do.
            twin = Retriever.open(index, embedder=QueryEmbedder())
            _, n_lines = _lines_in_ragtui(partial(twin.search, query, mode=mode, k=100))
            old_hits = twin.search(query, mode=mode, k=100)
            if point > n_lines:
                break
            lines[mode].append(n_lines)
            g += 1
            reloader = threading.Thread(target=_publish_and_reload, args=(art, g, retriever), daemon=True)
            blocked = []

            def reload(reloader=reloader, blocked=blocked):
                reloader.start()
                reloader.join(RELOAD_WAIT)  # not timing the pass: only a reload stuck behind the search waits
                blocked.append(reloader.is_alive())

            try:
                hits, _ = _lines_in_ragtui(partial(retriever.search, query, mode=mode, k=100), (point, reload))
            except Exception as e:  # noqa: BLE001 - an error is a finding
                hits = f"{type(e).__name__}: {e}"
            if not blocked:
                missed += 1  # the search ran fewer lines than counted: not a mid-search case
                reloader.start()
            reloader.join()
            if not blocked:
                continue
            twin = Retriever.open(index, embedder=QueryEmbedder())
            assert twin.data.generation == retriever.data.generation != before.generation
            expected = (old_hits, twin.search(query, mode=mode, k=100))
            where = f"{mode}, reload before line {point} of {n_lines}"
            if blocked[0]:
                tally.case(False, f"{where}: the reload waited for the paused search (the rest of {mode} not run)")
                break  # each further case would wait RELOAD_WAIT again
            else:
                tally.case(isinstance(hits, list) and hits in expected,
                           f"{where}: {hits if isinstance(hits, str) else [(h.row, h.text[:14], h.score) for h in hits[:3]]}")
            point += step
    notes = {"lines": {m: (min(v), max(v)) for m, v in lines.items() if v}, "missed": missed, "publishes": g}
    return tally, notes


RELOAD_WAIT = 60.0


def _publish_and_reload(art: Path, g: int, retriever) -> None:
    publish_generation(art, "docs", g)
    assert retriever.reload()


def run_reader_all_modes(base: Path, generations: int = 500, step: int = 1) -> tuple[Tally, str]:
    """The README row: the reader process through ``generations`` publishes, plus the injected reloads."""
    reader, s = run_reader_vs_writer(base / "reader", generations)
    injected, notes = run_reload_mid_search(base / "injected", step)
    tally = Tally("Reader searching during publishes, all four modes, with reloads injected mid-search")
    tally.merge(reader).merge(injected)
    spans = ", ".join(f"{m} {lo}-{hi}" for m, (lo, hi) in notes["lines"].items())
    return tally, (f"{s['reads']} reads x 4 modes by a reader process over {s['publishes']} publishes "
                   f"({s['generations']} generations seen); {injected.tried} searches with a publish + reload "
                   f"injected before {'every' if step == 1 else f'every {step}th'} line of ragtui's code a search "
                   f"runs ({spans} lines)")


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
