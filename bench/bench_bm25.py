"""BM25: ragtui against tantivy and bm25s on the same tokens, in the same run.

    nice -n 10 python bench/bench_bm25.py [--quick] [--rounds N]

Every side gets the same analyzer output (ragtui's), k1=1.2, b=0.75, the
Lucene idf. bm25s's "lucene" variant leaves out the constant (k1+1) factor,
so its scores are multiplied by (k1+1) before they are compared. tantivy
(bench/peer_tantivy.py: in RAM, one indexing thread, an OR of term queries)
stores document lengths as one-byte norms, so its scores and top 10 are
close to the exact ones, not equal; its overlap with ragtui's is printed.

Queries run one at a time (interactive use): text in, top-10 out. Each side
runs its whole query list once per round, the sides interleaved, and the
fastest round counts: on a shared machine that is the round least disturbed.
The load average is printed with the figures.

ragtui's search is checked against its exhaustive reference on every query
(the same rows, order and bit-identical scores), and the postings each path
reads are counted: the exhaustive scorer reads every posting of the query's
terms; the pruned path (block-max bounds, ragtui/core/index/bm25_prune.py)
reads block entries plus the postings of the blocks it cannot rule out.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402

from ragtui.core.index.analyzer import analyze  # noqa: E402
from ragtui.core.index.bm25 import BM25Index  # noqa: E402
from ragtui.core.index.bm25_prune import SearchStats  # noqa: E402
from ragtui.core.index.bm25_write import build_postings, encode_postings  # noqa: E402
from ragtui.core.index.index_format import read_index  # noqa: E402
from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint  # noqa: E402
from ragtui.core.ingest.publish import IndexLock, encode_index, publish  # noqa: E402

K1, B, K = 1.2, 0.75, 10


def publish_ours(tmp: Path, name: str, texts: list[str], doc_terms) -> Path:
    records = [ChunkRecord(f"d/{i:07d}#0", f"d/{i:07d}", "file", f"d/{i:07d}", t, 1, fingerprint(t)) for i, t in enumerate(texts)]
    meta = IndexMeta(name, "2026-01-01T00:00:00Z", len(records), 1, "bench", "bench", 256, 32, K1, B)
    vectors = np.ones((len(records), 1), dtype=np.float32)
    files = encode_index(meta, records, vectors, doc_terms=doc_terms)
    with IndexLock(tmp, name):
        return publish(tmp, name, files)


def best_rounds(sides: dict, queries: list[str], rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Queries/s of each side, by the wall clock and by CPU time: its fastest round, the sides interleaved.

    CPU time (``process_time``: every thread of this process) leaves out the time
    other processes held the cores, which on a shared machine is most of the wall clock.
    """
    wall = {name: float("inf") for name in sides}
    cpu = {name: float("inf") for name in sides}
    for fn in sides.values():
        for q in queries[:50]:
            fn(q)  # warm
    for _ in range(rounds):
        for name, fn in sides.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for q in queries:
                fn(q)
            wall[name] = min(wall[name], time.perf_counter() - t0)
            cpu[name] = min(cpu[name], time.process_time() - c0)
    n = len(queries)
    return {k: n / t for k, t in wall.items()}, {k: n / max(t, 1e-9) for k, t in cpu.items()}


def build_profile(doc_terms) -> str:
    """Where ragtui's BM25 build spends its time: the top functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    encode_postings(build_postings(doc_terms))
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:6]  # type: ignore[attr-defined]
    parts = []
    for (file, line, func), (_, _, tottime, _, _) in rows:
        where = f"{Path(file).name}:{line}({func})" if line else func
        parts.append(f"    {tottime / total:5.1%}  {where}")
    return "\n".join(parts)


def run(label: str, texts: list[str], queries: list[str], rounds: int) -> None:
    import bm25s
    from peer_tantivy import Tantivy

    print(f"\n== {label}: {len(texts):,} chunks, {len(queries):,} queries; load average {os.getloadavg()[0]:.1f}")
    doc_terms = [analyze(t) for t in texts]

    # Build: the BM25 part only, from the same analyzed terms, one thread each.
    t0 = time.perf_counter()
    postings = build_postings(doc_terms)
    t1 = time.perf_counter()
    raw = encode_postings(postings)
    ours_build = time.perf_counter() - t0
    ours_stages = (t1 - t0, ours_build - (t1 - t0))
    del postings
    t0 = time.perf_counter()
    tv = Tantivy(doc_terms, threads=1)
    tv_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    peer = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
    peer.index(doc_terms, show_progress=False)
    peer_build = time.perf_counter() - t0

    t0 = time.perf_counter()
    ours = BM25Index.decode(raw, K1, B)
    ours_load = time.perf_counter() - t0
    del ours
    gc.collect()
    tracemalloc.start()  # memory measured apart: tracing slows the decode it measures
    ours = BM25Index.decode(raw, K1, B)
    ours_mem = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    ours.blocks()  # the pruned search's block entries, which a long-running reader builds after its first queries

    opens = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        path = publish_ours(tmp, "bench", texts, doc_terms)
        for how, full, cache in (
            ("every line validated", True, None),
            ("lazy, cold cache", False, tmp / "cache"),
            ("lazy, warm cache", False, tmp / "cache"),
        ):
            t0 = time.perf_counter()
            data = read_index(path, full=full, cache_dir=cache)
            rows, _ = data.bm25.search(queries[0], K)
            [data.records[int(r)].text for r in rows]
            opens[how] = time.perf_counter() - t0
            del data
        peer_dir = tmp / "bm25s"
        peer.save(str(peer_dir))
        del peer
        t0 = time.perf_counter()
        peer = bm25s.BM25.load(str(peer_dir))
        peer_load = time.perf_counter() - t0
        del peer
        gc.collect()
        tracemalloc.start()
        peer = bm25s.BM25.load(str(peer_dir))
        peer_mem = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()

    vocab = peer.vocab_dict
    # Agreement, over every query: ragtui's paths against its exhaustive reference, the peers against it.
    differ = {"auto": 0, "pruned": 0}
    reads = {"reference": 0, "auto": 0, "pruned": 0}
    pruned_ran = 0
    tv_same_list = tv_overlap = 0
    max_diff = 0.0
    peer_order_differs = 0
    n_scored = 0
    for q in queries:
        want = ours.search_exhaustive(q, K)
        found = ours.term_ids(q)
        for how in ("auto", "pruned"):
            stats = SearchStats()
            got = ours.search_terms(found, K, stats, how)
            differ[how] += not (np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]))
            reads[how] += stats.touched
            if how == "pruned":
                reads["reference"] += stats.postings
                pruned_ran += stats.pruned
        theirs = [doc for _, doc in tv.search(analyze(q), K)]
        tv_same_list += theirs == want[0].tolist()
        tv_overlap += len(set(theirs) & set(want[0].tolist()))
        terms = [t for t in analyze(q) if t in vocab]
        if terms:
            n_scored += 1
            mine = ours.scores(q)
            peer_scores = peer.get_scores(terms) * (K1 + 1)
            max_diff = max(max_diff, float(np.abs(mine - peer_scores).max()))
            order = np.lexsort((np.arange(peer_scores.size), -peer_scores))[: want[0].size]
            peer_order_differs += int(not np.array_equal(want[0], order))

    def bm25s_search(q: str) -> None:
        terms = [t for t in analyze(q) if t in vocab]
        if terms:
            peer.retrieve([terms], k=K, show_progress=False, n_threads=1, backend_selection="numpy")

    qps, qps_cpu = best_rounds(
        {
            "ragtui": lambda q: ours.search(q, K),
            "ragtui exhaustive": lambda q: ours.search_exhaustive(q, K),
            "ragtui pruned": lambda q: ours.search_terms(ours.term_ids(q), K, None, "pruned"),
            "tantivy": lambda q: tv.search(analyze(q), K),
            "bm25s": bm25s_search,
        },
        queries,
        rounds,
    )
    n = len(queries)
    print(f"queries/s, one at a time (fastest of {rounds} interleaved rounds; load average now {os.getloadavg()[0]:.1f}):")
    print(f"  {'':20}{'wall':>10}{'ragtui/it':>11}{'CPU':>10}{'ragtui/it':>11}")
    for name, v in qps.items():
        c = qps_cpu[name]
        print(f"  {name:20}{v:10,.0f}{qps['ragtui'] / v:10.2f}x{c:10,.0f}{qps_cpu['ragtui'] / c:10.2f}x")
    print(f"top-{K} against ragtui's exhaustive scorer: ragtui differs on {differ['auto']} of {n} queries "
          f"(forced pruning: {differ['pruned']}); tantivy identical on {tv_same_list} of {n}, "
          f"{tv_overlap / n:.2f} of {K} shared on average (one-byte length norms)")
    print(f"postings read per query: exhaustive {reads['reference'] / n:,.0f}, ragtui {reads['auto'] / n:,.0f}, "
          f"forced pruning {reads['pruned'] / n:,.0f} (block entries + postings; pruned on {pruned_ran} of {n})")
    print(f"bm25s: max |score difference| {max_diff:.2e} over {n_scored} queries x {len(texts):,} chunks; "
          f"top-{K} order differs on {peer_order_differs}")
    print(f"build s (BM25 part, one thread): ragtui {ours_build:.3f} (postings {ours_stages[0]:.3f} + encode "
          f"{ours_stages[1]:.3f}), tantivy {tv_build:.3f} (ragtui / tantivy = {ours_build / tv_build:.2f}), "
          f"bm25s {peer_build:.3f}")
    print("  where ragtui's build spends its own time (cProfile):")
    print(build_profile(doc_terms))
    print(f"load s (BM25 part, from the file): ragtui {ours_load:.3f}, bm25s {peer_load:.3f}; "
          f"memory MB: ragtui {ours_mem / 1e6:.1f}, bm25s {peer_mem / 1e6:.1f}")
    print("index open -> first BM25 answer shown: " + ", ".join(f"{k} {v:.3f} s" for k, v in opens.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="SciFact only")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per side (default 5)")
    args = ap.parse_args()
    try:
        import bm25s  # noqa: F401
        import tantivy  # noqa: F401
    except ImportError:
        raise SystemExit("bm25s and tantivy are needed: pip install -e '.[bench]'") from None
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, cores {os.cpu_count()}")
    docs, queries = corpora.scifact()
    run("SciFact", docs, queries, args.rounds)
    if not args.quick:
        chunks = corpora.large_chunks()
        rng = np.random.default_rng(7)
        sample = [" ".join(chunks[i].split()[:6]) for i in rng.choice(len(chunks), 1000, replace=False)]
        run("shared corpora, 40-word chunks", chunks, queries[:500] + sample, args.rounds)


if __name__ == "__main__":
    main()
