"""Vector retrieval benchmark: ragtui's flat and IVF against named peers, same data, same run.

    python bench/bench_vectors.py [--n 100000] [--dims 256,576] [--quick]
    python bench/bench_vectors.py --sweep [--n 10000,100000]     # the defaults table

Data: synthetic clustered unit vectors (1000 Gaussian cluster centres on the
sphere, each row a centre plus isotropic noise of norm ~--noise, normalized);
queries are drawn the same way but are never rows. Recall@10 is measured
against exact (flat) retrieval. Queries are timed one at a time, as a user
types them (interactive use), not as one batch: batching would favour the
BLAS-heavy peers and is not how ragtui searches.

Peers (optional, `pip install -e .[bench]`): faiss IndexFlatIP and
IndexIVFFlat at the same nlist, nprobe, training sample size and iterations;
plain numpy matmul + argsort. A missing peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import time

import numpy as np

from ragtui.core.search.flat import flat_search
from ragtui.core.search.ivf import IVFParams, build_ivf

K = 10


def clustered(n: int, dim: int, centres: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """n unit float32 rows: a random centre plus Gaussian noise of expected norm ``noise``."""
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 20000):
        m = min(20000, n - start)
        x = centres[rng.integers(0, len(centres), m)] + rng.standard_normal((m, dim)) * (noise / np.sqrt(dim))
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def make_data(
    n: int, dim: int, n_queries: int, noise: float, seed: int, npy: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, queries): synthetic clustered data, or real embeddings from ``npy``.

    ``npy`` is "ROWS.npy" or "ROWS.npy,QUERIES.npy" of float32 unit rows: the
    index is n rows drawn at random (seed 0), the queries are QUERIES or rows
    held out of the index.
    """
    if npy:
        files = npy.split(",")
        pool = np.load(files[0], mmap_mode="r")
        pick = np.random.default_rng(0).permutation(len(pool))
        rows = np.ascontiguousarray(pool[np.sort(pick[:n])], dtype=np.float32)
        queries = np.load(files[1])[:n_queries] if len(files) > 1 else pool[pick[n : n + n_queries]]
        return rows, np.ascontiguousarray(queries, dtype=np.float32)
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return clustered(n, dim, centres, noise, rng), clustered(n_queries, dim, centres, noise, rng)


def per_query(search, queries: np.ndarray, repeats: int) -> tuple[float, list[np.ndarray]]:
    """Queries/s of ``search(q) -> rows`` called one query at a time.

    Each query's time is its fastest of ``repeats`` passes (as timeit takes the
    minimum): other processes on a shared 2-core machine only ever add time.
    """
    best = np.full(len(queries), np.inf)
    results: list[np.ndarray] = []
    for _ in range(repeats):
        results = []
        for i, q in enumerate(queries):
            started = time.perf_counter()
            results.append(search(q))
            best[i] = min(best[i], time.perf_counter() - started)
    return len(queries) / float(best.sum()), results


def read_bandwidth(megabytes: int = 512, passes: int = 5) -> float:
    """This machine's memory read bandwidth in GB/s, as one numpy pass can use it.

    The fastest of ``passes`` reductions over a buffer far larger than the
    caches (the largest of an integer sum and a float32 maximum, both of which
    do little per byte): the bound a flat scan, which must read every stored
    row once per query, is chasing.
    """
    buf = np.random.default_rng(0).standard_normal(megabytes * (1 << 20) // 4, dtype=np.float32)
    best = 0.0
    for reduce in (lambda: buf.view(np.int64).sum(), lambda: buf.max()):
        for _ in range(passes):
            started = time.perf_counter()
            reduce()
            best = max(best, buf.nbytes / (time.perf_counter() - started) / 1e9)
    return best


def recall(results: list[np.ndarray], truth: list[np.ndarray]) -> float:
    hits = sum(len(np.intersect1d(np.asarray(r)[:K], t[:K])) for r, t in zip(results, truth, strict=True))
    return hits / (K * len(truth))


def try_faiss():
    try:
        import faiss  # an optional peer, imported only here
    except ImportError:
        print("faiss not installed: faiss rows skipped (pip install faiss-cpu, or .[bench])")
        return None
    return faiss


def environment() -> str:
    blas = {k: os.environ.get(k, "-") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"python {platform.python_version()} numpy {np.__version__} cores {os.cpu_count()} "
        f"load avg {load} env {blas}"
    )


def row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def compare(n: int, dim: int, n_queries: int, repeats: int, noise: float, params: IVFParams,
            npy: str | None) -> None:
    vectors, queries = make_data(n, dim, n_queries, noise, seed=dim, npy=npy)
    dim = vectors.shape[1]
    faiss = try_faiss()
    widths = [72, 8, 10, 9, 11]
    print(f"\n== n={n} dim={dim} queries={n_queries} (one at a time, fastest of {repeats} per query) ==")
    print(row(["method", "build s", "queries/s", "recall@10", "ratio"], widths))

    flat_qps, truth = per_query(lambda q: flat_search(vectors, q, K)[0], queries, repeats)
    print(row(["ragtui flat", "-", f"{flat_qps:.0f}", "1.000", "1.00"], widths))
    scanned = vectors.nbytes
    bandwidth = read_bandwidth()
    print(f"   flat reads {scanned / 1e6:.1f} MB a query: {scanned * flat_qps / 1e9:.1f} GB/s, "
          f"{scanned * flat_qps / 1e9 / bandwidth:.0%} of the measured read bandwidth ({bandwidth:.1f} GB/s, "
          f"one numpy pass over 512 MB); the bound is {bandwidth * 1e9 / scanned:.0f} queries/s")
    np_qps, np_res = per_query(lambda q: np.argsort(-(vectors @ q), kind="stable")[:K], queries, repeats)
    print(row(["numpy matmul+argsort", "-", f"{np_qps:.0f}", f"{recall(np_res, truth):.3f}",
               f"ours {flat_qps / np_qps:.2f}x"], widths))
    if faiss is not None:
        fflat = faiss.IndexFlatIP(dim)
        fflat.add(vectors)
        ff_qps, ff_res = per_query(lambda q: fflat.search(q[None, :], K)[1][0], queries, repeats)
        print(row(["faiss IndexFlatIP", "-", f"{ff_qps:.0f}", f"{recall(ff_res, truth):.3f}",
                   f"ours {flat_qps / ff_qps:.2f}x"], widths))

    index = build_ivf(vectors, "bench", params)
    p = index.params
    ivf_qps, ivf_res = per_query(lambda q: index.search(q, K)[0], queries, repeats)
    nprobe = index.default_nprobe  # calibrated unless --nprobe (spec/ivf.md)
    how = "set" if index.calibration is None else f"calibrated, {index.calibration[1]:.3f} on pseudo-queries"
    label = f"ragtui IVF L={p.nlist} M={p.train_cap} T={p.iters} nprobe={nprobe} ({how})"
    print(row([label, f"{index.build_seconds:.2f}", f"{ivf_qps:.0f}", f"{recall(ivf_res, truth):.3f}",
               f"{ivf_qps / flat_qps:.1f}x flat"], widths))
    if faiss is not None:
        quantizer = faiss.IndexFlatIP(dim)
        fivf = faiss.IndexIVFFlat(quantizer, dim, p.nlist, faiss.METRIC_INNER_PRODUCT)
        fivf.cp.niter = p.iters
        fivf.cp.max_points_per_centroid = max(1, p.train_cap // p.nlist)  # same sample size
        fivf.cp.seed = 1234
        started = time.perf_counter()
        fivf.train(vectors)
        fivf.add(vectors)
        fbuild = time.perf_counter() - started
        fivf.nprobe = nprobe
        fi_qps, fi_res = per_query(lambda q: fivf.search(q[None, :], K)[1][0], queries, repeats)
        print(row(["faiss IndexIVFFlat (same L, nprobe)", f"{fbuild:.2f}", f"{fi_qps:.0f}",
                   f"{recall(fi_res, truth):.3f}", f"ours {ivf_qps / fi_qps:.2f}x"], widths))
        print(f"   ivf build: ours {index.build_seconds:.2f}s vs faiss {fbuild:.2f}s "
              f"(ours/faiss {index.build_seconds / fbuild:.2f}); faiss threads {faiss.omp_get_max_threads()}")


def sweep(ns: list[int], dim: int, n_queries: int, repeats: int, noise: float, npy: str | None) -> None:
    """Recall@10, queries/s and build time over (L, M, T, nprobe), for choosing the defaults."""
    widths = [7, 5, 6, 3, 6, 7, 9, 8, 9]
    for n in ns:
        vectors, queries = make_data(n, dim, n_queries, noise, seed=dim, npy=npy)
        dim = vectors.shape[1]
        flat_qps, truth = per_query(lambda q, v=vectors: flat_search(v, q, K)[0], queries, repeats)
        print(f"\n== sweep n={n} dim={dim}: flat {flat_qps:.0f} queries/s; * marks the default ==")
        print(row(["n", "L", "M", "T", "nprobe", "build s", "queries/s", "x flat", "recall@10"], widths))
        default = IVFParams().resolve(n)
        root = default.nlist
        configs = [(round(f * root), 64, 10) for f in (1, 0.5, 2)]
        configs += [(root, m, 10) for m in (32, 128)] + [(root, 64, t) for t in (5, 20)]
        for nlist, per_list, iters in configs:
            index = build_ivf(vectors, "bench", IVFParams(nlist=nlist, train_cap=per_list * nlist, iters=iters))
            p = index.params
            for nprobe in sorted({1, 2, 4, 8, 12, 16, 24, 32, 48, 64, default.nprobe}):
                if nprobe > p.nlist:
                    break
                qps, res = per_query(lambda q, i=index, m=nprobe: i.search(q, K, m)[0], queries, repeats)
                mark = "*" if (p.nlist, p.train_cap, p.iters, nprobe) == (
                    default.nlist, default.train_cap, default.iters, default.nprobe) else ""
                print(row([str(n), str(p.nlist), str(p.train_cap), str(p.iters), f"{mark}{nprobe}",
                           f"{index.build_seconds:.2f}", f"{qps:.0f}", f"{qps / flat_qps:.1f}",
                           f"{recall(res, truth):.3f}"], widths))
            sys.stdout.flush()


def _seed_float32(train: np.ndarray, nlist: int, rng) -> list[int]:
    """k-means++ as in ivf.py but with float32 dot products: the choice we did not make."""
    first = rng.below(len(train))
    chosen, best = [first], train @ train[first]
    for _ in range(1, nlist):
        running = np.cumsum(np.maximum(2.0 - 2.0 * best.astype(np.float64), 0.0))
        u = rng.uniform() * running[-1]
        chosen.append(int(np.searchsorted(running, u, side="right")))
        np.maximum(best, train @ train[chosen[-1]], out=best)
    return chosen


def precision(n: int, dim: int, noise: float, npy: str | None) -> None:
    """What float64 decisions cost, and what float32 ones would change (spec/pcg32.md)."""
    from ragtui.core.search.ivf import nearest_centroid, seed_centroids, training_rows
    from ragtui.core.search.pcg32 import index_rng

    vectors, _ = make_data(n, dim, 1, noise, seed=dim, npy=npy)
    dim = vectors.shape[1]
    index = build_ivf(vectors, "bench")
    p, cents = index.params, index.centroids
    print(f"\n== precision n={n} dim={dim} L={p.nlist} M={p.train_cap} ==")

    def timed(f):
        started = time.perf_counter()
        out = f()
        return out, time.perf_counter() - started

    truth, t_plain = timed(lambda: np.concatenate([
        np.argmax(np.vecdot(vectors[s : s + 1024].astype(np.float64)[:, None, :], cents[None]), axis=1)
        for s in range(0, n, 1024)]))
    ours, t_ours = timed(lambda: nearest_centroid(vectors, cents))
    c32 = np.ascontiguousarray(cents.T, dtype=np.float32)
    f32, t_f32 = timed(lambda: np.concatenate([np.argmax(vectors[s : s + 4096] @ c32, axis=1)
                                               for s in range(0, n, 4096)]))
    f64, t_f64 = timed(lambda: np.concatenate([np.argmax(vectors[s : s + 4096].astype(np.float64) @ cents.T, axis=1)
                                               for s in range(0, n, 4096)]))
    print(f"assign {n} rows to {p.nlist} centroids (labels differing from plain float64 per-pair dots):")
    for name, labels, secs in (("plain float64, one ddot per pair", truth, t_plain),
                               ("ragtui: float32 screen + float64", ours, t_ours),
                               ("float64 matrix product (dgemm)", f64, t_f64),
                               ("float32 matrix product (sgemm)", f32, t_f32)):
        print(f"   {name:34s} {secs:6.3f} s   {int((labels != truth).sum()):6d} differ")
    lead = np.concatenate([np.diff(np.sort(vectors[s : s + 4096] @ c32, axis=1)[:, -2:], axis=1)[:, 0]
                           for s in range(0, n, 4096)])
    print(f"   rows whose float32 top-2 lead is < 1e-5 (float32 error scale): {int((lead < 1e-5).sum())}, "
          f"< 1e-6: {int((lead < 1e-6).sum())}, exactly 0: {int((lead == 0).sum())}")
    rng = index_rng("bench")
    train = np.ascontiguousarray(vectors[training_rows(n, p.train_cap, rng)])
    state = copy.copy(rng)  # the same stream position for both seedings
    seeded, t_seed = timed(lambda: seed_centroids(train, p.nlist, rng))
    picks64 = [int(np.flatnonzero((train == row.astype(np.float32)).all(axis=1))[0]) for row in seeded]
    picks32, t_seed32 = timed(lambda: _seed_float32(train, p.nlist, state))
    diverge = next((i for i, (a, b) in enumerate(zip(picks64, picks32, strict=True)) if a != b), None)
    print(f"k-means++: float64 {t_seed:.3f} s, float32 {t_seed32:.3f} s; float32 weights first pick "
          f"another row at centroid {diverge} of {p.nlist}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="100000", help="rows (comma-separated list with --sweep)")
    ap.add_argument("--dims", default="256,576", help="comma-separated dimensions")
    ap.add_argument("--queries", type=int, default=200, help="queries, each timed alone")
    ap.add_argument("--repeats", type=int, default=5, help="each query timed this many times, fastest kept")
    ap.add_argument("--noise", type=float, default=1.0, help="noise norm relative to the unit centre")
    ap.add_argument("--quick", action="store_true", help="n=20000, 50 queries, 1 pass: a smoke run")
    ap.add_argument("--sweep", action="store_true", help="parameter sweep at dim 256 (the defaults table)")
    ap.add_argument("--npy", help="real embeddings instead: ROWS.npy[,QUERIES.npy] (float32 unit rows)")
    ap.add_argument("--precision", action="store_true", help="cost and effect of float64 decisions")
    ap.add_argument("--nlist", type=int, help="IVF nlist (default: the ragtui default rule)")
    ap.add_argument("--nprobe", type=int, help="IVF nprobe (default: the ragtui default rule)")
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.n.split(",")]
    dims = [int(x) for x in args.dims.split(",")]
    if args.quick:
        ns, args.queries, args.repeats = [min(ns[0], 20000)], 50, 1
    if args.npy:
        dims = dims[:1]  # the file fixes the dimension
    print(environment())
    if args.precision:
        for dim in dims:
            precision(ns[0], dim, args.noise, args.npy)
    elif args.sweep:
        sweep(ns, dims[0], args.queries, args.repeats, args.noise, args.npy)
    else:
        params = IVFParams(nlist=args.nlist, nprobe=args.nprobe)
        for dim in dims:
            compare(ns[0], dim, args.queries, args.repeats, args.noise, params, args.npy)
    print(f"\nend: {environment()}")


if __name__ == "__main__":
    main()
