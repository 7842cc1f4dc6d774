"""The IVF default nprobe calibrates itself: recall@10 against flat on deterministic pseudo-queries."""

from __future__ import annotations

import numpy as np

from ragtui.core.search.flat import flat_search
from ragtui.core.search.ivf import (
    CALIBRATION_K,
    CALIBRATION_TARGET,
    IVFParams,
    build_ivf,
    build_ivf_cached,
    calibration_queries,
)


def clustered(n: int, dim: int, centres: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim))
    v = c[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, dim))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


def measured_recall(index, vectors, queries, nprobe: int) -> float:
    """The plain reference: IVF search against flat search, query by query."""
    found = 0
    for q in queries:
        exact = set(flat_search(vectors, q, CALIBRATION_K)[0].tolist())
        found += len(exact & set(index.search(q, CALIBRATION_K, nprobe=nprobe)[0].tolist()))
    return found / (CALIBRATION_K * len(queries))


def test_calibrated_nprobe_is_the_smallest_that_reaches_the_target():
    v = clustered(6000, 16, 40)
    index = build_ivf(v, "calib-test")
    nprobe, recall = index.calibration
    queries = calibration_queries(v, "calib-test")
    assert index.default_nprobe == nprobe and 1 <= nprobe <= index.nlist
    assert recall >= CALIBRATION_TARGET
    assert abs(measured_recall(index, v, queries, nprobe) - recall) < 1e-9  # agrees with real searches
    floor = -(-2048 * index.nlist // v.shape[0])
    if nprobe > floor:
        assert measured_recall(index, v, queries, nprobe - 1) < CALIBRATION_TARGET
    # A search without nprobe uses it.
    q = queries[0]
    assert index.search(q, 10)[0].tolist() == index.search(q, 10, nprobe=nprobe)[0].tolist()


def test_calibration_is_deterministic_and_seeded_by_the_index_id(tmp_path):
    v = clustered(3000, 8, 20, seed=1)
    a, b = build_ivf(v, "same-id"), build_ivf(v, "same-id")
    assert a.calibration == b.calibration
    assert np.array_equal(calibration_queries(v, "same-id"), calibration_queries(v, "same-id"))
    assert not np.array_equal(calibration_queries(v, "same-id"), calibration_queries(v, "other-id"))
    cached = build_ivf_cached(v, "same-id", None, tmp_path)
    again = build_ivf_cached(v, "same-id", None, tmp_path)
    assert again.from_cache and again.calibration == cached.calibration == a.calibration


def test_a_user_nprobe_is_not_calibrated_and_a_small_index_stays_exact():
    v = clustered(3000, 8, 20, seed=2)
    fixed = build_ivf(v, "fixed", IVFParams(nprobe=3))
    assert fixed.calibration is None and fixed.default_nprobe == 3
    small = build_ivf(clustered(1500, 8, 10), "small")
    assert small.default_nprobe == small.nlist  # at most 2,048 rows: every list, as before
