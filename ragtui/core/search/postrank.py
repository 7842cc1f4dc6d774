"""What happens to a ranking after the mode ranked it: a score floor, MMR diversity, merging neighbours.

* ``floor_scores``: the score ``min_score`` is compared with (spec/ranking.md):
  BM25 and bm25doc their raw score, flat and IVF the cosine (-1..1), hybrid
  its fused score on 0..1 (weighted fusion is already there; rrf is divided
  by its largest possible value, 2 / (rrf_k + 1)).
* ``mmr``: maximal marginal relevance (Carbonell and Goldstein, 1998) over the
  candidates: repeatedly take the chunk maximising
  ``lam * relevance - (1 - lam) * max similarity to those taken``, relevance
  min-max normalised over the candidates, similarity the cosine of the chunk
  vectors or, without vectors, the Jaccard overlap of the chunks' terms.
  ``lam = 1`` is the ranking unchanged. Ties go to the lower chunk number.
* ``merge_text``: the union of two chunk texts of one document that overlap or
  touch (the chunker's windows share up to ``overlap`` tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ragtui.core.search.layered import LayeredVectors

__all__ = ["floor_scores", "merge_text", "mmr"]


def floor_scores(mode: str, scores: np.ndarray, fusion_method: str | None = None,
                 rrf_k: float | None = None) -> npt.NDArray[np.float64]:
    """The scores ``min_score`` is compared with, for ``mode`` (see the module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    if mode == "hybrid" and fusion_method == "rrf":
        return s / (2.0 / ((rrf_k if rrf_k is not None else 60.0) + 1.0))
    if mode == "hybrid" and fusion_method == "zscore":
        # z-scores have no fixed top: relative to the best of the query's candidates.
        top = float(s.max()) if s.size else 0.0
        return s / top if top > 0 else np.zeros_like(s)
    return s


def mmr(
    rows: np.ndarray,
    scores: np.ndarray,
    k: int,
    lam: float,
    vectors: np.ndarray | LayeredVectors | None = None,
    terms: Callable[[int], set[str]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` of (rows, scores) MMR picks, in the order picked, with their original scores.

    ``vectors`` (unit rows, indexed by chunk row) gives the similarity; without
    them ``terms(row)`` (a chunk's analysed terms) gives the Jaccard overlap.
    """
    n = int(rows.size)
    k = min(k, n)
    if k <= 0 or lam >= 1.0:
        return rows[:k], scores[:k]
    s = np.asarray(scores, dtype=np.float64)
    lo, hi = float(s.min()), float(s.max())
    rel = (s - lo) / (hi - lo) if hi > lo else np.ones(n)
    if vectors is not None and vectors.ndim == 2 and vectors.shape[1] > 0:
        cand = np.asarray(vectors[rows], dtype=np.float64)
        sim = cand @ cand.T
    else:
        if terms is None:
            raise ValueError("mmr needs vectors or terms")
        sets = [terms(int(r)) for r in rows.tolist()]
        sim = np.array([[_jaccard(a, b) for b in sets] for a in sets], dtype=np.float64) if n else np.zeros((0, 0))
    chosen: list[int] = []
    closest = np.full(n, -np.inf)
    left = np.ones(n, dtype=bool)
    order = np.asarray(rows, dtype=np.int64)
    for _ in range(k):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        value = lam * rel - (1.0 - lam) * penalty
        value[~left] = -np.inf
        best = float(value.max())
        ties = np.flatnonzero(value == best)
        pick = int(ties[np.argmin(order[ties])])
        chosen.append(pick)
        left[pick] = False
        closest = np.maximum(closest, sim[:, pick])
    idx = np.array(chosen, dtype=np.int64)
    return rows[idx], scores[idx]


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def merge_text(texts: Sequence[str]) -> str:
    """The union of consecutive chunk texts: each next text joined where it overlaps the one before,
    else after a line break (chunks that only touch lose the whitespace between them)."""
    out = texts[0] if texts else ""
    for nxt in texts[1:]:
        out = _join(out, nxt)
    return out


def _join(a: str, b: str) -> str:
    if not b:
        return a
    head = b[: min(len(b), 8)]  # short: the shared part may be a few characters
    p = a.find(head)
    while p != -1:
        if b.startswith(a[p:]):
            return a[:p] + b
        if a.startswith(b, p):
            return a  # b lies inside a
        p = a.find(head, p + 1)
    return f"{a}\n{b}"
