"""The symbols of an index's code chunks, for the ``sym:`` filter (spec/query-syntax.md, "Filters").

The index stores no symbols: ``symbol_table(records)`` derives them, the first
time a query asks, from each code document's chunk texts in row order
(``code_symbols.chunk_symbols``: the same texts always give the same
symbols), and keeps them while that docs.jsonl is open, as the document
table is kept. Only documents whose extension has an installed grammar are
read; other rows have no symbols and never match ``sym:``.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragtui.core.ingest.code_languages import code_language, grammar
from ragtui.core.ingest.code_symbols import chunk_symbols

if TYPE_CHECKING:
    from ragtui.core.index.docs_file import DocsFile

__all__ = ["SymbolTable", "symbol_matches", "symbol_table"]

_SEP = "\x00"


def symbol_matches(value: str, path: str) -> bool:
    """Whether ``sym:value`` matches the symbol ``path``: ``value`` is a run of whole names of it
    (``search``, ``Retriever`` and ``Retriever.search`` all match ``Retriever.search``; ``Retr`` does not)."""
    return f".{value}." in f".{path}."


@dataclass(frozen=True, eq=False)
class SymbolTable:
    """Each row's symbols (a tuple of dotted paths; empty for rows that are not code with a grammar)."""

    symbols: tuple[tuple[str, ...], ...]

    def matches(self, value: str) -> np.ndarray:
        """A bool per row: whether one of its symbols matches ``value`` (``symbol_matches``)."""
        if not self.symbols:
            return np.zeros(0, dtype=bool)
        return np.asarray(np.char.find(self._joined, f".{value}.") >= 0, dtype=bool)

    @property
    def _joined(self) -> np.ndarray:
        found = self.__dict__.get("_joined_cache")
        if found is None:
            rows = [_SEP.join(f".{p}." for p in syms) for syms in self.symbols]
            found = np.array(rows, dtype=str) if any(rows) else np.array([""] * len(rows), dtype=str)
            object.__setattr__(self, "_joined_cache", found)
        return found


_tables: weakref.WeakKeyDictionary[DocsFile, SymbolTable] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def symbol_table(records: DocsFile) -> SymbolTable:
    """The symbols of every row of ``records``, derived once per docs.jsonl and kept while it lives."""
    from ragtui.core.search.query_plan import doc_table

    with _lock:
        table = _tables.get(records)
        if table is not None:
            return table
    docs = doc_table(records)
    out: list[tuple[str, ...]] = [()] * len(records)
    starts = docs.starts.tolist()
    for d, doc_id in enumerate(docs.doc_ids):
        language = code_language(doc_id)
        if language is None or grammar(language) is None:
            continue
        lo, hi = starts[d], starts[d + 1]
        texts = [records[row].text for row in range(lo, hi)]
        out[lo:hi] = chunk_symbols(doc_id, texts)
    table = SymbolTable(tuple(out))
    with _lock:
        return _tables.setdefault(records, table)
