"""The symbols of an index's code chunks, for the ``sym:`` filter (spec/query-syntax.md, "Filters").

The index stores no symbols: ``symbol_table(records)`` derives them, the first
time a query asks, from each code document's chunk texts in row order
(``code.symbols.chunk_symbols``: the same texts always give the same
symbols), and keeps them while that docs.jsonl is open, as the document
table is kept. Only documents whose extension has an installed grammar are
read; other rows have no symbols and never match ``sym:``.

With a ``cache_dir`` (``rag/.cache``, outside the index), the table is also
kept on disk as an arraycache entry ``symbols-<index_id>-<key>``, whose key
hashes everything the symbols depend on: the code rows' docs.jsonl lines
(bytes, as written), their row numbers, and ``chunker_identity()`` (the code
chunker's version and the installed grammars). A new generation, another
grammar or a damaged entry means computing them again, with the same result.
Measured on 7,490 chunks of three source trees (ragtui, textual, npm's lib) on 2
cores shared with other jobs (load average 6.1): 2.2 s to derive, 0.12 s to
read back from the cache in a new process (hashing the lines included), 0.04 s
to match one value.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragtui.core.code.languages import chunker_identity, code_language, grammar
from ragtui.core.code.symbols import chunk_symbols
from ragtui.core.index.arraycache import cached_arrays

if TYPE_CHECKING:
    from ragtui.core.index.docs_file import DocsFile


class _Documents(Protocol):
    """The documents of an index in row order (``query_plan.DocTable``)."""

    @property
    def doc_ids(self) -> tuple[str, ...]: ...

    @property
    def starts(self) -> np.ndarray: ...

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


def symbol_table(records: DocsFile, docs: _Documents, cache_dir: Path | None = None, index_id: str = "") -> SymbolTable:
    """The symbols of every row of ``records`` (whose document table is ``docs``: ``query_plan.doc_table``),
    derived once per docs.jsonl and kept while it lives (and, with ``cache_dir``, on disk: see the module
    docstring)."""
    with _lock:
        table = _tables.get(records)
        if table is not None:
            return table
    starts = docs.starts.tolist()
    code = [(d, doc_id) for d, doc_id in enumerate(docs.doc_ids)
            if (lang := code_language(doc_id)) is not None and grammar(lang) is not None]
    n = len(records)

    def compute() -> dict[str, np.ndarray]:
        out: list[tuple[str, ...]] = [()] * n
        for d, doc_id in code:
            lo, hi = starts[d], starts[d + 1]
            out[lo:hi] = chunk_symbols(doc_id, [records[row].text for row in range(lo, hi)])
        return _to_arrays(out)

    if cache_dir is None or not code:
        table = _from_arrays(compute(), n)
    else:
        digest = hashlib.sha256(f"ragtui-symbols\0{FORMAT}\0{chunker_identity()}\0{n}\0".encode())
        for d, _ in code:
            digest.update(f"{starts[d]}:{starts[d + 1]}\0".encode())
            digest.update(records.raw_lines(starts[d], starts[d + 1]))
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", index_id)[:64] or "_"
        arrays, _ = cached_arrays(cache_dir, "symbols", name, digest.hexdigest()[:40], compute)
        try:
            table = _from_arrays(arrays, n)
        except ValueError:  # a damaged entry: computed again
            table = _from_arrays(compute(), n)
    with _lock:
        return _tables.setdefault(records, table)


FORMAT = 1
"""The layout of a cached entry: ``blob`` (uint8, UTF-8) holds each row's symbols joined by NUL, the rows one
after another; ``ends`` (int64, one per row) where each row's part of the blob ends."""


def _to_arrays(rows: list[tuple[str, ...]]) -> dict[str, np.ndarray]:
    parts = [_SEP.join(syms).encode("utf-8") for syms in rows]
    ends = np.cumsum([len(p) for p in parts], dtype=np.int64) if parts else np.zeros(0, dtype=np.int64)
    return {"blob": np.frombuffer(b"".join(parts), dtype=np.uint8).copy(), "ends": ends}


def _from_arrays(arrays: dict[str, np.ndarray], n: int) -> SymbolTable:
    """ValueError unless the arrays are an entry of ``n`` rows."""
    blob, ends = arrays.get("blob"), arrays.get("ends")
    if not isinstance(blob, np.ndarray) or not isinstance(ends, np.ndarray) or blob.dtype != np.uint8 \
            or ends.dtype != np.int64 or ends.shape != (n,) or blob.ndim != 1:
        raise ValueError("not a symbols entry")
    bounds = ends.tolist()
    if any(b < a for a, b in zip([0, *bounds], bounds)) or (bounds and bounds[-1] != blob.size):
        raise ValueError("not a symbols entry")
    raw = blob.tobytes()
    rows: list[tuple[str, ...]] = []
    at = 0
    for end in bounds:
        part = raw[at:end].decode("utf-8", errors="strict") if end > at else ""
        rows.append(tuple(part.split(_SEP)) if part else ())
        at = end
    return SymbolTable(tuple(rows))
