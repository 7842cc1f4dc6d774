"""Top-k selection with the project's one tie rule: descending score, then ascending row.

BM25 (``core.index``) and the flat and fusion searches (``core.search``) rank
with it, so it sits at core's root, beside ``errors`` and ``textsafe``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["top_k"]


def top_k(scores: np.ndarray, rows: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the best ``k`` of ``scores``: (rows int64, scores), desc score, ties asc row.

    ``rows`` names the row of each score (None: the position is the row); the
    rows need not be sorted. ``k`` larger than the candidates returns them all.
    """
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64), scores[:0].copy()
    if k < n:
        # Introselect by value (np.partition, argpartition's value form), then keep
        # every candidate >= the k-th value: rows tied with the k-th score all stay
        # in, so the final sort can keep the lowest of them.
        kth = np.partition(scores, n - k)[n - k]
        keep = np.flatnonzero(scores >= kth)
    else:
        keep = np.arange(n)
    kept_scores = scores[keep]
    kept_rows = keep.astype(np.int64) if rows is None else rows[keep].astype(np.int64, copy=False)
    # lexsort: last key is primary (score descending), then row ascending.
    order = np.lexsort((kept_rows, -kept_scores))[:k]
    return kept_rows[order], kept_scores[order]
