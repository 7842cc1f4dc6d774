"""Document-aware lexical scores: a chunk's BM25 plus its document's BM25.

Chunking costs lexical ranking: a document whose query terms fall in
different chunks scores lower in every chunk than the whole document would.
``DocLexical`` recovers that evidence without touching ``bm25.idx``: at load it
sums each term's chunk postings per document into document postings (tf
summed over the document's chunks, length the sum of its chunks' lengths) and
scores them with the same BM25 (``BM25Index.from_postings``: same k1, b and
formula, documents in place of chunks). A chunk's ``bm25doc`` score is then::

    score(chunk) = bm25_doc(document of chunk) + chunk_weight * bm25(chunk)

so documents rank as whole-document BM25 does (ties and near-ties broken by
their best passage) and, within a document, chunks rank by their own BM25.
Overlapping chunks count the tokens they share twice in the document's
postings; the measured effect is small (spec/ranking.md).

What callers may rely on: the arrays are derived only from the BM25 postings
and the chunks' doc_ids of one generation; they live in memory (or in the
cache directory, outside the index); ``bm25`` mode is untouched.

The cache entry (``arraycache``, kind ``doclex``) is keyed by ``doclex_key``:
the chunk index's own key (the SHA-256 of bm25.idx with k1 and b,
``BM25Index.cache_key``) and the SHA-256 of the document number of every
row, so neither the postings nor docs.jsonl are hashed to find it. The index
writer stores the entry of each generation it publishes before the
generation becomes current and records its key beside the generation's other
facts (``verified``), so a fresh reader maps it without scanning docs.jsonl;
without that record a reader finds the documents in docs.jsonl, computes the
key and maps the entry, or builds the arrays and stores them. The entry
holds only what differs from the chunk index (the document numbers, the
documents' lengths and postings, their weights): the dictionary is the chunk
index's. An entry whose arrays do not fit the chunk index, or whose document
numbers do not hash to its key, is built again: a damaged entry costs time,
never a wrong score.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.index.arraycache import BuildLock, StreamedEntry, drop_pages, evict, load_entry, store_arrays
from ragtui.core.index.bm25 import BM25Index, Postings, check_bm25_params, weight_blocks
from ragtui.core.index.topk import top_k
from ragtui.core.search.ranking_options import RANGES

if TYPE_CHECKING:
    from ragtui.core.index.docs_file import DocsFile

__all__ = [
    "DEFAULT_CHUNK_WEIGHT", "DOCLEX_KIND", "DocLexical", "check_chunk_weight", "doc_groups", "doc_groups_of",
    "doc_groups_of_rows", "doc_groups_of_sizes", "doc_lengths", "doc_numbers", "doc_sums", "doclex_key",
]

DOCLEX_KIND = "doclex"
"""The ``arraycache`` kind of the document-level BM25 entries."""
DOCLEX_VERSION = 1
"""Bumped when the derivation or the entry's layout changes, so older entries are never read."""

BUILD_BLOCK = 1 << 20
"""Chunk postings ``DocLexical.build`` sums per document at a time (whole terms)."""

DEFAULT_CHUNK_WEIGHT = 0.5
"""How much a chunk's own BM25 adds to its document's (chosen leave-one-collection-out, spec/ranking.md)."""
CHUNK_WEIGHT_RANGE = RANGES["chunk_weight"]


def check_chunk_weight(value: object) -> float:
    """``value`` as a float in ``CHUNK_WEIGHT_RANGE`` (None: the default); ``UsageError`` otherwise."""
    if value is None:
        return DEFAULT_CHUNK_WEIGHT
    lo, hi = CHUNK_WEIGHT_RANGE
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise UsageError(f"chunk_weight must be a number from {lo:g} to {hi:g} (got {value!r})")
    if not lo <= value <= hi:
        raise UsageError(f"chunk_weight must be from {lo:g} to {hi:g} (got {value!r})")
    return float(value)


def doc_groups(doc_ids: list[str]) -> npt.NDArray[np.int64]:
    """The document number of each chunk row: rows of one doc_id are contiguous (index-format.md)."""
    out = np.zeros(len(doc_ids), dtype=np.int64)
    n = -1
    prev: str | None = None
    for i, d in enumerate(doc_ids):
        if d != prev:
            n += 1
            prev = d
        out[i] = n
    return out


# A docs.jsonl line as encode_docs writes it starts {"chunk_id":"<doc_id>#<k>","doc_id":"...; inside a
# JSON string every '"' is escaped, so the first '#digits","doc_id":"' of such a line ends its chunk_id.
GROUP_BLOCK_BYTES = 8 << 20
"""``doc_groups_of`` reads docs.jsonl this many bytes of lines at a time."""
_CHUNK_NUMBER = re.compile(rb'^\{"chunk_id":"[^\n]*?#([0-9]+)","doc_id":"', re.MULTILINE)


def doc_groups_of(records: DocsFile) -> npt.NDArray[np.int64]:
    """``doc_groups`` of an index's chunks, read from docs.jsonl's raw lines when every line has
    encode_docs's layout (a new document wherever the chunk number is 0: chunks are numbered
    0, 1, ... within their document), else from a checked pass over the file (``DocsFile.doc_starts``).
    A block of lines at a time (``GROUP_BLOCK_BYTES``): memory stays that of one block. On 100k chunks
    the raw read takes ~0.1 s where parsing takes ~2 s."""
    n = len(records)
    first = np.zeros(n, dtype=bool)
    for lo, hi in records.blocks(GROUP_BLOCK_BYTES):
        numbers = [m.group(1) for m in _CHUNK_NUMBER.finditer(bytes(records.raw_lines(lo, hi)))]
        if len(numbers) != hi - lo:
            return doc_groups_of_starts(records.doc_starts(), n)
        first[lo:hi] = [k == b"0" for k in numbers]
    if n and not first[0]:
        return doc_groups_of_starts(records.doc_starts(), n)
    return np.cumsum(first, dtype=np.int64) - 1


def doc_groups_of_starts(starts: npt.NDArray[np.int64], n_rows: int) -> npt.NDArray[np.int64]:
    """``doc_groups`` from each document's first row (ascending, the first 0), covering ``n_rows`` rows."""
    return doc_groups_of_sizes(np.diff(starts, append=n_rows), n_rows)


def doc_groups_of_rows(spans: list[tuple[int, int]] | tuple[tuple[int, int], ...], n_rows: int) -> npt.NDArray[np.int64]:
    """``doc_groups`` from each document's rows [lo, hi), in index order, covering ``n_rows`` rows (a writer's layout)."""
    return doc_groups_of_sizes(np.array([hi - lo for lo, hi in spans], dtype=np.int64), n_rows)


def doc_groups_of_sizes(sizes: npt.NDArray[np.int64], n_rows: int) -> npt.NDArray[np.int64]:
    """``doc_groups`` from each document's number of rows, in index order, covering ``n_rows`` rows."""
    if int(sizes.sum()) != n_rows or (sizes.size and int(sizes.min()) < 1):
        raise ValueError("the documents' rows do not cover the index")
    return np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)


def lexical_lock(name: str) -> str:
    """The ``BuildLock`` name under which the document-level and stemmed BM25 entries of index ``name`` are made."""
    return f"lexical-{name}"


def doclex_key(bm25_key: str, doc_of_row: npt.NDArray[np.int64]) -> str:
    """The cache key of the document-level BM25 of the chunk index keyed ``bm25_key`` (``BM25Index.cache_key``,
    which covers bm25.idx's bytes, k1 and b) with rows grouped as ``doc_of_row``: everything it is derived from."""
    h = hashlib.sha256(f"doclex{DOCLEX_VERSION}\0{bm25_key}\0".encode("ascii"))
    h.update(np.ascontiguousarray(doc_of_row, dtype="<i8").data)
    return f"v{DOCLEX_VERSION}-" + h.hexdigest()[:40]


def doc_lengths(chunks: BM25Index, doc_of_row: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    """Each document's length: the sum of its chunks' (at most the largest uint32)."""
    n_docs = int(doc_of_row[-1]) + 1 if doc_of_row.size else 0
    lengths = np.bincount(doc_of_row, weights=np.asarray(chunks.doc_len, dtype=np.float64), minlength=n_docs)
    return np.minimum(lengths, np.iinfo(np.uint32).max).astype(np.uint32)


def doc_numbers(doc_of_row: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | npt.NDArray[np.int32]:
    """``doc_of_row`` in four bytes a row where the documents' numbers fit (they do below 2^31 documents)."""
    n_docs = int(doc_of_row[-1]) + 1 if doc_of_row.size else 0
    return doc_of_row.astype(np.int32) if n_docs < (1 << 31) else doc_of_row


def _doc_starts(doc_of: npt.NDArray[np.int64] | npt.NDArray[np.int32], rows: np.ndarray,
                bounds: npt.NDArray[np.int64]) -> tuple[np.ndarray, npt.NDArray[np.int64]]:
    """(the document of each posting, where each document posting starts) of ``doc_sums``' postings."""
    doc = doc_of[rows]
    # Postings run term by term in ascending chunk order, and a document's chunks are contiguous rows: equal
    # (term, document) pairs are neighbours. A document posting starts where the document changes or a term's
    # postings begin.
    new = np.empty(rows.size, dtype=bool)
    new[0] = True
    np.not_equal(doc[1:], doc[:-1], out=new[1:])
    term_lo = bounds[:-1]
    new[term_lo[term_lo < bounds[1:]]] = True
    return doc, np.flatnonzero(new)


def doc_sums(doc_of: npt.NDArray[np.int64] | npt.NDArray[np.int32], rows: np.ndarray, tf: np.ndarray,
             bounds: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """The document postings of a run of terms' chunk postings (``rows``, ``tf``: term by term, each term's in
    ascending row order; term i's are ``[bounds[i], bounds[i + 1])``, ``bounds[0]`` 0): (documents, tfs summed,
    where each term's document postings end). ``doc_of``: the document of each row (``doc_numbers``)."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.uint32), np.zeros(bounds.size - 1, np.int64)
    doc, starts = _doc_starts(doc_of, rows, bounds)
    first = doc[starts]
    del doc
    # Summed modulo 2^32, as a sum in int64 cast to uint32 is.
    summed = np.add.reduceat(tf, starts, dtype=np.uint32)
    return first.view(np.uint32) if first.dtype == np.int32 else first.astype(np.uint32), summed, _ends(starts, bounds)


def _ends(starts: npt.NDArray[np.int64], bounds: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    # Every term's first posting starts a document posting: a term's end is the count of starts before the next.
    return np.searchsorted(starts, bounds[1:], side="left").astype(np.int64)


def _sums(chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], block: int | None,
          ) -> Iterator[tuple[int, int, npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.int64]]]:
    """The document postings of ``chunks``' terms, about ``block`` chunk postings at a time (whole terms), in order:
    (first term, term after the last, documents, tfs, where each term's document postings end in the block)."""
    block = BUILD_BLOCK if block is None else block
    narrow = doc_numbers(doc_of_row)
    chunk_offsets = np.asarray(chunks.offsets, dtype=np.int64)
    n_terms = chunk_offsets.size - 1
    t_lo = 0
    while t_lo < n_terms:
        t_hi = max(t_lo + 1, int(np.searchsorted(chunk_offsets, chunk_offsets[t_lo] + block, side="right")) - 1)
        t_hi = min(t_hi, n_terms)
        lo, hi = int(chunk_offsets[t_lo]), int(chunk_offsets[t_hi])
        yield t_lo, t_hi, *doc_sums(narrow, chunks.post_doc[lo:hi], chunks.post_tf[lo:hi],
                                    chunk_offsets[t_lo : t_hi + 1] - lo)
        # Mapped from the cache (the writer's case): what was read stays in the page cache, not in this process.
        drop_pages(chunks.post_doc, hi)
        drop_pages(chunks.post_tf, hi)
        t_lo = t_hi


_OWN = ("doc_len", "df", "offsets", "post_doc", "post_tf", "weights")
"""The arrays of the document index an entry holds; the dictionary (term_blob, term_starts, term_key) is the chunks'."""


@dataclass(frozen=True, eq=False)
class DocLexical:
    """Document-level BM25 over one generation's chunks, and the doc-aware chunk score."""

    doc_of_row: npt.NDArray[np.int64]
    """The document number of each chunk row."""
    docs: BM25Index
    """BM25 over documents (a document's postings are the sum of its chunks')."""
    key: str | None = None
    """Its cache key (``doclex_key``), when it was loaded or built with one."""

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The arrays of a cache entry: the document numbers and the document index less the dictionary."""
        d = self.docs
        scalars = np.array([d.n_docs, d.avgdl, d.k1, d.b], dtype=np.float64)
        return {"rows": self.doc_of_row, "scalars": scalars, **{name: getattr(d, name) for name in _OWN}}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], chunks: BM25Index, key: str, bm25_key: str) -> DocLexical | None:
        """The document-level BM25 of an entry, over ``chunks``' dictionary; None unless the arrays fit ``chunks``
        and the document numbers hash to ``key`` (a damaged or foreign entry)."""
        try:
            rows, scalars = arrays["rows"], arrays["scalars"]
            own = {name: arrays[name] for name in _OWN}
            if scalars.shape != (4,) or not np.isfinite(scalars).all():
                return None
            n_docs, avgdl, k1, b = (float(x) for x in scalars)
            kinds = {"doc_len": "u", "df": "i", "offsets": "i", "post_doc": "u", "post_tf": "iu", "weights": "f"}
            if any(a.ndim != 1 or a.dtype.kind not in kinds[n] for n, a in own.items()):
                return None
            if rows.ndim != 1 or rows.dtype != np.int64 or rows.size != chunks.n_docs or (k1, b) != (chunks.k1, chunks.b):
                return None
            docs = int(rows[-1]) + 1 if rows.size else 0
            n_post = own["post_doc"].size
            if not (docs == n_docs == own["doc_len"].size and own["df"].size == chunks.n_terms
                    and own["offsets"].size == chunks.n_terms + 1 and int(own["offsets"][0]) == 0
                    and int(own["offsets"][-1]) == n_post == own["post_tf"].size == own["weights"].size):
                return None
            if doclex_key(bm25_key, rows) != key:
                return None
        except (KeyError, IndexError, ValueError, TypeError):
            return None
        index = BM25Index(int(n_docs), avgdl, k1, b, term_blob=chunks.term_blob, term_starts=chunks.term_starts,
                          term_key=chunks.term_key, **own)
        return cls(rows, index, key)

    @classmethod
    def load(cls, chunks: BM25Index, groups: Callable[[], npt.NDArray[np.int64]], cache_dir: Path | None, name: str,
             bm25_key: str | None, key: str | None = None, *, wait: bool = True) -> DocLexical:
        """``build``, or the entry of an earlier build from ``cache_dir`` (outside the index), memory-mapped.

        ``groups()`` gives the document number of each row (called only when
        needed: it reads docs.jsonl); ``bm25_key`` is ``chunks``' cache key
        (None: nothing is cached); ``key`` the entry's key as the writer
        recorded it, taken when its entry is sound. A missing or damaged
        entry is built and stored again; the result is the same either way.
        Before building, ``wait`` waits for the index's ``lexical_lock``: a
        writer holds it from the moment a generation becomes current until
        its entries are stored (a caller that holds it passes False).
        """
        if cache_dir is None or bm25_key is None:
            return cls.build(chunks, groups())
        if key is not None:
            got = cls._cached(chunks, cache_dir, name, bm25_key, key)
            if got is None and wait:
                # The writer that recorded the key makes that entry while it holds the lock: wait for it rather
                # than read docs.jsonl to group the rows (seconds at a million chunks) and then wait anyway.
                with BuildLock.wait(cache_dir, lexical_lock(name)):
                    got = cls._cached(chunks, cache_dir, name, bm25_key, key)
            if got is not None:
                return got
        doc_of_row = np.asarray(groups(), dtype=np.int64)
        key = doclex_key(bm25_key, doc_of_row)
        got = cls._cached(chunks, cache_dir, name, bm25_key, key)
        if got is not None:
            return got
        with BuildLock.wait(cache_dir, lexical_lock(name)) if wait else BuildLock(None):
            got = cls._cached(chunks, cache_dir, name, bm25_key, key) if wait else None
            if got is not None:
                return got
            built = cls.build(chunks, doc_of_row, key)
            built.store(cache_dir, name, replace=True)  # whatever is under the key could not be used
        return built

    @classmethod
    def _cached(cls, chunks: BM25Index, cache_dir: Path, name: str, bm25_key: str, key: str) -> DocLexical | None:
        found = load_entry(cache_dir, DOCLEX_KIND, name, key)
        return cls.from_arrays(found, chunks, key, bm25_key) if found is not None else None

    def store(self, cache_dir: Path, name: str, *, replace: bool = False, tidy: bool = True) -> bool:
        """Put this in ``cache_dir`` under its key (best effort; True when the entry is there).

        ``replace``: what is under the key (a damaged entry) is removed first. With ``tidy`` only the two newest entries of ``name``
        are kept (a writer passes False and calls ``evict`` once the
        generation is current).
        """
        if self.key is None:
            return False
        if replace:
            shutil.rmtree(Path(cache_dir) / f"{DOCLEX_KIND}-{name}-{self.key}", ignore_errors=True)
        stored = store_arrays(cache_dir, DOCLEX_KIND, name, self.key, self.to_arrays())
        if tidy:
            evict(cache_dir, DOCLEX_KIND, name)
        return stored

    @staticmethod
    def evict(cache_dir: Path | None, name: str) -> None:
        """Drop all but the two newest entries of ``name`` (after a writer's ``store``)."""
        if cache_dir is not None:
            evict(cache_dir, DOCLEX_KIND, name)

    @classmethod
    def build(cls, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], key: str | None = None,
              block: int | None = None) -> DocLexical:
        """Sum the chunk postings of ``chunks`` per document (``doc_of_row`` non-decreasing); ``key`` is kept.

        The chunk postings are taken about ``block`` (``BUILD_BLOCK``) at a time, whole terms, so what is held
        beyond the result is one block's temporaries.
        """
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        n_post = int(chunks.post_doc.size)
        # At most one document posting per chunk posting: the arrays are allocated for that many, and only the
        # pages written are ever resident.
        ddoc = np.empty(n_post, dtype=np.uint32)
        tf = np.empty(n_post, dtype=np.uint32)
        offsets = np.zeros(int(chunks.offsets.size), dtype=np.int64)
        made = 0
        for t_lo, t_hi, doc_block, tf_block, ends in _sums(chunks, doc_of_row, block):
            ddoc[made : made + doc_block.size] = doc_block
            tf[made : made + tf_block.size] = tf_block
            offsets[t_lo + 1 : t_hi + 1] = made + ends
            made += doc_block.size
        postings = Postings(doc_lengths(chunks, doc_of_row), chunks.term_blob, chunks.term_starts, offsets, ddoc[:made],
                            tf[:made])
        return cls(doc_of_row, BM25Index.from_postings(postings, chunks.k1, chunks.b), key)

    @classmethod
    def build_into(cls, entry: StreamedEntry, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64],
                   block: int | None = None) -> None:
        """Write into ``entry`` the arrays of ``build(chunks, doc_of_row).to_arrays()``, the same bytes, a block of
        chunk postings at a time: nothing of the size of the postings is held. One pass: a block holds whole
        terms, so each term's document frequency (its idf) is known where its postings are written."""
        check_bm25_params(chunks.k1, chunks.b)
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        offsets = np.zeros(int(chunks.offsets.size), dtype=np.int64)
        doc_len = doc_lengths(chunks, doc_of_row)
        n_docs = int(doc_len.size)
        avgdl = float(doc_len.mean(dtype=np.float64)) if n_docs else 0.0
        k1, b = chunks.k1, chunks.b
        columns = [entry.column(name, dtype) for name, dtype in
                   (("post_doc", np.uint32), ("post_tf", np.uint32), ("weights", np.float64))]
        made = 0
        for t_lo, t_hi, doc_block, tf_block, ends in _sums(chunks, doc_of_row, block):
            columns[0].write(doc_block)
            columns[1].write(tf_block)
            local = np.concatenate(([0], ends))
            for w in weight_blocks(np.diff(local), local, doc_block, tf_block, doc_len, avgdl, n_docs, k1, b):
                columns[2].write(w)
            offsets[t_lo + 1 : t_hi + 1] = made + ends
            made += doc_block.size
        for column in columns:
            column.close()
        entry.add("rows", np.int64, doc_of_row.size, [doc_of_row])
        scalars = np.array([n_docs, avgdl, k1, b], dtype=np.float64)
        for name, whole in (("scalars", scalars), ("doc_len", doc_len), ("df", np.diff(offsets)), ("offsets", offsets)):
            entry.add(name, whole.dtype, whole.size, [whole])

    def chunk_scores(self, chunks: BM25Index, query: str, chunk_weight: float) -> npt.NDArray[np.float64]:
        """Dense doc-aware score of every chunk: its document's BM25 + chunk_weight * its own.

        0.0 for a chunk without a query term of its own (a document's other
        chunks would otherwise flood the results without matching anything).
        """
        own = chunks.scores(query)
        doc_scores = self.docs.scores(query)
        out = doc_scores[self.doc_of_row] if self.doc_of_row.size else np.zeros(0, dtype=np.float64)
        out = out + chunk_weight * own
        out[own <= 0.0] = 0.0
        return out

    def search(
        self, chunks: BM25Index, query: str, k: int, chunk_weight: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k chunks by doc-aware score (desc, ties by ascending row); chunks scoring 0 are left out.

        The same scores as ``chunk_scores``, computed only for the chunks that hold a query term."""
        own = chunks.scores(query)
        matched = np.flatnonzero(own > 0.0)
        if matched.size == 0:
            return matched.astype(np.int64), np.zeros(0, dtype=np.float64)
        doc_scores = self.docs.scores(query)
        scores = doc_scores[self.doc_of_row[matched]] + chunk_weight * own[matched]
        return top_k(scores, matched, k)
