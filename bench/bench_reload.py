"""A reader's open of a fresh generation, with and without its writer's verified entry.

    python bench/bench_reload.py [--index DIR] [--runs N]

``read_index(full=False)`` — what ``Retriever.reload()`` does after a
publish — on one index, alternately taking the verified entry its writer left
in ``rag/.cache`` and ignoring it. Named peer: the same call with the entry
ignored, i.e. the full checks every reader ran before (the newline scan of
docs.jsonl, the unit-norm pass over vectors.f32, the SHA-256 of bm25.idx).
The default index is the ~100k-chunk one ``bench/bench_watch.py`` builds
(run it first); its last publish must be by a writer that records entries.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragtui.core.index import index_format, verified  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, default=Path("/tmp/ragtui-bench-watch/latency-100k/art/rag/corpus"))
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    cache = args.index.parent / ".cache"
    real_lookup = verified.lookup

    def ignored(*a: object, **k: object) -> None:
        return None

    index_format.read_index(args.index, full=False, cache_dir=cache)  # the page cache warm for both
    times: dict[str, list[float]] = {"with the entry": [], "without (peer)": []}
    used = None
    for _ in range(args.runs):
        for label in times:
            verified.lookup = real_lookup if label == "with the entry" else ignored  # type: ignore[assignment]
            t = time.perf_counter()
            data = index_format.read_index(args.index, full=False, cache_dir=cache)
            times[label].append(time.perf_counter() - t)
            if label == "with the entry":
                used = data.stats.get("verified_entry")
    verified.lookup = real_lookup
    print(f"bench_reload: {data.n_chunks:,} chunks at {args.index}; entry taken: {used}; "
          f"load average {os.getloadavg()[0]:.1f}")
    if not used:
        print("  no verified entry matches this generation: publish it with this version of ragtui first")
    med = {k: 1000 * statistics.median(v) for k, v in times.items()}
    for label, values in times.items():
        print(f"  read_index(full=False) {label}: median {med[label]:.1f} ms "
              f"(min {1000 * min(values):.1f}, max {1000 * max(values):.1f}, {len(values)} runs)")
    print(f"  with / without = {med['with the entry'] / med['without (peer)']:.2f}")
    return 0 if used else 1


if __name__ == "__main__":
    sys.exit(main())
