"""What the query syntax costs: parse time, the document table, and searches with filters, phrases, prefixes
and exclusions beside the same words searched as plain text, in every mode.

    python bench/bench_query.py --index ARTIFACTS/rag/ID [--repeat 20]

Times are medians over ``--repeat`` runs, after one warm-up run (which builds
the IVF lists and the document table), on the index's own embedder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragtui import Retriever, make_embedder  # noqa: E402
from ragtui.core.search.query import parse_query  # noqa: E402
from ragtui.core.search.query_plan import _build_table  # noqa: E402

CASES = [
    ("plain words", "extract archive files"),
    ("+ path filter (selective)", "extract archive files path:linux/"),
    ("+ ext filter (keeps all)", "extract archive files ext:md"),
    ("+ phrase", '"archive files" extract'),
    ("+ prefix", "extract archiv*"),
    ("+ exclusion", "extract archive files -zip"),
    ("+ OR group", "extract archive OR tarball"),
]


def _median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    r = Retriever.open(args.index, embedder=make_embedder())
    n = r.data.n_chunks
    print(f"index: {n:,} chunks")
    print(f"parse: {_median_ms(lambda: parse_query(CASES[3][1] + ' ' + CASES[1][1]), args.repeat * 10) * 1000:.0f} µs")
    print(f"document table (once per generation): {_median_ms(lambda: _build_table(r.data.records), 3):.1f} ms")
    modes = ("bm25", "flat", "ivf", "hybrid")
    print("| query | " + " | ".join(f"{m} ms" for m in modes) + " | hits (bm25) |")
    print("|---|" + "---|" * (len(modes) + 1))
    for label, query in CASES:
        cells = [f"{_median_ms(lambda m=m, q=query: r.search(q, mode=m, k=10), args.repeat):.2f}" for m in modes]
        print(f"| {label}: `{query}` | " + " | ".join(cells) + f" | {len(r.search(query, mode='bm25', k=10))} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
