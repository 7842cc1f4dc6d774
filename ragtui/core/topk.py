"""Top-k selection with the project's one tie rule: descending score, then ascending row."""

from __future__ import annotations

import numpy as np

__all__ = ["top_k"]


def top_k(scores: np.ndarray, k: int, candidates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return (rows int64, scores) of the best ``k`` among ``candidates`` (default: all rows).

    Partial selection by ``argpartition``; every row tied with the k-th score
    is kept until the final sort, so ties at the boundary go to the lowest rows.
    ``candidates`` must be ascending.
    """
    if candidates is None:
        candidates = np.arange(scores.shape[0], dtype=np.int64)
    else:
        candidates = np.asarray(candidates, dtype=np.int64)
    if k <= 0 or candidates.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=scores.dtype)
    cand_scores = scores[candidates]
    if candidates.size > k:
        part = np.argpartition(-cand_scores, k - 1)[:k]
        kth = cand_scores[part].min()
        keep = np.flatnonzero(cand_scores >= kth)
        candidates = candidates[keep]
        cand_scores = cand_scores[keep]
    order = np.lexsort((candidates, -cand_scores))[:k]
    return candidates[order], cand_scores[order]
