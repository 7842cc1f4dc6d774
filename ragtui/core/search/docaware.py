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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.topk import top_k
from ragtui.core.search.ranking_options import RANGES

if TYPE_CHECKING:
    from ragtui.core.index.docs_file import DocsFile

__all__ = ["DEFAULT_CHUNK_WEIGHT", "DocLexical", "check_chunk_weight", "doc_groups", "doc_groups_of"]

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
_CHUNK_NUMBER = re.compile(rb'^\{"chunk_id":"[^\n]*?#([0-9]+)","doc_id":"', re.MULTILINE)


def doc_groups_of(records: DocsFile) -> npt.NDArray[np.int64]:
    """``doc_groups`` of an index's chunks, read from docs.jsonl's raw lines when every line has
    encode_docs's layout (a new document wherever the chunk number is 0: chunks are numbered
    0, 1, ... within their document), else by parsing every line. On 100k chunks the raw read
    takes ~0.1 s where parsing takes ~5 s."""
    n = len(records)
    raw = bytes(records.raw_lines(0, n))
    numbers = [m.group(1) for m in _CHUNK_NUMBER.finditer(raw)]
    if len(numbers) == n:
        first = np.fromiter((k == b"0" for k in numbers), dtype=bool, count=n)
        if n == 0 or first[0]:
            return np.cumsum(first, dtype=np.int64) - 1
    return doc_groups([records[i].doc_id for i in range(n)])


@dataclass(frozen=True, eq=False)
class DocLexical:
    """Document-level BM25 over one generation's chunks, and the doc-aware chunk score."""

    doc_of_row: npt.NDArray[np.int64]
    """The document number of each chunk row."""
    docs: BM25Index
    """BM25 over documents (a document's postings are the sum of its chunks')."""

    @classmethod
    def build(cls, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64]) -> DocLexical:
        """Sum the chunk postings of ``chunks`` per document (``doc_of_row`` non-decreasing)."""
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        n_docs = int(doc_of_row[-1]) + 1 if doc_of_row.size else 0
        df = np.diff(chunks.offsets)
        n_terms = int(df.size)
        post_doc = np.asarray(chunks.post_doc, dtype=np.int64)
        post_tf = np.asarray(chunks.post_tf, dtype=np.int64)
        if post_doc.size:
            term_of = np.repeat(np.arange(n_terms, dtype=np.int64), df)
            doc = doc_of_row[post_doc]
            # Postings run term by term in ascending chunk order, and a document's chunks are
            # contiguous rows: equal (term, document) pairs are neighbours.
            new = np.ones(doc.size, dtype=bool)
            new[1:] = (term_of[1:] != term_of[:-1]) | (doc[1:] != doc[:-1])
            starts = np.flatnonzero(new)
            tf = np.add.reduceat(post_tf, starts)
            ddoc, dterm = doc[starts], term_of[starts]
        else:
            tf = ddoc = dterm = np.zeros(0, dtype=np.int64)
        offsets = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(dterm, minlength=n_terms), out=offsets[1:])
        lengths = np.bincount(doc_of_row, weights=np.asarray(chunks.doc_len, dtype=np.float64), minlength=n_docs)
        postings = Postings(
            doc_len=np.minimum(lengths, np.iinfo(np.uint32).max).astype(np.uint32),
            term_blob=chunks.term_blob,
            term_starts=chunks.term_starts,
            offsets=offsets,
            post_doc=ddoc,
            post_tf=tf,
        )
        return cls(doc_of_row, BM25Index.from_postings(postings, chunks.k1, chunks.b))

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
