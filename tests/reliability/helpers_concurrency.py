"""Readers and writers at the same time: a searching reader against a stream of publishes.

Each generation ``g`` is recognisable in every one of its four files: meta.json
names the tokenizer ``test-tok-g<g>``, ``n_chunks`` is ``3 + g % 4``, every
chunk's text says ``generation g<g> chunk <i>``, row ``i`` of vectors.f32 is
the unit vector on axis ``(g + i) % DIM``, and the BM25 term ``g<g>`` is in
every chunk. A reader that mixed two generations, or read a file half-written,
would see a disagreement (``problems``), and ``read_index`` would raise. The
embedding model is the same in every generation (``MODEL``), so one embedder
(``QueryEmbedder``) serves all of them and all four modes can be searched.

Two kinds of case: ``check_reader_vs_writer`` (a reader process searching all
four modes while this process publishes) and ``check_reload_mid_search`` (in this
process, a reload injected at each line a search executes in ragtui's code,
deterministically: no timing decides where it lands).

Run as ``python -m tests.reliability.helpers_concurrency reader INDEX STOPFILE``
(prints ``READY``, then one JSON summary when STOPFILE exists),
``... hold ARTIFACTS ID`` (takes the writer lock, prints ``LOCKED``, keeps it
until stdin closes or it is killed) or ``... race ARTIFACTS START`` (after a
line on stdin, tries 50 publishes at once with another racer).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import numpy as np

from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint
from ragtui.core.ingest.publish import IndexLock, encode_index, publish
from tests.reliability.cases import Case

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


def check_reload_mid_search(mode: str, step: int, base: Path) -> int:
    """A ``mode`` search with a publish and ``reload()`` injected before its 1st, (1+step)th, ... line in
    ragtui's code, up to its last: each must answer exactly what a search of the old generation alone, or
    of the new one alone, answers. Each injection publishes a new generation; returns how many ran.

    The reload runs on another thread, as the TUI's does, while the search waits at that line; a reload
    that cannot finish while a search is paused (it waits for a lock the search holds) is a failure too.
    The line count of a search comes from the same search, uninjected, on a Retriever that opened the
    same generation separately (just as cold), so every injection lands inside the search.
    """
    from ragtui.core.search.retriever import Retriever

    art = base / "art"
    index = art / "rag" / "docs"
    g = 0
    publish_generation(art, "docs", g)
    retriever = Retriever.open(index, embedder=QueryEmbedder())
    lines: list[int] = []
    point, injected, missed = 1, 0, 0
    while True:
        before = retriever.data
        query = query_for(mode, generation(before))
        # Searched only through twins, so that `retriever` meets each generation as cold as they do.
        twin = Retriever.open(index, embedder=QueryEmbedder())
        _, n_lines = _lines_in_ragtui(partial(twin.search, query, mode=mode, k=100))
        old_hits = twin.search(query, mode=mode, k=100)
        if point > n_lines:
            break
        lines.append(n_lines)
        g += 1
        reloader = threading.Thread(target=_publish_and_reload, args=(art, g, retriever), daemon=True)
        blocked: list[bool] = []

        def reload(reloader=reloader, blocked=blocked):
            reloader.start()
            reloader.join(RELOAD_WAIT)  # not timing the pass: only a reload stuck behind the search waits
            blocked.append(reloader.is_alive())

        hits, _ = _lines_in_ragtui(partial(retriever.search, query, mode=mode, k=100), (point, reload))
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
        assert not blocked[0], f"{where}: the reload waited for the paused search"
        assert hits in expected, f"{where}: {[(h.row, h.text[:14], h.score) for h in hits[:3]]}"
        injected += 1
        point += step
    assert missed == 0, f"{missed} injections landed after the search's last line"
    assert lines and injected >= min(lines) // step, f"{injected} injections into searches of {lines} lines"
    return injected


def reload_cases(size: str = "ci") -> list[Case]:
    """One case per mode: reloads injected before every line (CI: every 5th) of ragtui's code a search runs."""
    step = 5 if size == "ci" else 1
    return [Case(mode, functools.partial(check_reload_mid_search, mode, step)) for mode in MODES]


RELOAD_WAIT = 60.0


def _publish_and_reload(art: Path, g: int, retriever) -> None:
    publish_generation(art, "docs", g)
    assert retriever.reload()


def hold_main(artifacts: str, index_id: str) -> None:
    with IndexLock(artifacts, index_id):
        print("LOCKED", flush=True)
        sys.stdin.read()


def spawn(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.helpers_concurrency", *args], cwd=REPO,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def check_reader_vs_writer(generations: int, base: Path) -> int:
    """One reader process searching all four modes while this process publishes ``generations``
    generations: every read is one whole generation. Returns the number of reads."""
    art = base / "art"
    publish_generation(art, "docs", 0)
    stop = base / "stop"
    reader = spawn("reader", str(art / "rag" / "docs"), str(stop))
    try:
        assert reader.stdout.readline().strip() == "READY"
        for g in range(1, generations + 1):
            publish_generation(art, "docs", g)
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=300)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["bad_reads"] == 0 and summary["errors"] == [], summary
    assert summary["reads"] >= 1, summary
    return summary["reads"]


def reader_cases(size: str = "ci") -> list[Case]:
    return [Case("500-publishes", functools.partial(check_reader_vs_writer, 500))]


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


def _indexed(base: Path, i: int) -> tuple[Path, Path]:
    from tests.reliability.helpers import make_folder, run_sync

    folder, art = base / "docs", base / "art"
    make_folder(folder, 1)
    run_sync(folder, art)
    make_folder(folder, 2 if i % 2 == 0 else 1)
    return folder, art


def check_refused(i: int, base: Path) -> None:
    """A live holder of the lock refuses a second writer (library and CLI: exit 3, one line naming
    the holder), which changes nothing; once the holder is gone the lock is free."""
    from ragtui.core.errors import LockedError
    from tests.helpers.cli import one_error_line, run
    from tests.reliability.helpers import run_sync, snapshot

    folder, art = _indexed(base, i)
    before = snapshot(art / "rag" / "docs")
    holder = spawn("hold", str(art), "docs")
    try:
        assert holder.stdout.readline().strip() == "LOCKED"
        try:
            run_sync(folder, art)
        except LockedError as e:
            assert f"being written by another process (pid {holder.pid})" in str(e), str(e)
        else:
            raise AssertionError("the second writer was not refused")
        r = run("ingest", str(folder), "--artifacts", str(art))
        assert r.code == 3 and one_error_line(r.err) and f"pid {holder.pid}" in r.err, r.err
        assert snapshot(art / "rag" / "docs") == before
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    # The lock is free again: the next sync runs (and publishes when the folder changed).
    assert run_sync(folder, art).published == (i % 2 == 0)


def check_recovered(i: int, base: Path) -> None:
    """A holder killed with SIGKILL leaves a lock file the next writer takes at once."""
    import signal

    from tests.reliability.helpers import leftovers, run_sync

    folder, art = _indexed(base, i)
    holder = spawn("hold", str(art), "docs")
    assert holder.stdout.readline().strip() == "LOCKED"
    holder.send_signal(signal.SIGKILL)
    assert holder.wait(timeout=60) == -signal.SIGKILL
    lock = art / "rag" / ".locks" / "docs.lock"
    assert lock.exists()  # the file stays; the kernel dropped the flock with its holder
    run_sync(folder, art)
    assert leftovers(art) == []
    assert lock.read_bytes() == b""  # nothing is ever written into it


def lock_cases(size: str = "ci") -> list[Case]:
    n = 1 if size == "ci" else 10
    return [Case(f"{what}-{i}", functools.partial(fn, i)) for i in range(n)
            for what, fn in (("refused", check_refused), ("recovered", check_recovered))]


def check_race(base: Path) -> int:
    """Two processes try 50 publishes each at once: every attempt publishes or is refused, never a third
    outcome; the last publish validates and nothing is left behind. Returns the number of attempts."""
    from tests.reliability.helpers import leftovers, snapshot

    art = base / "art"
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
    assert sum(r["published"] for r in results) >= 1, results
    assert sum(r["published"] + r["refused"] for r in results) == 2 * 50, results
    snapshot(art / "rag" / "docs")  # the last publish is whole: it validates
    assert leftovers(art) == []
    return 2 * 50


def race_cases(size: str = "ci") -> list[Case]:
    return [Case(f"round-{r}", check_race) for r in range(1 if size == "ci" else 10)]
