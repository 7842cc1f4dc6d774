"""Hybrid retrieval: fuse a lexical (BM25) and a vector ranking into one.

Three methods, all over each retriever's top ``depth`` candidates:

* ``rrf`` — reciprocal-rank fusion: score = Σ 1 / (rrf_k + rank), rank from 1.
* ``weighted`` — each list's scores min–max normalised to [0, 1] over its
  candidates (a chunk missing from a list gets 0 there), then
  ``weight · bm25 + (1 − weight) · vector``.
* ``zscore`` — as ``weighted``, but each list's scores are shifted to start
  at 0 and divided by their standard deviation over the candidates
  (z-scores, a missing chunk at the list's lowest): a list whose best
  scores stand far above the rest (a peaked query) weighs more than one
  whose scores are all alike, where min–max gives every list's best a 1.

Which method and weight hybrid uses by default depends on the embedder
(``fusion_fit``).

Ties are broken by ascending chunk number, as everywhere else.
"""

from __future__ import annotations

import difflib
import math
from typing import SupportsFloat, SupportsIndex

import numpy as np

from ragtui.core.errors import UsageError
from ragtui.core.index.topk import top_k
from ragtui.core.search.ranking_options import RANGES

__all__ = [
    "DEFAULT_DEPTH", "DEFAULT_FUSION", "DEFAULT_RRF_K", "DEFAULT_WEIGHT", "FUSIONS", "RRF_K_RANGE", "WEIGHTED",
    "WEIGHT_RANGE", "extend", "fuse", "normalise", "resolve",
]

FUSIONS = ("rrf", "weighted", "zscore")
WEIGHTED = ("weighted", "zscore")
"""The methods that take a ``weight`` (the lexical share)."""
# For an embedder fusion_fit.FITTED does not know: weighted 0.6 over document-aware BM25.
DEFAULT_FUSION = "weighted"
DEFAULT_WEIGHT = 0.6
DEFAULT_RRF_K = 60
DEFAULT_DEPTH = 100
WEIGHT_RANGE = RANGES["weight"]
RRF_K_RANGE = RANGES["rrf_k"]


def fuse(
    lexical: tuple[np.ndarray, np.ndarray],
    vector: tuple[np.ndarray, np.ndarray],
    k: int,
    *,
    method: str | None = DEFAULT_FUSION,
    weight: float | None = None,
    rrf_k: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Fuse two ranked (rows, scores) lists into the top ``k`` (rows, fused scores).

    The parameters are checked by ``resolve`` (``UsageError``).
    """
    method, weight, rrf_k = resolve(method, weight, rrf_k)
    rows = _union(lexical[0], vector[0])
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
            fused[pos] += share * normalise(lscores, method)
    return top_k(fused, rows, k)


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct rows of both lists as int64: ``np.union1d``'s result, without its
    ``np.unique``, which imports ``numpy.ma`` (some 20 ms of a one-query process)."""
    both = np.concatenate((a, b), axis=None)
    both.sort()
    if both.size > 1:
        keep = np.empty(both.size, dtype=bool)
        keep[0] = True
        np.not_equal(both[1:], both[:-1], out=keep[1:])
        both = both[keep]
    return both.astype(np.int64)


def normalise(scores: np.ndarray, method: str) -> np.ndarray:
    """One list's scores as ``method`` (weighted or zscore) adds them up; a list of equal scores gives ones."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s
    lo, hi = float(s.min()), float(s.max())
    if method == "zscore":
        sd = float(s.std())
        return (s - lo) / sd if sd > 0 else np.ones_like(s)
    return (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)


def extend(
    rows: np.ndarray, scores: np.ndarray, deeper: tuple[np.ndarray, np.ndarray], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` then the rows of ``deeper`` it lacks, up to ``k``; each appended score is capped
    at the one before it, so scores never increase down the ranking."""
    have = set(rows.tolist())
    extra = [(r, s) for r, s in zip(deeper[0].tolist(), deeper[1].tolist()) if r not in have][: max(0, k - rows.size)]
    if not extra:
        return rows, scores
    floor = float(scores[-1]) if scores.size else np.inf
    tail = []
    for _, s in extra:
        floor = min(floor, float(s))
        tail.append(floor)
    return (np.concatenate([rows, np.array([r for r, _ in extra], dtype=np.int64)]),
            np.concatenate([np.asarray(scores, dtype=np.float64), np.array(tail, dtype=np.float64)]))


def resolve(method: object, weight: object = None, rrf_k: object = None) -> tuple[str, float, float]:
    """Check fusion parameters and fill in defaults: (method, weight, rrf_k).

    ``weight`` (default ``DEFAULT_WEIGHT``) belongs to weighted and zscore
    fusion and ``rrf_k`` (default ``DEFAULT_RRF_K``) to rrf: giving one to
    the other method is a ``UsageError``, not a value silently ignored.
    """
    method = DEFAULT_FUSION if method is None else method
    if method not in FUSIONS:
        close = difflib.get_close_matches(str(method), FUSIONS, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"unknown fusion {method!r}{hint}: choose one of {', '.join(FUSIONS)}")
    if method == "rrf" and weight is not None:
        raise UsageError("weight applies to weighted fusion, not rrf (leave it out, or use fusion 'weighted')")
    if method in WEIGHTED and rrf_k is not None:
        raise UsageError(f"rrf_k applies to rrf fusion, not {method} (leave it out, or use fusion 'rrf')")
    weight = DEFAULT_WEIGHT if weight is None else _number("fusion weight", weight)
    if not WEIGHT_RANGE[0] <= weight <= WEIGHT_RANGE[1]:
        raise UsageError(f"fusion weight must be from 0 to 1 (got {weight:g})")
    rrf_k = DEFAULT_RRF_K if rrf_k is None else _number("rrf_k", rrf_k)
    if not RRF_K_RANGE[0] <= rrf_k <= RRF_K_RANGE[1]:
        raise UsageError(f"rrf_k must be from 0 to 1000000 (got {rrf_k:g})")
    return method, weight, rrf_k


def _number(name: str, value: object) -> float:
    """``value`` as a finite float (``UsageError`` for anything else)."""
    if isinstance(value, bool) or not isinstance(value, str | SupportsFloat | SupportsIndex):
        raise UsageError(f"{name} must be a number (got {value!r})")
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name} must be a number (got {value!r})") from None
    if not math.isfinite(out):
        raise UsageError(f"{name} must be a finite number (got {value!r})")
    return out
