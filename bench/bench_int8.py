"""int8 vectors in memory: ragtui's exact int8 scan against the float32 path and faiss, same data, same run.

    python bench/bench_int8.py [--n 100000] [--dims 256,576] [--queries 200]

Data: bench_vectors' synthetic clustered unit vectors (1000 centres; queries
drawn the same way, never rows). Queries are timed one at a time, fastest of
--repeats passes per query. Rows:

- ragtui flat f32: ``flat_search`` over vectors.f32 (today's default);
- ragtui flat i8: ``QuantizedVectors.search`` — the int8 scan, then the
  candidates its error bound keeps re-scored in float32 — whose answers must
  equal flat f32's bit for bit (checked on every query; any difference is
  printed);
- ragtui IVF f32 / i8: the same over the rows of the probed lists;
- faiss IndexFlatIP (float32) and IndexScalarQuantizer QT_8bit (inner
  product; approximate: its recall@10 against exact is printed).

Memory is the bytes each method holds for the rows (the float32 rows are
vectors.f32's memory map, read only where re-scored, for ragtui i8).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench_vectors import K, environment, make_data, per_query, recall, row, try_faiss  # noqa: E402

from ragtui.core.search.flat import flat_search  # noqa: E402
from ragtui.core.search.ivf import build_ivf  # noqa: E402
from ragtui.core.search.quant import QuantizedVectors, ivf_search_i8  # noqa: E402


def same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))


def run(n: int, dim: int, n_queries: int, repeats: int, noise: float) -> None:
    vectors, queries = make_data(n, dim, n_queries, noise, seed=dim)
    faiss = try_faiss()
    widths = [40, 9, 10, 9, 10, 12]
    print(f"\n== n={n} dim={dim} queries={n_queries} (one at a time, fastest of {repeats} per query) ==")
    print(row(["method", "build s", "queries/s", "recall@10", "MiB held", "ratio"], widths))
    mib = 1 << 20

    f32_qps, truth_full = per_query(lambda q: flat_search(vectors, q, K), queries, repeats)
    truth = [r for r, _ in truth_full]
    print(row(["ragtui flat f32 (today)", "-", f"{f32_qps:.0f}", "1.000", f"{vectors.nbytes / mib:.1f}", "1.00"],
              widths))
    started = time.perf_counter()
    quant = QuantizedVectors.build(vectors)
    qbuild = time.perf_counter() - started
    i8_qps, i8_res = per_query(lambda q: quant.search(q, K), queries, repeats)
    diff = sum(not same(a, b) for a, b in zip(i8_res, truth_full))
    depth = [quant.last_depth(q, K) for q in queries]
    print(row(["ragtui flat i8 + exact re-score", f"{qbuild:.2f}", f"{i8_qps:.0f}",
               f"{recall([r for r, _ in i8_res], truth):.3f}", f"{quant.nbytes / mib:.1f}",
               f"{i8_qps / f32_qps:.2f}x f32"], widths))
    print(f"   i8 answers differing from f32: {diff} of {len(queries)}; re-score depth median "
          f"{int(np.median(depth))}, max {max(depth)} (k={K})")

    index = build_ivf(vectors, "bench")
    ivf_qps, ivf_res = per_query(lambda q: index.search(q, K), queries, repeats)
    print(row([f"ragtui IVF f32 nprobe={index.params.nprobe}", f"{index.build_seconds:.2f}", f"{ivf_qps:.0f}",
               f"{recall([r for r, _ in ivf_res], truth):.3f}", f"{index._packed.nbytes / mib:.1f}",
               f"{ivf_qps / f32_qps:.1f}x flat"], widths))
    ivf8_qps, ivf8_res = per_query(lambda q: ivf_search_i8(index, quant, q, K), queries, repeats)
    diff_ivf = sum(not same(a, b) for a, b in zip(ivf8_res, ivf_res))
    print(row(["ragtui IVF i8 + exact re-score", "-", f"{ivf8_qps:.0f}",
               f"{recall([r for r, _ in ivf8_res], truth):.3f}", f"{quant.nbytes / mib:.1f}",
               f"{ivf8_qps / ivf_qps:.2f}x IVF f32"], widths))
    print(f"   IVF i8 answers differing from IVF f32: {diff_ivf} of {len(queries)}")

    if faiss is not None:
        fflat = faiss.IndexFlatIP(dim)
        fflat.add(vectors)
        ff_qps, ff_res = per_query(lambda q: fflat.search(q[None, :], K)[1][0], queries, repeats)
        print(row(["faiss IndexFlatIP", "-", f"{ff_qps:.0f}", f"{recall(ff_res, truth):.3f}",
                   f"{vectors.nbytes / mib:.1f}", f"ours f32 {f32_qps / ff_qps:.2f}x"], widths))
        sq = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        started = time.perf_counter()
        sq.train(vectors)
        sq.add(vectors)
        sbuild = time.perf_counter() - started
        sq_qps, sq_res = per_query(lambda q: sq.search(q[None, :], K)[1][0], queries, repeats)
        print(row(["faiss IndexScalarQuantizer QT_8bit", f"{sbuild:.2f}", f"{sq_qps:.0f}",
                   f"{recall(sq_res, truth):.3f}", f"{sq.sa_code_size() * n / mib:.1f}",
                   f"ours i8 {i8_qps / sq_qps:.2f}x"], widths))
        print(f"   faiss threads {faiss.omp_get_max_threads()}")
    sys.stdout.flush()


_CHILD = """
import resource, sys, numpy as np
sys.path.insert(0, sys.argv[4])
from ragtui.core.search.flat import flat_search
from ragtui.core.search.quant import QuantizedVectors
n, dim, scan = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rows = np.memmap(sys.argv[5], dtype="<f4", mode="r", shape=(n, dim))
queries = np.load(sys.argv[6])
def resident():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["RssAnon"].split()[0]), int(fields["RssFile"].split()[0])
start = resident()
if scan == "i8":
    quant = QuantizedVectors.build(rows)
    import gc; gc.collect()
    for q in queries:
        quant.search(q, 10)
else:
    for q in queries:
        flat_search(rows, q, 10)
end = resident()
print(end[0] - start[0], end[1] - start[1])
"""


def memory(n: int, dim: int, n_queries: int, noise: float) -> None:
    """Resident memory added by searching a vectors.f32 memory map, f32 vs the int8 scan, each in a fresh
    process, after the queries: process memory (anonymous: the int8 copy) and pages of the file
    mapped (clean page cache the kernel can reclaim; the kernel maps a re-scored row's neighbours
    too, 64 KiB around each fault)."""
    import subprocess
    import tempfile

    vectors, queries = make_data(n, dim, n_queries, noise, seed=dim)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vectors.f32"
        path.write_bytes(vectors.astype("<f4").tobytes())
        qpath = Path(tmp) / "queries.npy"
        np.save(qpath, queries)
        del vectors
        root = str(Path(__file__).resolve().parent.parent)
        for scan in ("f32", "i8"):
            # Drop the file's pages from this machine's page cache counters: each child maps it afresh.
            out = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(dim), scan, root, str(path), str(qpath)],
                                 capture_output=True, text=True, check=True)
            anon, mapped = (int(x) / 1024 for x in out.stdout.split())
            print(f"   {scan} scan over a {n}x{dim} vectors.f32 map, after {n_queries} queries: "
                  f"{anon:.1f} MiB of process memory, {mapped:.1f} MiB of vectors.f32 pages mapped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dims", default="256,576")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--noise", type=float, default=1.0, help="as bench_vectors.py")
    ap.add_argument("--memory", action="store_true", help="only measure peak resident memory, f32 vs i8")
    args = ap.parse_args()
    if args.memory:
        for dim in (int(d) for d in args.dims.split(",")):
            memory(args.n, dim, args.queries, args.noise)
        return
    print(environment())
    print(f"OMP/BLAS threads as set in the environment: {os.environ.get('OMP_NUM_THREADS', 'default')}")
    for dim in (int(d) for d in args.dims.split(",")):
        run(args.n, dim, args.queries, args.repeats, args.noise)


if __name__ == "__main__":
    main()
