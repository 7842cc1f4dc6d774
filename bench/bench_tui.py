"""The terminal UI at a 100k-chunk index: start-up, keystroke to rendered results, reload after a publish.

    python bench/bench_tui.py [--n 100000] [--queries 40] [--artifacts DIR] [--rebuild] [--profile FILE]
    python bench/bench_tui.py --screenshots assets     # the README's SVG screenshots

The index holds real text (../shared/data, as bench_bm25.py uses; a
generated vocabulary where that is absent) embedded with the default
embedder (wordllama), written once under ``--artifacts`` (default
``bench/out/tui``) and reused. Measured, in one run:

* start: construction of the app to a searchable screen (in-process, cold
  and warm BM25 cache), and the installed ``ragtui`` in tmux from spawn to
  the first screen showing the index (when tmux is there);
* keystroke to rendered: for BM25 and IVF, every prefix of each query typed
  one key at a time with no debounce; from the key's ``Input.Changed`` to
  the results painted. The named peer is ``Retriever.search`` alone on the
  same request (measured inside the same searches): the ratio is the UI's
  overhead on top of the core. Split in two: from the key to the results in
  the widgets, then to their frame. ``--profile FILE`` adds a cProfile of
  the BM25 typing (the app's thread);
* reload: a new generation is published, then from the publish to the
  query re-run and painted (the app polls every second; the agent of
  ``--watch`` triggers the reload at once, as here).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from ragtui.config import Settings  # noqa: E402
from ragtui.core.index.analyzer import analyze  # noqa: E402
from ragtui.core.index.bm25 import BM25Index  # noqa: E402
from ragtui.core.index.bm25_write import build_postings  # noqa: E402
from ragtui.core.index.index_format import BM25  # noqa: E402
from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint  # noqa: E402
from ragtui.core.ingest.publish import IndexLock, encode_index, index_dir, publish, rag_root  # noqa: E402

INDEX_ID = "bench"
CHUNKS_PER_DOC = 10


def texts_for(n: int) -> list[str]:
    try:
        import corpora

        chunks = corpora.large_chunks(n)
    except SystemExit:  # no ../shared/data: words drawn from a fixed vocabulary
        rng = np.random.default_rng(7)
        vocab = [f"w{i}" for i in range(30_000)]
        chunks = [" ".join(rng.choice(vocab, 40)) for _ in range(n)]
    return chunks[:n]


def build(artifacts: Path, n: int, embedder) -> float:
    texts = texts_for(n)
    t0 = time.perf_counter()
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    records = []
    for i, text in enumerate(texts):
        doc = f"bench/doc{i // CHUNKS_PER_DOC:06d}.txt"
        records.append(ChunkRecord(f"{doc}#{i % CHUNKS_PER_DOC}", doc, "file", doc, text, len(text.split()), fingerprint(text)))
    publish_records(artifacts, records, vectors, embedder)
    return time.perf_counter() - t0


def publish_records(artifacts: Path, records, vectors, embedder) -> None:
    meta = IndexMeta(INDEX_ID, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), len(records), embedder.dim,
                     embedder.model, embedder.tokenizer.name, 256, 32)
    postings = build_postings([analyze(r.text) for r in records])
    files = encode_index(meta, records, vectors, postings=postings)
    with IndexLock(artifacts, INDEX_ID):
        # As core.sync does: readers of the new generation find its BM25 arrays already decoded.
        BM25Index.from_postings(postings, meta.k1, meta.b).store(files[BM25], rag_root(artifacts) / ".cache", INDEX_ID)
        publish(artifacts, INDEX_ID, files)


def queries_for() -> list[str]:
    try:
        import corpora

        return [q for q in corpora.scifact()[1] if 12 <= len(q) <= 60]
    except SystemExit:
        return ["w12 w345 w6789", "w1 w22 w333", "w42 w4242"] * 20


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return f"median {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms   (n={len(ms)})"


async def measure(artifacts: Path, queries: list[str], embedder, profile: cProfile.Profile | None = None) -> dict:
    """One app run: start-up, typing in BM25 and IVF, a reload. ``embedder`` is used for publishing;
    ``profile``, when given, runs over the BM25 typing (the app's thread; the search workers' are not in it)."""
    from ragtui.tui.history import QueryHistory
    from ragtui.tui.ragtui_app import create_app

    out: dict = {}
    # The app loads the configured embedder itself (wordllama: about a second, in a worker).
    app = create_app(Settings(artifacts=artifacts, index=INDEX_ID), debounce=0.0, poll_seconds=3600.0,
                     history=QueryHistory(None))
    frames: list[float] = []
    display = app._display

    def recording_display(screen, update):
        # "Rendered" is the first frame handed to the terminal driver after the results went in.
        frames.append(time.perf_counter())
        return display(screen, update)

    app._display = recording_display
    async with app.run_test(size=(120, 40)) as pilot:
        async def until(predicate, timeout=600.0):
            deadline = time.monotonic() + timeout
            while not predicate():
                if time.monotonic() > deadline:
                    raise SystemExit("the app did not get there in time")
                await pilot.pause(0.001)

        await until(lambda: "usable" in app.timings)
        out["usable"] = app.timings["usable"]
        await until(lambda: "vectors" in app.timings)
        out["vectors"] = app.timings["vectors"]
        out["ivf_info"] = app.ivf_info

        for mode in ("bm25", "ivf"):
            app.action_set_mode(mode)
            app.latencies.clear()
            if profile is not None and mode == "bm25":
                profile.enable()
            for query in queries:
                box = app.main.query_box
                box.value = ""
                await until(lambda: app.rendered_seq == app.requested_seq)
                for ch in query:
                    await pilot.press(ch if ch != " " else "space")
                    await until(lambda: app.rendered_seq == app.requested_seq)
            if profile is not None:
                profile.disable()
            out[mode] = [(lat.core, next(f for f in frames if f >= lat.shown) - lat.typed) for lat in app.latencies]
            out[f"{mode}_shown"] = [lat.shown - lat.typed for lat in app.latencies]

        # Reload: publish a new generation (one chunk changed), then let the app re-read it and re-run
        # the query in BM25 (the default mode; an IVF query would wait for the new generation's lists).
        app.action_set_mode("bm25")
        await until(lambda: app.rendered_seq == app.requested_seq)
        r = app.retriever
        records = [r.data.records[i] for i in range(r.meta.n_chunks)]
        changed = records[0].text + " reloaded"
        records[0] = ChunkRecord(records[0].chunk_id, records[0].doc_id, "file", records[0].uri, changed,
                                 records[0].n_tokens + 1, fingerprint(changed))
        vectors = np.array(r.data.vectors)
        publish_records(artifacts, records, vectors, embedder)
        before = app.reloads
        t0 = time.perf_counter()
        app.poll_index()  # what the in-process agent's publish message does; a poll would within a second
        await until(lambda: app.reloads > before and app.rendered_seq == app.requested_seq)
        out["reload"] = time.perf_counter() - t0
        await until(lambda: app.ivf_state == "built")
        out["ivf_rebuild"] = time.perf_counter() - t0
    return out


def tmux_start(artifacts: Path) -> float | None:
    """Seconds from spawning the installed ``ragtui`` in tmux to its screen naming the open index."""
    ragtui = shutil.which("ragtui", path=str(Path(sys.executable).parent)) or shutil.which("ragtui")
    if shutil.which("tmux") is None or ragtui is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "sock")
        env = {**os.environ, "TERM": "xterm-256color", "HOME": tmp, "XDG_STATE_HOME": tmp}
        t0 = time.perf_counter()
        subprocess.run(["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40",
                        ragtui, "--artifacts", str(artifacts), "--index", INDEX_ID], env=env, check=True)
        try:
            while time.perf_counter() - t0 < 120:
                screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
                if f"{INDEX_ID} · " in screen and " chunks" in screen:
                    return time.perf_counter() - t0
                time.sleep(0.01)
            return None
        finally:
            subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)


async def _screenshots(artifacts: Path, out: Path, size: tuple[int, int]) -> None:
    from ragtui.tui.history import QueryHistory
    from ragtui.tui.ragtui_app import create_app
    from ragtui.tui.screens.compare import CompareScreen

    app = create_app(Settings(artifacts=artifacts), debounce=0.0, history=QueryHistory(None))
    async with app.run_test(size=size) as pilot:
        async def until(predicate):
            while not predicate():
                await pilot.pause(0.01)

        await until(lambda: app.ivf_state == "built")
        await pilot.press(*"keep an index fresh")
        await until(lambda: app.rendered_seq == app.requested_seq)
        await pilot.press("escape", "down")
        await until(lambda: app.main.detail.citation is not None)
        await pilot.pause(0.2)
        (out / "tui-main.svg").write_text(app.export_screenshot(title="ragtui"))
        await pilot.press("v")
        await until(lambda: isinstance(app.screen, CompareScreen) and app.screen.outcome is not None)
        await pilot.pause(0.2)
        (out / "tui-compare.svg").write_text(app.export_screenshot(title="ragtui: compare modes"))


def screenshots(out: Path) -> None:
    """The README's screenshots: the run command's index (assets/demo, default settings), searched at 120×32."""
    from ragtui.core.embedders import make_embedder
    from ragtui.core.ingest.sync import sync

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "demo"
        shutil.copytree(HERE.parent / "assets" / "demo", folder)
        sync(folder, artifacts=Path(tmp) / "artifacts", embedder=make_embedder("wordllama"))
        os.environ["HOME"] = tmp  # no history or config of the person running this
        asyncio.run(_screenshots(Path(tmp) / "artifacts", out, (120, 32)))
    print(f"wrote {out / 'tui-main.svg'} and {out / 'tui-compare.svg'}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="chunks in the index (default 100000)")
    p.add_argument("--queries", type=int, default=40, help="queries typed per mode (default 40)")
    p.add_argument("--artifacts", type=Path, default=HERE / "out" / "tui", help="where the index is kept")
    p.add_argument("--rebuild", action="store_true", help="build the index even if it is there")
    p.add_argument("--screenshots", type=Path, metavar="DIR", help="only write the README's screenshots to DIR")
    p.add_argument("--profile", type=Path, metavar="FILE",
                   help="cProfile the BM25 typing of the warm run into FILE (pstats) and print its top functions "
                        "(the BM25 latencies then include the profiler's own cost; IVF's do not)")
    args = p.parse_args(argv)
    if args.screenshots:
        return screenshots(args.screenshots)

    from ragtui.core.embedders import make_embedder

    embedder = make_embedder("wordllama")
    path = index_dir(args.artifacts, INDEX_ID)
    if args.rebuild or not path.exists():
        shutil.rmtree(args.artifacts / "rag", ignore_errors=True)
        print(f"building a {args.n:,}-chunk index under {args.artifacts} ...", flush=True)
        print(f"  built in {build(args.artifacts, args.n, embedder):.1f} s")
    shutil.rmtree(args.artifacts / "rag" / ".cache", ignore_errors=True)  # the first start is a cold one

    queries = queries_for()[: args.queries]
    cold = asyncio.run(measure(args.artifacts, queries[:2], embedder))
    profile = cProfile.Profile() if args.profile else None
    warm = asyncio.run(measure(args.artifacts, queries, embedder, profile))
    spawn = tmux_start(args.artifacts)

    n = warm["ivf_info"]
    print(f"\nragtui TUI, {args.n:,} chunks, {embedder.model} ({embedder.dim}d), "
          f"IVF nlist {n.nlist} nprobe {n.nprobe}; {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"start → usable screen (in-process)  cold cache {cold['usable'] * 1000:7.0f} ms   "
          f"warm {warm['usable'] * 1000:7.0f} ms")
    if spawn is not None:
        print(f"start → usable screen (ragtui in tmux, process spawn included)  {spawn * 1000:7.0f} ms")
    print(f"vector modes ready (embedder loaded + IVF lists built, in the background)  cold {cold['vectors']:.2f} s   "
          f"warm {warm['vectors']:.2f} s")
    for mode in ("bm25", "ivf"):
        rows = warm[mode]
        total, core = [t for _, t in rows], [c for c, _ in rows]
        ratio = statistics.median(total) / statistics.median(core)
        print(f"keystroke → rendered  {mode:4}  {summary(total)}")
        print(f"  peer: Retriever.search alone    {summary(core)}   UI/core {ratio:.1f}x")
        print(f"  of which key → results in the widgets (search, worker hand-off, filling)  "
              f"{summary(warm[f'{mode}_shown'])}")
    if profile is not None:
        profile.dump_stats(args.profile)
        print(f"\nprofile of the BM25 typing (app thread) in {args.profile}; top functions by cumulative time:")
        pstats.Stats(str(args.profile)).sort_stats("cumulative").print_stats(25)
    print(f"reload after a publish → BM25 query re-run and painted  {warm['reload'] * 1000:7.0f} ms "
          f"(+ up to 1 s until the poll sees it); IVF lists of the new generation ready after "
          f"{warm['ivf_rebuild']:.1f} s")


if __name__ == "__main__":
    main()
