"""Flat retrieval: the argpartition fast path against a plain full stable sort."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.errors import UsageError
from ragtui.core.search.flat import flat_search, flat_search_batch, row_scores, top_k


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def reference_search(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[list[int], list[float]]:
    """Plain reference: score every row, sort all of them by (-score, row), cut at k."""
    scores = row_scores(np.asarray(vectors, dtype=np.float32), np.asarray(query, dtype=np.float32))
    order = sorted(range(len(scores)), key=lambda r: (-float(scores[r]), r))[:k]
    return order, [float(scores[r]) for r in order]


def assert_matches_reference(vectors: np.ndarray, query: np.ndarray, k: int) -> None:
    rows, scores = flat_search(vectors, query, k)
    ref_rows, ref_scores = reference_search(vectors, query, k)
    assert rows.dtype == np.int64 and scores.dtype == np.float32
    assert rows.tolist() == ref_rows
    assert scores.tolist() == ref_scores


def test_matches_reference_on_random_rows() -> None:
    rng = np.random.default_rng(1)
    v = unit_rows(rng, 500, 32)
    for q in unit_rows(rng, 5, 32):
        for k in (1, 2, 10, 499, 500, 501):
            assert_matches_reference(v, q, k)


def test_ties_at_the_k_boundary_keep_the_lowest_rows() -> None:
    rng = np.random.default_rng(2)
    base = unit_rows(rng, 4, 16)
    # 300 rows drawn from 4 distinct vectors: every score is tied with ~75 others.
    v = base[rng.integers(0, 4, 300)]
    q = unit_rows(rng, 1, 16)[0]
    for k in range(302):
        assert_matches_reference(v, q, k)
    rows, _ = flat_search(v, q, 5)
    best = int(np.argmax(base @ q))
    assert rows.tolist() == np.flatnonzero((v == base[best]).all(axis=1))[:5].tolist()


def test_scores_are_the_dot_products() -> None:
    rng = np.random.default_rng(3)
    v = unit_rows(rng, 200, 24)
    q = unit_rows(rng, 1, 24)[0]
    rows, scores = flat_search(v, q, 200)
    exact = v.astype(np.float64)[rows] @ q.astype(np.float64)
    np.testing.assert_allclose(scores, exact, rtol=0, atol=1e-6)
    assert (np.diff(scores) <= 0).all()


def test_row_scores_do_not_depend_on_the_other_rows() -> None:
    # IVF scores subsets of rows; its nprobe = nlist results equal flat's only
    # because a row's score bits do not depend on where the row sits.
    rng = np.random.default_rng(4)
    v = unit_rows(rng, 3000, 256)
    q = unit_rows(rng, 1, 256)[0]
    full = row_scores(v, q)
    for _ in range(50):
        idx = np.sort(rng.choice(3000, size=int(rng.integers(1, 700)), replace=False))
        assert np.array_equal(row_scores(v[idx], q), full[idx])
        start = int(rng.integers(0, 2990))
        assert np.array_equal(row_scores(v[start : start + 7], q), full[start : start + 7])
    assert all(row_scores(v[i : i + 1], q)[0] == full[i] for i in range(0, 3000, 97))


def test_readonly_memmap_gives_the_same_results(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    v = unit_rows(rng, 400, 48)
    path = tmp_path / "vectors.f32"
    v.tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=(400, 48))
    q = unit_rows(rng, 1, 48)[0]
    a_rows, a_scores = flat_search(mm, q, 10)
    b_rows, b_scores = flat_search(v, q, 10)
    assert a_rows.tolist() == b_rows.tolist()
    assert np.array_equal(a_scores, b_scores)


def test_edge_cases() -> None:
    rng = np.random.default_rng(6)
    v = unit_rows(rng, 3, 8)
    q = unit_rows(rng, 1, 8)[0]
    rows, scores = flat_search(v, q, 10)
    assert len(rows) == 3 and len(scores) == 3
    rows, scores = flat_search(v, q, 0)
    assert rows.shape == (0,) and scores.shape == (0,)
    rows, scores = flat_search(np.empty((0, 8), np.float32), q, 5)
    assert rows.shape == (0,) and rows.dtype == np.int64 and scores.dtype == np.float32
    for bad in (lambda: flat_search(v, q, -1),
                lambda: flat_search(v, q[:7], 3),
                lambda: flat_search(v, np.full(8, np.nan, np.float32), 3),
                lambda: flat_search(v[0], q, 3)):
        with pytest.raises(UsageError):
            bad()


def test_batch_returns_the_single_query_results() -> None:
    rng = np.random.default_rng(7)
    v = unit_rows(rng, 300, 16)
    qs = unit_rows(rng, 4, 16)
    for (rows, scores), q in zip(flat_search_batch(v, qs, 7), qs, strict=True):
        r1, s1 = flat_search(v, q, 7)
        assert rows.tolist() == r1.tolist() and np.array_equal(scores, s1)


def test_top_k_with_explicit_unsorted_rows() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.9, 0.1], dtype=np.float32)
    rows = np.array([40, 30, 20, 10, 0], dtype=np.int64)
    got_rows, got_scores = top_k(scores, rows, 3)
    assert got_rows.tolist() == [10, 30, 20]
    assert got_scores.tolist() == pytest.approx([0.9, 0.9, 0.5])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(-3, 3), min_size=0, max_size=40),
    k=st.integers(0, 45),
)
def test_top_k_property(values: list[int], k: int) -> None:
    # Small integer scores force many exact ties, the case argpartition gets wrong.
    scores = np.array(values, dtype=np.float32)
    rows, got = top_k(scores, None, k)
    expected = sorted(range(len(values)), key=lambda r: (-values[r], r))[:k]
    assert rows.tolist() == expected
    assert got.tolist() == [float(values[r]) for r in expected]
