"""How the UI writes numbers and times. Every time-dependent string goes through here.

Snapshot tests replace ``ms`` and ``when`` to keep screenshots deterministic,
so widgets call them as ``fmt.ms(...)`` (looked up at call time).
"""

from __future__ import annotations

from ragtui.core.search.modes import LEXICAL_MODES

__all__ = ["left_cut", "ms", "score", "seconds", "when"]


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

    BM25 scores (and bm25doc's) are unbounded sums (two decimals); cosine similarities
    (flat, IVF) and fused scores lie near [-1, 1] (four decimals); a fused
    score from reciprocal ranks is small, so it gets significant digits.
    """
    if mode in LEXICAL_MODES:
        return f"{value:.2f}"
    if mode == "hybrid" and 0 < abs(value) < 0.1:
        return f"{value:.4g}"
    return f"{value:.4f}"


def left_cut(name: str, width: int) -> str:
    """``name`` (a chunk_id or a path) neutralised on one line, cut to ``width`` cells from the left of its
    path: the file name and ``#k`` at its end stay visible (``…/retrievers.md#2``), and the cut falls after a
    "/" when one is near."""
    from ragtui.core.search.kwic import cells
    from ragtui.core.textsafe import inline

    text = inline(name)
    width = max(2, width)
    if cells(text) <= width:
        return text
    used, start = 0, len(text)
    while start > 0 and used + cells(text[start - 1]) <= width - 1:
        start -= 1
        used += cells(text[start])
    tail = text[start:]
    keep = len(tail)
    slash = tail.find("/")
    if 0 <= slash < len(tail) - 1 and slash <= keep // 3:
        tail = tail[slash:]  # "…/name.md#2" rather than "…me/name.md#2"
    return "…" + tail
