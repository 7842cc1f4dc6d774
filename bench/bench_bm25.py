"""BM25: ragtui against bm25s on the same tokens, in the same run.

    python bench/bench_bm25.py [--quick]

Both sides get the same analyzer output (ragtui's), lucene idf, k1=1.2,
b=0.75. bm25s's "lucene" variant leaves out the constant (k1+1) factor of
the term weight, so its scores are multiplied by (k1+1) before they are
compared. Queries run one at a time (interactive use): text in, top-10 out.
"""

from __future__ import annotations

import argparse
import gc
import os
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
from ragtui.core.index.index_format import read_index  # noqa: E402
from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint  # noqa: E402
from ragtui.core.ingest.publish import IndexLock, encode_index, publish  # noqa: E402

K1, B, K = 1.2, 0.75, 10


def build_ours(tmp: Path, name: str, texts: list[str], doc_terms) -> Path:
    records = [ChunkRecord(f"d/{i:07d}#0", f"d/{i:07d}", "file", f"d/{i:07d}", t, 1, fingerprint(t)) for i, t in enumerate(texts)]
    meta = IndexMeta(name, "2026-01-01T00:00:00Z", len(records), 1, "bench", "bench", 256, 32, K1, B)
    vectors = np.ones((len(records), 1), dtype=np.float32)
    files = encode_index(meta, records, vectors, doc_terms=doc_terms)
    with IndexLock(tmp, name):
        return publish(tmp, name, files)


def run(label: str, texts: list[str], queries: list[str]) -> None:
    import bm25s

    print(f"\n== {label}: {len(texts):,} chunks, {len(queries):,} queries")
    doc_terms = [analyze(t) for t in texts]
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        t0 = time.perf_counter()
        path = build_ours(tmp, "bench", texts, doc_terms)
        ours_build = time.perf_counter() - t0

        # Load: bm25.idx alone (decode + weights), and the whole index open + first answer.
        raw = (path / "bm25.idx").read_bytes()
        t0 = time.perf_counter()
        ours = BM25Index.decode(raw, K1, B)
        ours_load = time.perf_counter() - t0
        del ours
        gc.collect()
        tracemalloc.start()  # memory measured apart: tracing slows the decode it measures
        ours = BM25Index.decode(raw, K1, B)
        ours_mem = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        opens = {}
        for label, full, cache in (
            ("every line validated", True, None),
            ("lazy, cold cache", False, tmp / "cache"),
            ("lazy, warm cache", False, tmp / "cache"),
        ):
            t0 = time.perf_counter()
            data = read_index(path, full=full, cache_dir=cache)
            rows, _ = data.bm25.search(queries[0], K)
            [data.records[int(r)].text for r in rows]
            opens[label] = time.perf_counter() - t0
            del data

        t0 = time.perf_counter()
        peer = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
        peer.index(doc_terms, show_progress=False)
        peer_build = time.perf_counter() - t0
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
    q_terms = [[t for t in analyze(q) if t in vocab] for q in queries]
    queries_ok = [q for q, t in zip(queries, q_terms) if t]
    q_terms = [t for t in q_terms if t]

    # Score agreement over every query, every chunk.
    max_diff = 0.0
    rank_mismatch = 0
    for q, terms in zip(queries_ok, q_terms):
        mine = ours.scores(q)
        theirs = peer.get_scores(terms) * (K1 + 1)
        max_diff = max(max_diff, float(np.abs(mine - theirs).max()))
        rows, _ = ours.search(q, K)
        order = np.lexsort((np.arange(theirs.size), -theirs))[: rows.size]
        rank_mismatch += int(not np.array_equal(rows, order))

    def per_second(fn) -> float:
        fn()  # warm
        reps = max(1, int(2000 / len(queries_ok)))
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return reps * len(queries_ok) / (time.perf_counter() - t0)

    def ours_all():
        for q in queries_ok:
            ours.search(q, K)

    def peer_all():
        for q in queries_ok:
            terms = [t for t in analyze(q) if t in vocab]
            peer.retrieve([terms], k=K, show_progress=False, n_threads=1, backend_selection="numpy")

    ours_qps = per_second(ours_all)
    peer_qps = per_second(peer_all)
    print(f"{'':24}{'ragtui':>12}{'bm25s':>12}{'ratio':>9}")
    print(f"{'queries/s (1 thread)':24}{ours_qps:12.0f}{peer_qps:12.0f}{ours_qps / peer_qps:8.2f}x")
    print(f"{'build s':24}{ours_build:12.3f}{peer_build:12.3f}{peer_build / ours_build:8.2f}x")
    print(f"{'load s (BM25 part)':24}{ours_load:12.3f}{peer_load:12.3f}{peer_load / ours_load:8.2f}x")
    print(f"{'memory MB (BM25 part)':24}{ours_mem / 1e6:12.1f}{peer_mem / 1e6:12.1f}{peer_mem / max(ours_mem, 1):8.2f}x")
    print("index open -> first BM25 answer shown: " + ", ".join(f"{k} {v:.3f} s" for k, v in opens.items()))
    print(f"max |score difference| over {len(queries_ok)} queries x {len(texts):,} chunks: {max_diff:.2e}"
          f"; top-{K} order differs on {rank_mismatch} queries")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="SciFact only")
    args = ap.parse_args()
    try:
        import bm25s  # noqa: F401
    except ImportError:
        raise SystemExit("bm25s is not installed: pip install -e '.[bench]'") from None
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, cores {os.cpu_count()}")
    docs, queries = corpora.scifact()
    run("SciFact", docs, queries)
    if not args.quick:
        chunks = corpora.large_chunks()
        rng = np.random.default_rng(7)
        sample = [" ".join(chunks[i].split()[:6]) for i in rng.choice(len(chunks), 1000, replace=False)]
        run("shared corpora, 40-word chunks", chunks, queries[:500] + sample)


if __name__ == "__main__":
    main()
