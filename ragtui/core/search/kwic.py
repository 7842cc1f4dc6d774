"""Key-word-in-context: which query terms matter, where they sit in a chunk, and a one-line snippet around them.

Shared by ``ragtui search`` and the TUI, so both show the same words lit and the same window of text:

* ``term_weights(bm25, query)``: each query term (by the index's own BM25
  analyzer) with its idf in that index; ``salient(weights)`` keeps those
  worth showing, dropping the ones whose idf is near zero next to the
  query's strongest term (an "a" or "the" found in most chunks).
* ``marks(text, weights)``: the spans of ``text`` whose word analyses to one
  of those terms, which is exactly when the word counted for BM25.
* ``snippet(text, weights, width)``: one line of at most ``width`` terminal
  cells, neutralised (``core.textsafe``), whose window covers the most weight
  of distinct matched terms and is centred on them; "…" where text was cut.

Pure functions over strings (and a decoded ``BM25Index`` for the weights): no
terminal, no UI library.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragtui.core.index.analyzer import TERM_PATTERN, analyze, go_lower
from ragtui.core.textsafe import neutralize

if TYPE_CHECKING:
    from ragtui.core.index.bm25 import BM25Index

__all__ = ["SALIENT_FRACTION", "Mark", "Snippet", "cells", "marks", "salient", "snippet", "term_weights"]

SALIENT_FRACTION = 0.25
"""A term is shown lit when its idf is at least this fraction of the query's highest idf."""

MAX_MARKS = 4096
"""Marks considered per text: a chunk that repeats one word a million times costs no more than this."""

ELLIPSIS = "…"


@dataclass(frozen=True)
class Mark:
    """A matched word: ``text[start:end]`` analyses to ``term``, whose relative weight is ``weight`` (0..1]."""

    start: int
    end: int
    term: str
    weight: float


@dataclass(frozen=True)
class Snippet:
    """One line of text (neutralised, whitespace runs as one space) and the matched words in it."""

    text: str
    marks: tuple[Mark, ...]


def term_weights(bm25: BM25Index | None, query: str) -> dict[str, float]:
    """Each distinct term of ``query`` with its idf in ``bm25`` (terms the index lacks are left out).

    Without an index (None) every term weighs 1.0. The idf is BM25's own,
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``.
    """
    terms = dict.fromkeys(analyze(query))
    if bm25 is None:
        return dict.fromkeys(terms, 1.0)
    out: dict[str, float] = {}
    n = bm25.n_docs
    for term in terms:
        t = bm25.lookup(term)
        if t >= 0:
            df = float(bm25.df[t])
            out[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return out


def salient(weights: Mapping[str, float], fraction: float = SALIENT_FRACTION) -> dict[str, float]:
    """The terms worth lighting, each weight scaled to (0, 1] by the strongest: those with at least
    ``fraction`` of the highest weight (so a lone weak term is still shown when it is all there is)."""
    top = max(weights.values(), default=0.0)
    if top <= 0.0:
        return {}
    return {term: w / top for term, w in weights.items() if w / top >= fraction}


def _term_of(word: str) -> str:
    return word.lower() if word.isascii() else go_lower(word)


def marks(text: str, weights: Mapping[str, float]) -> list[Mark]:
    """The words of ``text`` whose term is in ``weights`` (at most ``MAX_MARKS``), in order."""
    out: list[Mark] = []
    if not weights:
        return out
    for match in TERM_PATTERN.finditer(text):
        term = _term_of(match.group())
        weight = weights.get(term)
        if weight is not None and weight > 0.0:
            out.append(Mark(match.start(), match.end(), term, weight))
            if len(out) >= MAX_MARKS:
                break
    return out


@functools.lru_cache(maxsize=4096)
def _cell(ch: str) -> int:
    if ch < "\u0300":
        return 1
    if unicodedata.combining(ch) or ch in "\u200b\u200c\u200d\u2060\ufeff":
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


_NOT_NARROW_FOR_SURE = re.compile("[\u0300-\U0010ffff]")
"""The characters whose width must be looked up (everything below U+0300 takes one cell)."""


def cells(text: str) -> int:
    """The terminal cells ``text`` takes (wide characters two, combining marks none)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(_cell(ch) - 1 for ch in _NOT_NARROW_FOR_SURE.findall(text))


def _cut(text: str, start: int, width: int) -> int:
    """The end index of the longest run of ``text`` from ``start`` fitting in ``width`` cells."""
    if text.isascii():
        return min(len(text), start + max(0, width))
    used, i = 0, start
    while i < len(text):
        w = _cell(text[i])
        if used + w > width:
            break
        used += w
        i += 1
    return i


def _back(text: str, end: int, width: int) -> int:
    """The start index of the longest run of ``text`` ending at ``end`` fitting in ``width`` cells."""
    if text.isascii():
        return max(0, end - max(0, width))
    used, i = 0, end
    while i > 0:
        w = _cell(text[i - 1])
        if used + w > width:
            break
        used += w
        i -= 1
    return i


def _best_window(found: list[Mark], room: int) -> tuple[int, int]:
    """(first, last) mark of the run spanning at most ``room`` characters with the most distinct weight.

    Ties go to the earliest run. Sliding window, linear in the marks.
    """
    best, best_score = (0, 0), -1.0
    counts: dict[str, int] = {}
    score = 0.0
    j = 0
    for i in range(len(found)):
        if j < i:
            j = i
        while j < len(found) and (j == i or found[j].end - found[i].start <= room):
            term = found[j].term
            counts[term] = counts.get(term, 0) + 1
            if counts[term] == 1:
                score += found[j].weight
            j += 1
        # The run is found[i:j]; a little for each repeat, so denser runs win ties of distinct weight.
        total = score + 1e-3 * (j - i)
        if total > best_score + 1e-12:
            best, best_score = (i, j - 1), total
        term = found[i].term
        counts[term] -= 1
        if counts[term] == 0:
            score -= found[i].weight
            del counts[term]
    return best


def snippet(text: str, weights: Mapping[str, float], width: int) -> Snippet:
    """One line of at most ``width`` cells (at least 4) around the query terms of ``text``.

    ``weights`` map terms to how much they count (``salient(term_weights(...))``);
    with no term found the line starts at the text's beginning.
    """
    width = max(4, width)
    flat = " ".join(neutralize(text).split())
    if cells(flat) <= width:
        return Snippet(flat, tuple(marks(flat, weights)))
    found = marks(flat, weights)
    start = 0
    if found:
        first, last = _best_window(found, max(1, width - 2))
        lo, hi = found[first].start, found[last].end
        span = cells(flat[lo:hi])
        if span >= width - 2:
            start = lo  # the run alone fills the line: start at its first word
        else:
            # Centre the run: as much context before it as after it.
            start = _back(flat, lo, (width - 2 - span) // 2)
            if start > 0:
                # Start at a word's beginning when one is near (no half word after the "…").
                space = flat.find(" ", start, lo)
                if space >= 0 and space - start <= 8:
                    start = space + 1
    prefix = ELLIPSIS if start > 0 else ""
    if cells(flat[start:]) <= width - len(prefix):
        # The window reaches the end: use the room before it rather than leave the line short.
        start = _back(flat, len(flat), width - 1)
        body, suffix = flat[start:], ""
    else:
        end = _cut(flat, start, width - len(prefix) - 1)
        body, suffix = flat[start:end].rstrip(" "), ELLIPSIS
    shift = len(prefix) - start
    limit = start + len(body)
    # A word cut by either edge stays lit for the part that shows.
    kept = tuple(Mark(max(m.start, start) + shift, min(m.end, limit) + shift, m.term, m.weight) for m in found
                 if m.end > start and m.start < limit)
    return Snippet(prefix + body + suffix, kept)
