"""Query terms in document text: analysed by the index's own BM25 analyzer, shown as styled Rich text.

Every function neutralises the text first (``core.textsafe``), so nothing a
document holds can drive the terminal. A word is highlighted when the
analyzer turns it into one of the query's terms, which is exactly when it
counted for BM25.
"""

from __future__ import annotations

from rich.text import Text

from ragtui.core.index.analyzer import TERM_PATTERN, analyze
from ragtui.core.textsafe import neutralize

__all__ = ["TERM_STYLE", "highlighted", "query_terms", "snippet"]

TERM_STYLE = "bold #ff8700"
"""How a query term looks (legible on the dark and light themes, and on a selected row)."""


def query_terms(query: str) -> frozenset[str]:
    """The BM25 terms of ``query``."""
    return frozenset(analyze(query))


def _mark(text: Text, plain: str, terms: frozenset[str], offset: int = 0) -> int:
    """Stylise the words of ``plain`` (which starts at ``offset`` in ``text``) that are query terms."""
    first = -1
    if not terms:
        return first
    for match in TERM_PATTERN.finditer(plain):
        words = analyze(match.group())
        if words and words[0] in terms:
            text.stylize(TERM_STYLE, offset + match.start(), offset + match.end())
            if first < 0:
                first = match.start()
    return first


def highlighted(text: str, terms: frozenset[str]) -> Text:
    """The whole of ``text``, neutralised, with the query terms highlighted."""
    safe = neutralize(text)
    out = Text(safe)
    _mark(out, safe, terms)
    return out


def snippet(text: str, terms: frozenset[str], width: int) -> Text:
    """One line of at most ``width`` cells around the first query term (from the start when none)."""
    flat = " ".join(neutralize(text).split())
    width = max(4, width)
    start = 0
    if terms:
        for match in TERM_PATTERN.finditer(flat):
            words = analyze(match.group())
            if words and words[0] in terms:
                # Keep a little context before the term, but only when the line must be cut anyway.
                start = max(0, match.start() - width // 4) if len(flat) > width else 0
                break
    prefix = "…" if start > 0 else ""
    body = flat[start:]
    room = width - len(prefix)
    suffix = ""
    if len(body) > room:
        body, suffix = body[: room - 1], "…"
    line = prefix + body + suffix
    out = Text(line, no_wrap=True, overflow="ellipsis")
    _mark(out, body, terms, len(prefix))
    return out
