"""The stemmed lexical arm (bm25stem) at 100k chunks: build time, cache read time, memory, query time.

    nice python bench/bench_stem.py [--chunks 100000]

Chunks are 40-word windows of the shared corpora (corpora.large_chunks), ten
to a document. Measured: the derivation from the chunk postings, whole
(``StemLexical.build``: stem the dictionary, merge postings, weights, and the
document level) and written into a cache entry a block of stems at a time
(``StemLexical.build_into``, what readers and writers run), reading it back
from the cache (``StemLexical.load``), the arrays it keeps, the peak of Python
allocations while building (tracemalloc), and the median query time of
bm25stem against bm25doc on SciFact's queries.
The load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import corpora  # noqa: E402

from ragtui.core.index.analyzer import analyze  # noqa: E402
from ragtui.core.index.arraycache import StreamedEntry  # noqa: E402
from ragtui.core.index.bm25 import BM25Index  # noqa: E402
from ragtui.core.index.bm25_write import build_postings  # noqa: E402
from ragtui.core.search.docaware import DocLexical  # noqa: E402
from ragtui.core.search.stemmed import STEM_KIND, StemLexical  # noqa: E402


def nbytes(index: BM25Index) -> int:
    return sum(a.nbytes for a in index.to_arrays().values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    args = ap.parse_args()
    texts = corpora.large_chunks(args.chunks)[: args.chunks]
    chunks = BM25Index.from_postings(build_postings([analyze(t) for t in texts]), 1.2, 0.75)
    groups = np.arange(len(texts), dtype=np.int64) // 10
    queries = corpora.scifact()[1][:300]
    print(f"{len(texts):,} chunks, {chunks.n_terms:,} terms, {chunks.post_doc.size:,} postings; "
          f"load average {os.getloadavg()[0]:.2f}")
    builds = []
    for _ in range(3):
        t0 = time.perf_counter()
        stem = StemLexical.build(chunks, groups)
        builds.append(time.perf_counter() - t0)
    tracemalloc.start()
    StemLexical.build(chunks, groups)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kept = nbytes(stem.chunks) + nbytes(stem.docs.docs)
    print(f"build (stem {stem.chunks.n_terms:,} stems, chunk and document level): best of 3 {min(builds):.2f} s; "
          f"arrays kept {kept / 2**20:.0f} MiB; peak while building {peak / 2**20:.0f} MiB "
          f"(the index's own BM25: {nbytes(chunks) / 2**20:.0f} MiB)")
    with tempfile.TemporaryDirectory() as tmp:
        intos = []
        for i in range(4):  # the last one traced
            entry = StreamedEntry(Path(tmp), STEM_KIND, "bench")
            if i == 3:
                tracemalloc.start()
            t0 = time.perf_counter()
            StemLexical.build_into(entry, chunks, groups)
            intos.append(time.perf_counter() - t0)
            entry.discard()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"written into a cache entry in blocks (build_into): best of 3 {min(intos[:3]):.2f} s; "
          f"peak while building {peak / 2**20:.0f} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        StemLexical.load(chunks, groups, Path(tmp), "bench")
        reads = []
        for _ in range(3):
            t0 = time.perf_counter()
            StemLexical.load(chunks, groups, Path(tmp), "bench")
            reads.append(time.perf_counter() - t0)
    print(f"read back from the cache (the key hashes the chunk postings): best of 3 {min(reads):.2f} s")
    doc = DocLexical.build(chunks, groups)
    for label, fn in (("bm25doc", lambda q: doc.search(chunks, q, 10, 0.5)), ("bm25stem", lambda q: stem.search(q, 10, 0.5))):
        for q in queries[:20]:
            fn(q)
        times = []
        for q in queries:
            t0 = time.perf_counter()
            fn(q)
            times.append(time.perf_counter() - t0)
        print(f"{label}: median {np.median(times) * 1e3:.2f} ms, p95 {np.percentile(times, 95) * 1e3:.2f} ms "
              f"over {len(queries)} SciFact queries")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
