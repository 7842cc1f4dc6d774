"""How the UI writes numbers and times. Every time-dependent string goes through here.

Snapshot tests replace ``ms`` and ``when`` to keep screenshots deterministic,
so widgets call them as ``fmt.ms(...)`` (looked up at call time).
"""

from __future__ import annotations

__all__ = ["ms", "score", "seconds", "when"]


def ms(seconds: float) -> str:
    """A duration in milliseconds, with a precision that suits its size."""
    value = seconds * 1000.0
    if value < 10:
        return f"{value:.2f} ms"
    if value < 100:
        return f"{value:.1f} ms"
    return f"{value:.0f} ms"


def seconds(value: float) -> str:
    """A longer duration (IVF builds, syncs)."""
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def when(created_at: str) -> str:
    """``created_at`` from meta.json, shown as written (UTC, whole seconds)."""
    return created_at


def score(value: float, mode: str) -> str:
    """A score in the form that means something for ``mode``.

    BM25 scores are unbounded sums (two decimals); cosine similarities
    (flat, IVF) and fused scores lie near [-1, 1] (four decimals); a fused
    score from reciprocal ranks is small, so it gets significant digits.
    """
    if mode == "bm25":
        return f"{value:.2f}"
    if mode == "hybrid" and 0 < abs(value) < 0.1:
        return f"{value:.4g}"
    return f"{value:.4f}"
