"""Query terms in document text, shown as styled Rich text; the finding is ``core.search.kwic``'s.

A word is lit when the index's own BM25 analyzer turns it into one of the
query's terms, which is exactly when it counted for BM25, and how strongly by
the term's weight in this index (its idf next to the query's strongest term):
a term found in nearly every chunk ("a", "the") is not lit at all. Every
function neutralises the text first (``core.textsafe``), so nothing a document
holds can drive the terminal. Snippets are the same key-word-in-context
windows ``ragtui search`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text

from ragtui.core.search import kwic
from ragtui.core.textsafe import neutralize

__all__ = ["STRONG", "TERM_STYLE", "WEAK_TERM_STYLE", "Weights", "highlighted", "query_terms", "query_weights",
           "snippet"]

TERM_STYLE = "bold #ff8700"
"""How a weighty query term looks (legible on the dark and light themes, and on a selected row)."""
WEAK_TERM_STYLE = "#ff8700"
"""A term that counts, but far less than the query's strongest (its relative weight below ``STRONG``)."""
STRONG = 0.6

Weights = Mapping[str, float]
"""Term -> relative weight in (0, 1], as ``kwic.salient`` gives."""


def query_terms(query: str) -> dict[str, float]:
    """The BM25 terms of ``query``, each weighing 1 (for text with no index to weigh them by)."""
    return kwic.salient(kwic.term_weights(None, query))


def query_weights(bm25, query: str) -> dict[str, float]:
    """The terms of ``query`` worth lighting in ``bm25``'s index, with their relative weights."""
    return kwic.salient(kwic.term_weights(bm25, query))


def _weights(terms: Weights | Iterable[str]) -> Weights:
    return terms if isinstance(terms, Mapping) else dict.fromkeys(terms, 1.0)


def _style(weight: float) -> str:
    return TERM_STYLE if weight >= STRONG else WEAK_TERM_STYLE


def highlighted(text: str, terms: Weights | Iterable[str]) -> Text:
    """The whole of ``text``, neutralised, with the query terms lit by weight."""
    safe = neutralize(text)
    out = Text(safe)
    for m in kwic.marks(safe, _weights(terms)):
        out.stylize(_style(m.weight), m.start, m.end)
    return out


def snippet(text: str, terms: Weights | Iterable[str], width: int) -> Text:
    """One line of at most ``width`` cells centred on the query terms (from the start when none)."""
    s = kwic.snippet(text, _weights(terms), width)
    out = Text(s.text, no_wrap=True, overflow="ellipsis")
    for m in s.marks:
        out.stylize(_style(m.weight), m.start, m.end)
    return out
