"""Ranking metrics over one query: nDCG, recall, precision, reciprocal rank, hit.

``ranked`` is the system's ranking (ids, best first, no repeats);
``qrels`` maps relevant ids to graded gains (> 0; ids with gain ≤ 0 are not
relevant). nDCG uses linear gains and log2 discounts, as trec_eval does:
DCG@k = Σ_{i=1..k} gain_i / log2(i + 1), divided by the DCG of the ideal
ordering of the judged gains.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["hit_rate", "mrr", "ndcg", "paired_randomization_test", "precision", "recall"]


def _relevant(qrels: Mapping[str, float]) -> dict[str, float]:
    return {d: g for d, g in qrels.items() if g > 0}


def ndcg(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    rel = _relevant(qrels)
    if not rel:
        return 0.0
    dcg = sum(rel.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    rel = _relevant(qrels)
    if not rel:
        return 0.0
    return sum(1 for d in ranked[:k] if d in rel) / len(rel)


def precision(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    rel = _relevant(qrels)
    return sum(1 for d in ranked[:k] if d in rel) / k


def mrr(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    rel = _relevant(qrels)
    for i, d in enumerate(ranked[:k]):
        if d in rel:
            return 1.0 / (i + 1)
    return 0.0


def hit_rate(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    rel = _relevant(qrels)
    return 1.0 if any(d in rel for d in ranked[:k]) else 0.0


# Up to this many queries every sign pattern is enumerated (2**n of them): an exact p-value.
_EXACT_MAX_N = 16


def paired_randomization_test(
    a: Sequence[float], b: Sequence[float], *, permutations: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value that paired per-query scores ``a`` and ``b`` come from one system.

    The statistic is |mean(b − a)|; under the null each query's difference is
    as likely negative as positive, so its sign is flipped at random. For at
    most 16 queries all 2**n sign patterns are enumerated (exact); otherwise
    ``permutations`` random patterns from ``numpy.random.default_rng(seed)``
    give p = (1 + #{|mean| ≥ observed}) / (1 + permutations), never 0. The
    same inputs and seed always give the same p. All-zero differences give 1.
    """
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if va.ndim != 1 or va.shape != vb.shape:
        raise ValueError("a and b must be equal-length sequences of numbers")
    d = vb - va
    n = d.size
    if n == 0:
        return 1.0
    observed = abs(d.mean())
    # Means that differ from the observed one only by rounding count as equal.
    tol = 1e-12 * max(1.0, float(np.abs(d).sum()) / n)
    if n <= _EXACT_MAX_N:
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        stats = np.abs(patterns @ d) / n
        return float(np.count_nonzero(stats >= observed - tol) / stats.size)
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < permutations:  # in blocks: bounded memory for any n
        m = min(1000, permutations - done)
        signs = rng.integers(0, 2, size=(m, n), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ d) / n >= observed - tol))
        done += m
    return (1 + hits) / (1 + permutations)
