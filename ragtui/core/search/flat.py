"""Flat (exact) vector retrieval: score every row, keep the best k.

What callers may rely on:

- A row's score is ``float32`` and is computed by one dot-product kernel per
  row (``row_scores``), so it does not depend on which other rows are scored
  with it. IVF scores its probed rows with the same function, which is why IVF
  with ``nprobe = nlist`` returns flat's rows and bit-identical scores.
- Results are ranked by descending score, ties by ascending row, and the tie
  rule holds at the k boundary too: of rows tied with the k-th score, the
  lowest rows are kept.
- ``vectors`` may be a read-only ``np.memmap``; it is never written or
  copied (a query allocates a few arrays of one value per row).
"""

from __future__ import annotations

import numpy as np

from ragtui.core.errors import UsageError
from ragtui.core.index.topk import top_k

__all__ = ["as_query", "as_vectors", "flat_search", "flat_search_batch", "row_scores", "top_k", "vecdot"]

def as_query(query: np.ndarray, dim: int) -> np.ndarray:
    """Return ``query`` as a contiguous float32 vector of length ``dim``.

    Raises UsageError for a wrong shape or a non-finite value, so a bad query
    can never produce a silently bad ranking.
    """
    q = np.ascontiguousarray(query, dtype=np.float32)
    if q.ndim != 1 or q.shape[0] != dim:
        raise UsageError(f"query has shape {q.shape}, expected ({dim},)")
    if not np.isfinite(q).all():
        raise UsageError("query has a non-finite value")
    return q


def as_vectors(vectors: np.ndarray) -> np.ndarray:
    """Return ``vectors`` as a 2-D float32 array (a float32 memmap is used as is, not copied)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise UsageError(f"vectors have shape {v.shape}, expected (n, dim)")
    return v


def _einsum_vecdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # pragma: no cover - numpy 1.26
    dots: np.ndarray = np.einsum("...i,...i->...", a, b)
    return dots


#: Dot products over the last axis, broadcasting the others: ``np.vecdot`` on
#: numpy >= 2 (one BLAS dot per pair), an einsum loop before. Unlike a matrix
#: product (BLAS gemv/gemm, whose rounding depends on where an element falls in
#: its blocks), equal inputs give equal bits wherever they sit in the arrays;
#: tests/unit/test_flat.py and test_ivf.py pin that property.
vecdot = getattr(np, "vecdot", _einsum_vecdot)


def row_scores(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Return ``vectors @ query`` as float32, computed by ``vecdot``: a row's score
    has the same bits whatever array the row is part of."""
    return np.asarray(vecdot(vectors, query), dtype=np.float32)


def flat_search(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Score every row of ``vectors`` (n, dim) against ``query`` and return the best ``k``.

    Returns (rows int64, scores float32), descending score, ties ascending row;
    ``min(k, n)`` results (none when n == 0 or k == 0). Raises UsageError for a
    negative k, a query of the wrong length or a non-finite query.
    """
    v = as_vectors(vectors)
    if k < 0:
        raise UsageError(f"k must be >= 0, got {k}")
    q = as_query(query, v.shape[1])
    if v.shape[0] == 0 or k == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    return top_k(row_scores(v, q), None, k)


def flat_search_batch(vectors: np.ndarray, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Run ``flat_search`` for each row of ``queries`` (m, dim); same results, one per query.

    Each query is scored on its own (not as one matrix product) so a batch
    returns exactly the bits the single-query path returns.
    """
    qs = np.asarray(queries, dtype=np.float32)
    if qs.ndim != 2:
        raise UsageError(f"queries have shape {qs.shape}, expected (m, dim)")
    return [flat_search(vectors, q, k) for q in qs]
