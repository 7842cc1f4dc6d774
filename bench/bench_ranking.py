"""Query latency of the ranking modes at 100k chunks: the new default hybrid beside the previous one.

    python bench/bench_ranking.py [--npy bench/out/real_V.npy] [--n 100000] [--queries 200]

The index: n real texts (bench/real_vectors.py's texts, in order, 3 per
document) with their real wordllama vectors, written through the normal index
encoder (BM25 postings, docs.jsonl, vectors) into a temporary folder. Queries:
SciFact's first train queries, embedded with the same model. Each query is timed
alone through ``Retriever.search`` (k = 10), after one untimed warm-up that
builds what each mode builds on first use (bm25doc's document postings: their
build time is printed apart). The peer is the previous default hybrid
(``lexical="bm25"``), measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    from bench.real_vectors import texts
    from ragtui.core.embedders import make_embedder
    from ragtui.core.eval.datasets import load_dataset
    from ragtui.core.index.records import ChunkRecord, IndexMeta, fingerprint
    from ragtui.core.ingest.publish import IndexLock, encode_index, publish
    from ragtui.core.search.retriever import Retriever

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npy", default=str(ROOT / "bench" / "out" / "real_V.npy"))
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args(argv)
    all_texts = texts()[: args.n]
    vectors = np.ascontiguousarray(np.load(args.npy, mmap_mode="r")[: len(all_texts)], dtype=np.float32)
    emb = make_embedder("wordllama")
    records = []
    for i, text in enumerate(all_texts):
        doc = f"doc{i // 3:06d}.txt"
        records.append(ChunkRecord(f"{doc}#{i % 3}", doc, "file", doc, text, min(256, max(1, len(text.split()))),
                                   fingerprint(text)))
    meta = IndexMeta("bench-ranking", "2026-01-01T00:00:00Z", len(records), emb.dim, emb.model, "bench", 256, 32)
    queries = list(load_dataset(ROOT.parent / "shared" / "data" / "eval" / "scifact", split="train").queries.values())
    queries = queries[: args.queries]
    with tempfile.TemporaryDirectory() as tmp:
        art = Path(tmp)
        with IndexLock(art, "bench-ranking"):
            path = publish(art, "bench-ranking", encode_index(meta, records, vectors))
        r = Retriever.open(path, embedder=emb)
        t0 = time.perf_counter()
        r.doc_lexical()
        print(f"{len(records):,} chunks, {len(records) // 3:,} documents; bm25doc document postings built in "
              f"{time.perf_counter() - t0:.2f} s (once per generation)")
        cases = [("bm25", {}), ("bm25doc", {}), ("flat", {}), ("hybrid, lexical bm25 (before)", {"lexical": "bm25"}),
                 ("hybrid (default: bm25doc)", {})]
        medians = {}
        for label, params in cases:
            mode = label.split(",")[0].split(" ")[0]
            r.search(queries[0], mode=mode, k=10, **params)
            ms = []
            for q in queries:
                t = time.perf_counter()
                r.search(q, mode=mode, k=10, **params)
                ms.append((time.perf_counter() - t) * 1000)
            medians[label] = float(np.median(ms))
            print(f"{label:32s} median {medians[label]:6.2f} ms   p95 {np.percentile(ms, 95):6.2f} ms")
        before, after = medians["hybrid, lexical bm25 (before)"], medians["hybrid (default: bm25doc)"]
        print(f"default hybrid / previous hybrid: {after / before:.2f}x")


if __name__ == "__main__":
    main()
