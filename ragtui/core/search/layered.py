"""The next generation of an index read as its current one (the base) plus an overlay: ``LayeredGeneration``.

An overlay names the next generation's rows as ``segments`` in order:
``("old", lo, hi)`` is base rows lo..hi-1, ``("new", lo, hi)`` the overlay's
new chunks lo..hi-1 (their ``records`` and unit ``vectors``). Base rows no
"old" segment covers are gone. Old runs are whole documents, as the writer
lays them out (``ingest.assemble``): a document is either carried as it was
or all of its chunks are new.

What callers may rely on: every mode of ``Retriever.search`` (any query)
ranks the next generation's rows as one index holding them would, to 1e-9,
ties by ascending next-generation row:

* BM25 at every level scores with the next generation's statistics, pooled
  as ``multi.pooled_bm25_scores`` pools indexes: N = base N - removed + new,
  avgdl the mean of the next generation's lengths, df(t) = base df(t) - the
  base postings of t in removed rows + the new chunks' df(t); bm25doc and
  bm25stem the same over documents (removed documents, new documents).
* flat and ivf take the base's top (k + removed rows), drop the removed
  rows, and merge in the new rows, scored exactly (``flat.row_scores``: the
  same bits as in a whole index).
* A query with syntax (``bind``) is bound to the base's rows and to the new
  chunks' as ``QueryPlan`` binds an index (filters, symbols, words,
  phrases), prefixes expanded over the next generation's dictionary (its
  terms, ranked by their df in it), and the two laid out as the next
  generation's rows; every mode then ranks under it as on the next index.

Nothing of the base is copied or rebuilt: its document-level and stemmed
BM25 and its IVF lists are the caller's (callables, called on first use);
the new chunks' own structures are built in memory (they are few). What
does not depend on the query is worked out once: the row maps and the
chunk-level statistics at construction, the document-level ones on the
first search that needs them. A query then costs a dense score array over
the next generation and a pass over each query term's postings.

Over 500 lines on purpose: every mode's ranking, and the views, read the
same row maps and pooled statistics; in one module a reviewer can check each
mode against its single-index path side by side.
"""

from __future__ import annotations

import bisect
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, overload

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import build_postings_from_texts
from ragtui.core.index.docs_file import find_chunk
from ragtui.core.index.records import ChunkRecord, encode_docs
from ragtui.core.index.topk import top_k
from ragtui.core.search.docaware import DocLexical, check_chunk_weight, doc_groups
from ragtui.core.search.flat import as_query, flat_search, row_scores
from ragtui.core.search.query_plan import QueryPlan

if TYPE_CHECKING:
    from ragtui.core.index.docs_file import DocsFile
    from ragtui.core.index.index_format import IndexData
    from ragtui.core.search.ivf import IVFIndex
    from ragtui.core.search.query import ParsedQuery, Prefix
    from ragtui.core.search.retriever import SearchParams
    from ragtui.core.search.stemmed import StemLexical

__all__ = ["LayeredGeneration", "LayeredRecords", "LayeredVectors", "Segments"]

Segments = Sequence[tuple[str, int, int]]
"""``("old", lo, hi)``: base rows lo..hi-1; ``("new", lo, hi)``: new chunks lo..hi-1; in next-generation order."""
Ranked = tuple[npt.NDArray[np.int64], np.ndarray]
_T = TypeVar("_T")
_LEXICAL_MODES = ("bm25", "bm25doc", "bm25stem")


@dataclass(frozen=True, eq=False)
class _Layout:
    """Where each next-generation row comes from, as segment arrays and as row maps."""

    at: npt.NDArray[np.int64]
    """The first next-generation row of each segment (ascending; ``at[-1]`` is the row count)."""
    lo: npt.NDArray[np.int64]
    """The first source row of each segment (a base row, or a new chunk's number)."""
    new: npt.NDArray[np.bool_]
    """Whether each segment holds new chunks."""
    base_to_next: npt.NDArray[np.int64]
    """Each base row's next-generation row, -1 for a removed one."""
    new_to_next: npt.NDArray[np.int64]
    """Each new chunk's next-generation row."""
    kept: npt.NDArray[np.int64]
    """The base rows the next generation holds, ascending."""
    removed_runs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
    """The runs of removed base rows: (first rows, ends), ascending."""

    @classmethod
    def of(cls, segments: Segments, n_base: int, n_new: int) -> _Layout:
        """The layout of ``segments``; ``ValueError`` unless they tile the rows as the module says."""
        at, lo, new = [0], [], []
        base_to_next = np.full(n_base, -1, dtype=np.int64)
        new_to_next = np.empty(n_new, dtype=np.int64)
        old_end = new_end = 0
        for source, a, b in segments:
            if source not in ("old", "new") or not 0 <= a < b:
                raise ValueError(f"bad segment {(source, a, b)!r}")
            if source == "old":
                if a < old_end or b > n_base:
                    raise ValueError(f"old segment {a}..{b} overlaps the one before or lies outside the {n_base} base rows")
                base_to_next[a:b] = np.arange(at[-1], at[-1] + b - a)
                old_end = b
            else:
                if a != new_end or b > n_new:
                    raise ValueError(f"new segment {a}..{b} does not follow new chunk {new_end} of {n_new}")
                new_to_next[a:b] = np.arange(at[-1], at[-1] + b - a)
                new_end = b
            at.append(at[-1] + b - a)
            lo.append(a)
            new.append(source == "new")
        if new_end != n_new:
            raise ValueError(f"the segments place {new_end} of the {n_new} new chunks")
        gone = np.concatenate([[False], base_to_next < 0, [False]])
        edges = np.flatnonzero(gone[1:] != gone[:-1])
        return cls(np.array(at, dtype=np.int64), np.array(lo, dtype=np.int64), np.array(new, dtype=bool),
                   base_to_next, new_to_next, np.flatnonzero(base_to_next >= 0), (edges[0::2], edges[1::2]))

    @property
    def n_rows(self) -> int:
        return int(self.at[-1])

    def locate(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """For each next-generation row: (whether it is a new chunk, its base row or new chunk number)."""
        seg = np.searchsorted(self.at, rows, side="right") - 1
        return self.new[seg], self.lo[seg] + rows - self.at[seg]

    def rows(self, base: np.ndarray | None, new: np.ndarray | None) -> np.ndarray:
        """A bool per next-generation row from one per base row and one per new chunk (None: all true)."""
        out = np.empty(self.n_rows, dtype=bool)
        out[self.base_to_next[self.kept]] = True if base is None else base[self.kept]
        out[self.new_to_next] = True if new is None else new
        return out


class LayeredRecords(Sequence[ChunkRecord]):
    """The next generation's records by row: a base row's parsed from the base's docs.jsonl when asked for."""

    def __init__(self, base: DocsFile, new: Sequence[ChunkRecord], layout: _Layout,
                 doc_of_row: Callable[[], npt.NDArray[np.int64]]) -> None:
        self._base, self._new, self._layout, self._doc_of_row = base, new, layout, doc_of_row

    def __len__(self) -> int:
        return self._layout.n_rows

    @overload
    def __getitem__(self, i: int) -> ChunkRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[ChunkRecord]: ...

    def __getitem__(self, i: int | slice) -> ChunkRecord | list[ChunkRecord]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} is outside the {n} rows")
        new, at = self._layout.locate(np.array([i % n], dtype=np.int64))
        return self._new[int(at[0])] if new[0] else self._base[int(at[0])]

    def __iter__(self) -> Iterator[ChunkRecord]:
        return (self[i] for i in range(len(self)))

    def find(self, chunk_id: str) -> int:
        """The row holding ``chunk_id``, or -1 (``DocsFile.find``: the rows are in the same order)."""
        return find_chunk(self, chunk_id)

    def raw_lines(self, lo: int, hi: int) -> bytes:
        """Rows lo..hi-1 as docs.jsonl lines: a base row's as the base's file holds it, a new one's as encoded."""
        new, at = self._layout.locate(np.arange(lo, hi, dtype=np.int64))
        return b"".join(encode_docs([self._new[a]]) if is_new else bytes(self._base.raw_lines(a, a + 1))
                        for is_new, a in zip(new.tolist(), at.tolist()))

    def doc_starts(self) -> npt.NDArray[np.int64]:
        """Each document's first row, ascending (``DocsFile.doc_starts``)."""
        groups = self._doc_of_row()
        first = np.ones(groups.size, dtype=bool)
        first[1:] = groups[1:] != groups[:-1]
        return np.flatnonzero(first).astype(np.int64)


class LayeredVectors:
    """The next generation's vectors by row; only the rows asked for are gathered (the base's stay mapped)."""

    def __init__(self, base: np.ndarray, new: npt.NDArray[np.float32], layout: _Layout, dim: int) -> None:
        self._base, self._new, self._layout = base, new, layout
        self.shape = (layout.n_rows, dim)
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def take(self, rows: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """The vectors of ``rows`` (next-generation rows, any shape of integers), as a new float32 array."""
        flat = np.asarray(rows, dtype=np.int64).reshape(-1)
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= self.shape[0]):
            raise IndexError(f"rows outside the {self.shape[0]} rows")
        new, at = self._layout.locate(flat)
        out = np.empty((flat.size, self.shape[1]), dtype=np.float32)
        out[new] = self._new[at[new]]
        out[~new] = self._base[at[~new]]
        return out.reshape(*np.shape(rows), self.shape[1])

    def __getitem__(self, rows: npt.ArrayLike) -> npt.NDArray[np.float32]:
        return self.take(rows)


@dataclass(frozen=True, eq=False)
class _Pooled:
    """BM25 of the next generation's units (chunks or documents) from the base's index and the new units' index."""

    base: BM25Index
    new: BM25Index
    base_to: npt.NDArray[np.int64]
    """Each base unit's next-generation unit, -1 for a removed one."""
    new_to: npt.NDArray[np.int64]
    """Each new unit's next-generation unit."""
    n_units: int
    norm: npt.NDArray[np.float64]
    """Each next-generation unit's length norm, ``k1 * (1 - b + b * len / avgdl)``."""

    @classmethod
    def of(cls, base: BM25Index, new: BM25Index, base_to: npt.NDArray[np.int64], new_to: npt.NDArray[np.int64],
           n_units: int) -> _Pooled:
        lengths = np.zeros(n_units, dtype=np.uint32)
        kept = np.flatnonzero(base_to >= 0)
        lengths[base_to[kept]] = np.asarray(base.doc_len)[kept]
        lengths[new_to] = new.doc_len
        # As bm25.idx's avgdl and ``bm25._length_norm``: the same operations over the same lengths in the same order.
        avgdl = float(lengths.mean(dtype=np.float64)) if n_units else 0.0
        k1, b, dl = base.k1, base.b, lengths.astype(np.float64)
        norm = k1 * (1.0 - b + b * dl / avgdl) if avgdl > 0 else np.full_like(dl, k1 * (1.0 - b))
        return cls(base, new, base_to, new_to, n_units, norm)

    def scores(self, text: str) -> npt.NDArray[np.float64]:
        """Dense BM25 score of every next-generation unit for ``text`` (``multi.pooled_bm25_scores``' operations)."""
        out = np.zeros(self.n_units, dtype=np.float64)
        counts = Counter(analyze(text))
        raws = [term.encode("utf-8") for term in counts]
        found = [ix.lookup_many(raws) if ix.n_terms else [-1] * len(raws) for ix in (self.base, self.new)]
        k1 = self.base.k1
        for reps, in_base, in_new in zip(counts.values(), *found):
            parts = []
            if in_base >= 0:
                lo, hi = int(self.base.offsets[in_base]), int(self.base.offsets[in_base + 1])
                units = self.base_to[self.base.post_doc[lo:hi]]
                kept = units >= 0
                parts.append((units[kept], self.base.post_tf[lo:hi][kept]))
            if in_new >= 0:
                lo, hi = int(self.new.offsets[in_new]), int(self.new.offsets[in_new + 1])
                parts.append((self.new_to[self.new.post_doc[lo:hi]], self.new.post_tf[lo:hi]))
            df = np.float64(sum(units.size for units, _ in parts))
            if df == 0:
                continue  # the term's chunks are all gone
            idf = np.log(1.0 + (self.n_units - df + 0.5) / (df + 0.5))
            for units, tf in parts:
                tf = tf.astype(np.float64)
                w = (tf * (k1 + 1.0)) / (self.norm[units] + tf) * idf
                out[units] += w * reps if reps != 1 else w
        return out


@dataclass(frozen=True, eq=False)
class _DocAware:
    """bm25doc's score over the next generation: its document's BM25 + chunk_weight * its own (``DocLexical``)."""

    chunks: _Pooled
    docs: _Pooled
    doc_of_row: npt.NDArray[np.int64]

    def dense(self, text: str, chunk_weight: float) -> npt.NDArray[np.float64]:
        """Every row's score (``DocLexical.chunk_scores``): 0 for a row without a query term of its own."""
        own = self.chunks.scores(text)
        out = self.docs.scores(text)[self.doc_of_row] + chunk_weight * own
        out[own <= 0.0] = 0.0
        return out

    def search(self, text: str, k: int, chunk_weight: float) -> Ranked:
        own = self.chunks.scores(text)
        matched = np.flatnonzero(own > 0.0)
        if matched.size == 0:
            return matched.astype(np.int64), np.zeros(0, dtype=np.float64)
        doc_scores = self.docs.scores(text)
        return top_k(doc_scores[self.doc_of_row[matched]] + chunk_weight * own[matched], matched, k)


@dataclass(frozen=True, eq=False)
class _Documents:
    """The next generation's documents: each row's document, and the base's and new chunks' documents' numbers."""

    doc_of_row: npt.NDArray[np.int64]
    base_to: npt.NDArray[np.int64]
    """Each base document's next-generation document, -1 for a removed one."""
    new_to: npt.NDArray[np.int64]
    """Each document of the new chunks: its next-generation document."""
    n_docs: int
    new_doc_of_row: npt.NDArray[np.int64]
    """The document number of each new chunk among the new chunks."""

    @classmethod
    def of(cls, layout: _Layout, base_doc_of_row: npt.NDArray[np.int64], new_doc_ids: list[str]) -> _Documents:
        n, m = layout.n_rows, len(new_doc_ids)
        new_doc_of_row = doc_groups(new_doc_ids)
        kept = layout.kept
        # A row's source document as (is new, number): a document starts where that pair changes.
        source = np.empty(n, dtype=np.int64)
        source[layout.base_to_next[kept]] = 2 * base_doc_of_row[kept]
        source[layout.new_to_next] = 2 * new_doc_of_row + 1
        first = np.ones(n, dtype=bool)
        first[1:] = source[1:] != source[:-1]
        doc_of_row = np.cumsum(first, dtype=np.int64) - 1
        n_base_docs = int(base_doc_of_row[-1]) + 1 if base_doc_of_row.size else 0
        base_to = np.full(n_base_docs, -1, dtype=np.int64)
        base_to[base_doc_of_row[kept]] = doc_of_row[layout.base_to_next[kept]]
        new_to = np.empty(int(new_doc_of_row[-1]) + 1 if m else 0, dtype=np.int64)
        new_to[new_doc_of_row] = doc_of_row[layout.new_to_next]
        return cls(doc_of_row, base_to, new_to, int(doc_of_row[-1]) + 1 if n else 0, new_doc_of_row)

    def doc_aware(self, chunks: _Pooled, base_docs: BM25Index, new_docs: BM25Index) -> _DocAware:
        return _DocAware(chunks, _Pooled.of(base_docs, new_docs, self.base_to, self.new_to, self.n_docs),
                         self.doc_of_row)


@dataclass(frozen=True, eq=False)
class _Terms:
    """Terms of the next generation in dictionary order, with their df in it: what ``QueryPlan`` expands a prefix
    over. Term t is term ``number[t]`` of the new chunks' dictionary where ``new[t]``, else of the base's."""

    dictionaries: tuple[BM25Index, BM25Index]
    """The base's and the new chunks'."""
    new: npt.NDArray[np.bool_]
    number: npt.NDArray[np.int64]
    df: npt.NDArray[np.int64]

    def term(self, t: int) -> str:
        return self.dictionaries[int(self.new[t])].term(int(self.number[t]))

    def terms_before(self, key: bytes) -> int:
        return bisect.bisect_left(range(self.df.size), key, key=lambda t: self.term(t).encode("utf-8"))


class _LayeredPlan(QueryPlan):
    """A ``QueryPlan`` of the base's rows or of the new chunks' whose prefixes expand over the next generation's
    dictionary: bound with ``pooled=[prefix -> its _Terms]``."""

    def _expand(self, vocabularies: Sequence[Any], item: Prefix) -> list[str]:
        (terms,) = vocabularies
        return super()._expand([terms(item.term)], item)


class LayeredGeneration:
    """The next generation of ``base``: its rows, records, vectors and the ranking of every search mode.

    ``segments`` (``Segments``) tile the next generation's rows; ``records``
    and ``vectors`` (float32, unit rows) are the new chunks'. ``doclex``,
    ``stemlex`` and ``ivf`` give the base's document-level BM25, stemmed arm
    and IVF lists (the ``Retriever``'s, of ``base``); each is called once, on
    the first search that needs it. ``ValueError`` when the segments do not
    tile the rows or the new chunks' counts disagree. Thread-safe for
    concurrent ``search`` calls.
    """

    def __init__(self, base: IndexData, segments: Segments, records: Sequence[ChunkRecord],
                 vectors: npt.ArrayLike, *, doclex: Callable[[], DocLexical],
                 stemlex: Callable[[], StemLexical], ivf: Callable[[], IVFIndex]) -> None:
        dim = base.meta.dim
        new_vectors = np.asarray(vectors, dtype=np.float32)
        if new_vectors.size == 0:
            new_vectors = new_vectors.reshape(0, dim)
        if new_vectors.shape != (len(records), dim):
            raise ValueError(f"{len(records)} new records of dimension {dim} but vectors of shape {new_vectors.shape}")
        self.base = base
        self._layout = layout = _Layout.of(segments, base.n_chunks, len(records))
        self._new_records = list(records)
        self._new_vectors = new_vectors
        self._base_doclex, self._base_stemlex, self._base_ivf = doclex, stemlex, ivf
        self.n_removed = base.n_chunks - layout.kept.size
        """Base rows the next generation no longer holds."""
        self.records = LayeredRecords(base.records, self._new_records, layout, lambda: self._documents().doc_of_row)
        self.vectors = LayeredVectors(base.vectors, new_vectors, layout, dim)
        self._new_bm25 = BM25Index.from_postings(build_postings_from_texts(r.text for r in self._new_records),
                                                 base.bm25.k1, base.bm25.b)
        self._bm25 = _Pooled.of(base.bm25, self._new_bm25, layout.base_to_next, layout.new_to_next, layout.n_rows)
        self._lock = threading.RLock()  # what one derivation needs may be derived inside it
        self._made: dict[str, Any] = {}

    @property
    def n_chunks(self) -> int:
        return self._layout.n_rows

    @property
    def doc_of_row(self) -> npt.NDArray[np.int64]:
        """The document number of each next-generation row (``docaware.doc_groups`` of its doc_ids)."""
        return self._documents().doc_of_row

    def _once(self, name: str, make: Callable[[], _T]) -> _T:
        """``make()``, called by the first caller only (the others wait for it)."""
        got = self._made.get(name)
        if got is None:
            with self._lock:
                got = self._made.get(name)
                if got is None:
                    got = self._made[name] = make()
        return got

    def _documents(self) -> _Documents:
        return self._once("documents", lambda: _Documents.of(self._layout, self._base_doclex().doc_of_row,
                                                             [r.doc_id for r in self._new_records]))

    def _doc_aware(self) -> _DocAware:
        def make() -> _DocAware:
            docs = self._documents()
            new = DocLexical.build(self._new_bm25, docs.new_doc_of_row)
            return docs.doc_aware(self._bm25, self._base_doclex().docs, new.docs)

        return self._once("bm25doc", make)

    def _stem_aware(self) -> tuple[StemLexical, _DocAware]:
        def make() -> tuple[StemLexical, _DocAware]:
            from ragtui.core.search.stemmed import StemLexical

            docs, base = self._documents(), self._base_stemlex()
            new = StemLexical.build(self._new_bm25, docs.new_doc_of_row, base.chunks.k1, base.chunks.b)
            layout = self._layout
            chunks = _Pooled.of(base.chunks, new.chunks, layout.base_to_next, layout.new_to_next, layout.n_rows)
            return base, docs.doc_aware(chunks, base.docs.docs, new.docs.docs)

        return self._once("bm25stem", make)

    # -- query syntax --------------------------------------------------------

    def bind(self, parsed: ParsedQuery, *, cache_dir: Path | None = None) -> QueryPlan:
        """``QueryPlan.bind`` of ``parsed`` over the next generation, for ``search``: the base's rows and the new
        chunks' each bound as ``QueryPlan`` binds an index (filters, words, phrases; ``cache_dir`` as there),
        prefixes expanded over the next generation's dictionary, the two laid out as its rows."""
        # _LayeredPlan expands prefixes with this generation's ``_prefix_terms``, worked out once for both plans.
        terms = functools.cache(self._prefix_terms)
        base = _LayeredPlan.bind(parsed, self.base, pooled=[terms], cache_dir=cache_dir)  # type: ignore[list-item]
        new = _LayeredPlan.bind(parsed, self._new_index(), pooled=[terms])  # type: ignore[list-item]
        layout = self._layout
        checks = [replace(b, matches=[replace(bm, rows=layout.rows(bm.rows, nm.rows)) for bm, nm in
                                      zip(b.matches, n.matches)]) for b, n in zip(base.checks, new.checks)]
        mask = None if base.mask is None and new.mask is None else layout.rows(base.mask, new.mask)
        # The plan reads the text of the rows it checks through the layered records.
        return QueryPlan(parsed, base.lexical_text, mask, checks, base.expansions, base.notes,
                         _records=self.records)  # type: ignore[arg-type]

    def _prefix_terms(self, prefix: str) -> _Terms:
        """The next generation's terms that start with ``prefix`` and their df in it (a term left only in
        removed rows is not one of them)."""
        key = prefix.encode("utf-8")
        base, new = self.base.bm25, self._new_bm25
        lo, hi = base.terms_before(key), base.terms_before(key + b"\xff")
        n_lo, n_hi = new.terms_before(key), new.terms_before(key + b"\xff")
        df = np.asarray(np.diff(base.offsets[lo : hi + 1]) - self._removed_postings(lo, hi), dtype=np.int64)
        new_df = np.asarray(np.diff(new.offsets[n_lo : n_hi + 1]), dtype=np.int64)
        if base.n_terms:
            found, before = base.locate_many([new.term(t).encode("utf-8") for t in range(n_lo, n_hi)])
        else:
            found, before = np.full(n_hi - n_lo, -1, dtype=np.int64), np.zeros(n_hi - n_lo, dtype=np.int64)
        df[found[found >= 0] - lo] += new_df[found >= 0]
        only = found < 0
        # A term only the new chunks hold sorts just before the base term numbered ``before``.
        at = np.concatenate([np.arange(lo, hi), before[only]])
        order = np.lexsort((np.concatenate([np.ones(hi - lo), np.zeros(int(only.sum()))]), at))
        is_new = np.concatenate([np.zeros(hi - lo, dtype=bool), np.ones(int(only.sum()), dtype=bool)])[order]
        number = np.concatenate([np.arange(lo, hi), np.arange(n_lo, n_hi)[only]])[order]
        df = np.concatenate([df, new_df[only]])[order]
        return _Terms((base, new), is_new[df > 0], number[df > 0], df[df > 0])

    def _removed_postings(self, lo: int, hi: int, how: str = "auto") -> npt.NDArray[np.int64]:
        """How many postings of each base term lo..hi-1 lie in removed rows. ``how``: "scan" reads the terms'
        postings; "bisect" bisects each term's (ascending) postings at the bounds of the runs of removed rows,
        every term at once, in far fewer reads when the runs are few ("auto": the cheaper; the same counts)."""
        base, (starts, ends) = self.base.bm25, self._layout.removed_runs
        offsets = np.asarray(base.offsets[lo : hi + 1], dtype=np.int64)
        n_terms, n_post = hi - lo, int(offsets[-1] - offsets[0])
        if how == "auto":
            how = "bisect" if n_terms * starts.size * 2 * 32 < n_post else "scan"
        if how == "scan":
            gone = np.zeros(n_post + 1, dtype=np.int64)
            np.cumsum(self._layout.base_to_next[base.post_doc[offsets[0] : offsets[-1]]] < 0, out=gone[1:])
            return np.asarray(gone[offsets[1:] - offsets[0]] - gone[offsets[:-1] - offsets[0]], dtype=np.int64)
        # Each (term, bound) pair: its postings below the bound, by one bisection of all the pairs together.
        below = np.repeat(offsets[:-1], 2 * starts.size)
        first, top = below.copy(), np.repeat(offsets[1:], 2 * starts.size)
        bounds = np.tile(np.concatenate([ends, starts]), n_terms)
        post_doc = np.asarray(base.post_doc)
        while True:
            open_ = np.flatnonzero(below < top)
            if open_.size == 0:
                break
            mid = (below[open_] + top[open_]) // 2
            lower = post_doc[mid] < bounds[open_]
            below[open_[lower]] = mid[lower] + 1
            top[open_[~lower]] = mid[~lower]
        counts = (below - first).reshape(n_terms, 2, starts.size)
        return np.asarray((counts[:, 0] - counts[:, 1]).sum(axis=1), dtype=np.int64)

    def _new_index(self) -> IndexData:
        """The new chunks as an index of their own (in memory), for ``QueryPlan.bind``."""
        def make() -> IndexData:
            from ragtui.core.index.docs_file import DocsFile
            from ragtui.core.index.index_format import IndexData

            meta = replace(self.base.meta, n_chunks=len(self._new_records))
            docs = DocsFile(encode_docs(self._new_records), "the overlay's new chunks", meta)
            return IndexData(self.base.path, f"{self.base.generation}+overlay", meta, docs, self._new_vectors,
                             self._new_bm25)

        return self._once("new index", make)

    # -- ranking -------------------------------------------------------------

    def search(self, mode: str, k: int, *, text: str | None = None, vector: np.ndarray | None = None,
               plan: QueryPlan | None = None, **params: Unpack[SearchParams]) -> Ranked:
        """The top ``k`` next-generation rows for a plain query: (rows int64, scores float64), descending score,
        ties by ascending row: ``Retriever.search``'s ranking on an index of the next generation.

        ``text``: the query text (the lexical modes and hybrid); ``vector``: the unit query vector, as
        ``Retriever.query_vector`` makes it (flat, ivf and hybrid). ``params``: the mode's ranking parameters
        (``retriever.SearchParams``: nprobe; chunk_weight; hybrid's fusion, weight, rrf_k, depth, lexical),
        checked by the caller (``Retriever.search`` checks them with ``retriever.check_search``); what hybrid's
        caller leaves unset is filled by ``fusion_fit.fill_hybrid``. ``plan``: this generation's ``bind`` of a
        query with syntax (the lexical modes then score its ``lexical_text``, and ``vector`` embeds its
        ``search_text``). The post-ranking steps (mmr, min_score, merge) are the caller's."""
        if k < 1:
            raise UsageError(f"k must be at least 1 (got {k})")
        if plan is not None:
            text = plan.lexical_text
        if mode in _LEXICAL_MODES:
            if text is None:
                raise UsageError(f"{mode} search needs query text")
            rows, scores = self._lexical(mode, text, k, params.get("chunk_weight"), plan)
            return rows, np.asarray(scores, dtype=np.float64)
        if vector is None or (mode == "hybrid" and text is None):
            raise UsageError(f"{mode} search needs {'query text and ' if mode == 'hybrid' else ''}a query vector")
        q = as_query(vector, self.base.meta.dim)
        if mode == "flat":
            rows, scores = self._flat(q, k, plan)
        elif mode == "ivf":
            rows, scores = self._ivf(q, k, params.get("nprobe"), plan)
        else:
            assert text is not None
            rows, scores = self._hybrid(text, q, k, params, plan)
        return rows, np.asarray(scores, dtype=np.float64)

    def _lexical(self, arm: str, text: str, k: int, chunk_weight: object, plan: QueryPlan | None) -> Ranked:
        if arm == "bm25":
            own = self._bm25.scores(text)
            if plan is not None:
                return plan.lexical(own, k)
            matched = np.flatnonzero(own > 0.0)
            return top_k(own[matched], matched, k)
        if arm == "bm25doc":
            aware, weight = self._doc_aware(), check_chunk_weight(chunk_weight)
        else:
            from ragtui.core.search.stemmed import DEFAULT_STEM_CHUNK_WEIGHT

            weight = DEFAULT_STEM_CHUNK_WEIGHT if chunk_weight is None else check_chunk_weight(chunk_weight)
            stem, aware = self._stem_aware()
            text = stem.query_text(text)
        return aware.search(text, k, weight) if plan is None else plan.lexical(aware.dense(text, weight), k)

    def _merged(self, base: Ranked, vector: np.ndarray, k: int) -> Ranked:
        """The base's ranked rows less the removed ones, and every new row scored exactly: the top ``k``."""
        rows = self._layout.base_to_next[base[0]]
        kept = rows >= 0
        new_scores = row_scores(self._new_vectors, vector) if len(self._new_vectors) else np.zeros(0, np.float32)
        return top_k(np.concatenate([np.asarray(base[1], dtype=np.float32)[kept], new_scores]),
                     np.concatenate([rows[kept], self._layout.new_to_next]), k)

    def _flat(self, vector: np.ndarray, k: int, plan: QueryPlan | None = None) -> Ranked:
        if plan is not None and (plan.mask is not None or plan.checks):
            rows = np.arange(self.n_chunks) if plan.mask is None else np.flatnonzero(plan.mask)
            return plan._rank(self._row_scores(vector, rows), rows, k)
        # The base's best k + removed hold its best k that remain (its ties ascend by base row, as by next row).
        base = flat_search(self.base.vectors, vector, k + self.n_removed) if self.base.n_chunks else _NONE
        return self._merged(base, vector, k)

    def _ivf(self, vector: np.ndarray, k: int, nprobe: int | None, plan: QueryPlan | None = None) -> Ranked:
        lists = self._once("ivf", self._base_ivf)
        if plan is None or (plan.mask is None and not plan.checks):
            base = lists.search(vector, k + self.n_removed, nprobe) if self.base.n_chunks else _NONE
            return self._merged(base, vector, k)
        # ``QueryPlan.ivf``: the passing rows of the probed lists (and the new rows), or every passing row when
        # they are fewer than the probed lists hold on average.
        nprobe = lists.resolve_nprobe(nprobe)
        rows = np.arange(self.n_chunks) if plan.mask is None else np.flatnonzero(plan.mask)
        if lists.nlist and rows.size > self.n_chunks * min(nprobe, lists.nlist) / lists.nlist:
            probed = self._layout.base_to_next[lists.probed_rows(vector, nprobe)]
            rows = np.concatenate([probed[probed >= 0], self._layout.new_to_next])
            if plan.mask is not None:
                rows = rows[plan.mask[rows]]
        return plan._rank(self._row_scores(vector, rows), rows, k)

    def _row_scores(self, vector: np.ndarray, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """``flat.row_scores`` of next-generation ``rows``: each row's bits as in a whole index."""
        new, at = self._layout.locate(rows)
        out = np.empty(rows.size, dtype=np.float32)
        old = at[~new]
        if old.size * 2 >= self.base.n_chunks > 0:  # most of the base: scanned where it lies, not gathered
            out[~new] = row_scores(self.base.vectors, vector)[old]
        elif old.size:
            out[~new] = row_scores(np.asarray(self.base.vectors[old], dtype=np.float32), vector)
        if new.any():
            out[new] = row_scores(self._new_vectors[at[new]], vector)
        return out

    def _hybrid(self, text: str, vector: np.ndarray, k: int, given: SearchParams, plan: QueryPlan | None) -> Ranked:
        """``Retriever._hybrid`` over the layered arms."""
        from ragtui.core.search import fusion
        from ragtui.core.search.fusion_fit import fill_hybrid

        params: SearchParams = fill_hybrid(self.base.meta.embedding_model, dict(given))  # type: ignore[assignment]
        depth = params.get("depth") or fusion.DEFAULT_DEPTH
        arm = params.get("lexical") or "bm25doc"

        def fused(n: int, at: int) -> Ranked:
            return fusion.fuse(self._lexical(arm, text, at, params.get("chunk_weight"), plan),
                               self._flat(vector, at, plan), n,
                               method=params.get("fusion"), weight=params.get("weight"), rrf_k=params.get("rrf_k"))

        rows, scores = fused(k, depth)
        if k <= rows.size or rows.size >= self.n_chunks:
            return rows, scores
        return fusion.extend(rows, scores, fused(k, k), k)


_NONE: Ranked = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
