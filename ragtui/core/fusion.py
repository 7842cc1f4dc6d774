"""Hybrid retrieval: fuse a lexical (BM25) and a vector ranking into one.

Two methods, both over each retriever's top ``depth`` candidates:

* ``rrf`` — reciprocal-rank fusion: score = Σ 1 / (rrf_k + rank), rank from 1.
* ``weighted`` — each list's scores min–max normalised to [0, 1] over its
  candidates (a chunk missing from a list gets 0 there), then
  ``weight · bm25 + (1 − weight) · vector``.

Ties are broken by ascending chunk number, as everywhere else.
"""

from __future__ import annotations

import numpy as np

from ragtui.core.errors import UsageError
from ragtui.core.topk import top_k

__all__ = ["DEFAULT_DEPTH", "DEFAULT_FUSION", "DEFAULT_RRF_K", "DEFAULT_WEIGHT", "FUSIONS", "fuse"]

FUSIONS = ("rrf", "weighted")
# Chosen on SciFact's train queries with the embedded default embedder; see
# bench/hybrid_choice.py and the README's retrieval-quality section.
DEFAULT_FUSION = "weighted"
DEFAULT_WEIGHT = 0.6
DEFAULT_RRF_K = 60
DEFAULT_DEPTH = 100


def fuse(
    lexical: tuple[np.ndarray, np.ndarray],
    vector: tuple[np.ndarray, np.ndarray],
    k: int,
    *,
    method: str = DEFAULT_FUSION,
    weight: float = DEFAULT_WEIGHT,
    rrf_k: float = DEFAULT_RRF_K,
) -> tuple[np.ndarray, np.ndarray]:
    """Fuse two ranked (rows, scores) lists into the top ``k`` (rows, fused scores)."""
    if method not in FUSIONS:
        raise UsageError(f"unknown fusion {method!r}: choose one of {', '.join(FUSIONS)}")
    if not 0.0 <= weight <= 1.0:
        raise UsageError(f"fusion weight must be between 0 and 1 (got {weight})")
    rows = np.union1d(lexical[0], vector[0]).astype(np.int64)
    if rows.size == 0:
        return rows, np.zeros(0, dtype=np.float64)
    fused = np.zeros(rows.size, dtype=np.float64)
    for (lrows, lscores), share in ((lexical, weight), (vector, 1.0 - weight)):
        if lrows.size == 0:
            continue
        pos = np.searchsorted(rows, lrows)
        if method == "rrf":
            fused[pos] += 1.0 / (rrf_k + np.arange(1, lrows.size + 1, dtype=np.float64))
        else:
            s = np.asarray(lscores, dtype=np.float64)
            lo, hi = float(s.min()), float(s.max())
            norm = (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)
            fused[pos] += share * norm
    return top_k(fused, rows, k)
