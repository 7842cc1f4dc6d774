"""The BM25 analyzer: one definition for documents and queries.

Terms are the maximal runs of Unicode letters, Unicode numbers and ``_``
(``[\\p{L}\\p{N}_]+`` in RE2 syntax), each lowercased the way Go's
``strings.ToLower`` does it: every character on its own through the simple
Unicode lowercase mapping.

Python's ``str.lower()`` differs from that in exactly two ways, both handled
here and pinned by tests:

* U+0130 (dotted capital I) has a two-character *full* lowercase ("i" + U+0307);
  its simple mapping, which Go uses, is plain "i".
* ``str.lower()`` applies the context-dependent Final_Sigma rule (a capital
  sigma at the end of a word becomes "ς"); Go maps every "Σ" to "σ".

For ``str`` patterns Python's ``\\w`` is exactly ``[\\p{L}\\p{N}_]`` (a test
checks every code point against ``unicodedata``), so the tokenizer is one
compiled regular expression. The Unicode tables are those of the running
Python (``unicodedata.unidata_version``).
"""

from __future__ import annotations

import re

__all__ = ["analyze", "go_lower", "TERM_PATTERN"]

TERM_PATTERN = re.compile(r"\w+")

_DOTTED_CAPITAL_I = "\u0130"
_CAPITAL_SIGMA = "\u03a3"


def go_lower(term: str) -> str:
    """Lowercase ``term`` character by character with the simple mapping."""
    if term.isascii():
        return term.lower()
    if _DOTTED_CAPITAL_I in term:
        term = term.replace(_DOTTED_CAPITAL_I, "i")
    lowered = term.lower()
    if _CAPITAL_SIGMA in term:
        # Every other character lowercases to exactly one character, so the
        # positions of `term` and `lowered` line up one to one.
        lowered = "".join(
            "\u03c3" if original == _CAPITAL_SIGMA else low
            for original, low in zip(term, lowered)
        )
    return lowered


def analyze(text: str) -> list[str]:
    """Return the terms of ``text`` in order, repetitions kept."""
    if text.isascii():
        # ASCII lowercasing keeps every character a word character or not: lowering the
        # text once gives the same terms as lowering each (and costs a third as much).
        return TERM_PATTERN.findall(text.lower())
    return [go_lower(term) for term in TERM_PATTERN.findall(text)]
