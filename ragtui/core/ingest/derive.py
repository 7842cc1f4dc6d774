"""What the writer derives for readers when it publishes: the structures every fresh reader would otherwise build.

A reader of a generation needs, besides the four files, structures derived
from them: the decoded BM25 arrays (``BM25Index``, stored by the publish
itself), the document-level BM25 of ``bm25doc`` (``docaware.DocLexical``), the
stemmed arm of ``bm25stem`` and of hybrid's default (``stemmed.StemLexical``),
the IVF lists and their calibration (``ivf_cache``) and the facts the writer
checked (``verified``).
The writer has everything they are made of in memory, so it makes them
once, into ``<artifacts>/rag/.cache/``: ``Derivation`` keys them while the
generation is written and makes them once it is current — a long-running
writer by splicing the last generation's (``follow``), as the chunk index is
spliced, else by building them — holding the index's lexical lock (and, for
the lists, its IVF lock) meanwhile, so that a reader of the new generation
waits for them instead of building its own; ``tidy`` then keeps the two
newest entries of each kind.

Which are made: a one-shot writer (``ragtui ingest``, ``sync``: ``everything``)
makes every one, at every size, so that the first query of a fresh process in
any mode builds nothing (the document-level BM25 and the stemmed arm are
written into their entries a block of postings at a time: their builds hold
no array of the size of the postings). A long-running writer (the watch agent)
makes the stemmed arm and the IVF lists only once a reader has searched that way
(a reader notes it: ``arraycache.mark_used``), so that an index nobody searches
with IVF does not pay for the lists at every save.

Every step is best effort and leaves either no entry or a complete one (an
``arraycache`` entry is written under a temporary name with a ``complete``
marker and renamed into place; a killed writer's temporary is removed by the
next writer): a missing or damaged entry costs the reader a rebuild, never a
wrong answer, and never fails the publish.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.embedders.base import Embedder
from ragtui.core.index import verified
from ragtui.core.index.arraycache import BuildLock, StreamedEntry, evict, store_arrays, used
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_splice import splice_postings
from ragtui.core.index.index_format import FILES, generation_of
from ragtui.core.ingest.doc_rows import DocRows
from ragtui.core.search.docaware import (
    DOCLEX_KIND,
    DocLexical,
    doc_groups_of_rows,
    doc_groups_of_sizes,
    doclex_key,
    lexical_lock,
)
from ragtui.core.search.ivf_cache import entry_name, ivf_lock, warm_ivf_cache
from ragtui.core.search.stemmed import STEM_KIND, StemLexical, source_cache_key, stem_terms

__all__ = ["Change", "Derivation", "Lexical", "tidy"]


@dataclass(frozen=True, eq=False)
class Lexical:
    """The document-level and stemmed BM25 of one published generation (mapped from their cache entries), kept by
    a long-running writer so that the next generation's can be spliced from them instead of built."""

    generation: str
    """The generation's identity (``index_format.generation_of``)."""
    doclex: DocLexical
    stem: StemLexical | None
    """None when nobody searched the stemmed arm."""


@dataclass(frozen=True, eq=False)
class Change:
    """What an incremental publish changed, as the derived structures need it."""

    row_map: npt.NDArray[np.int64]
    """Each old chunk row's new row, or -1."""
    new_rows: Sequence[int]
    """The rows of the new chunks, ascending."""
    new_terms: Sequence[Sequence[str]]
    """Their analyzed terms."""


@dataclass
class Derivation:
    """The derived entries of one generation being published: keyed before the link's rename, built right after.

    ``plan`` (cheap: the rows' documents and the entry's key) runs while the
    generation is written; ``before_swap`` records the key with the other
    facts of the generation (``verified``), so a reader that opens it finds
    the entry without scanning docs.jsonl once it exists; ``after_swap``
    builds and stores the entries. Building after the rename keeps a save
    searchable as soon as its files are (the build takes seconds at 100k
    chunks); a reader that opens the generation before the entry is there
    builds its own, with the same result.
    """

    cache_dir: Path
    index_id: str
    bm25: BM25Index
    doc_of_row: npt.NDArray[np.int64] | None
    key: str | None
    """The document-level BM25 entry's key (``docaware.doclex_key``); None: nothing will be stored."""
    bm25_key: str | None = None
    """The chunk index's cache key (``BM25Index.cache_key``)."""
    generation_dir: Path | None = None
    """The generation's directory, once ``before_swap`` has seen it complete (its four files, flushed)."""
    previous: tuple[Lexical, Change] | None = None
    """The previous generation's document-level (and stemmed) BM25 and what changed since (``follow``)."""
    lexical: Lexical | None = None
    """Its document-level (and stemmed) BM25 as stored, once ``after_swap`` has made them."""
    lock: BuildLock | None = None
    """The index's ``lexical_lock``, held from ``before_swap`` until its entries are stored."""
    everything: bool = False
    """Make the stemmed arm and the IVF lists whether or not a reader used them (a one-shot writer)."""
    ivf: BuildLock | None = None
    """The index's ``ivf_cache.ivf_lock``, held from ``before_swap`` until its lists are stored (or given up);
    None when no lists will be made."""

    @classmethod
    def plan(cls, cache_dir: Path, index_id: str, bm25: BM25Index, bm25_key: str | None,
             spans: DocRows | Iterable[tuple[int, int]], *, everything: bool = False) -> Derivation:
        """The entries of the generation whose chunk index is ``bm25`` (keyed ``bm25_key``, ``BM25Index.store``),
        its documents' rows [lo, hi) ``spans`` in index order; ``everything``: see the field."""
        doc_of_row = key = None
        if bm25_key is not None:
            try:
                doc_of_row = (doc_groups_of_sizes(spans.sizes(), bm25.n_docs) if isinstance(spans, DocRows)
                              else doc_groups_of_rows(list(spans), bm25.n_docs))
                key = doclex_key(bm25_key, doc_of_row)
            except ValueError:
                doc_of_row = key = None
        return cls(cache_dir, index_id, bm25, doc_of_row, key, bm25_key, everything=everything)

    def follow(self, before: Lexical, change: Change) -> None:
        """Make the entries from ``before``, the previous generation's, and ``change`` (``_splice``), not from scratch."""
        self.previous = (before, change)

    def _splice(self, before: Lexical, change: Change) -> tuple[DocLexical, StemLexical | None] | None:
        """The document-level BM25 (and the stemmed arm, when ``before`` has one) from ``before``'s, stored:
        ``splice_postings`` on documents as the chunk index is spliced, instead of a build from every posting
        (a sort of every stemmed posting among it). The arrays are the ones a build gives (tests compare
        them). None when anything is amiss: the caller builds them."""
        doc_of_row, key = self.doc_of_row, self.key
        old_rows = before.doclex.doc_of_row
        if key is None or doc_of_row is None or old_rows.size != change.row_map.size or not doc_of_row.size:
            return None
        n_docs = int(doc_of_row[-1]) + 1
        # Documents: an old document whose chunks were carried over keeps its postings under its new number; one
        # whose chunks were replaced is dropped, and every document with new chunks is put in (all its chunks are).
        old_first = np.flatnonzero(np.concatenate(([True], old_rows[1:] != old_rows[:-1]))) if old_rows.size else old_rows
        moved = np.asarray(change.row_map, dtype=np.int64)[old_first]
        doc_map = np.where(moved >= 0, doc_of_row[np.maximum(moved, 0)], -1)
        new_rows = np.asarray(change.new_rows, dtype=np.int64)
        new_docs, first = np.unique(doc_of_row[new_rows], return_index=True)
        if not np.array_equal(np.bincount(doc_of_row[new_rows], minlength=n_docs)[new_docs],
                              np.bincount(doc_of_row, minlength=n_docs)[new_docs]):
            return None  # a document with old and new chunks: not a layout this writer makes
        bounds = [*first.tolist(), len(new_rows)]
        docs = new_docs.tolist()

        def per_doc(terms: Sequence[Sequence[str]]) -> list[list[str]]:
            return [list(itertools.chain.from_iterable(terms[a:b])) for a, b in itertools.pairwise(bounds)]

        chunks = self.bm25
        lex = _spliced_index(before.doclex.docs, doc_map, n_docs, docs, per_doc(change.new_terms), chunks.k1, chunks.b)
        if not (np.array_equal(lex.term_starts, chunks.term_starts) and np.array_equal(lex.term_blob, chunks.term_blob)):
            return None  # not the chunk index's dictionary: the previous entry was not this index's
        if not DocLexical(doc_of_row, lex, key).store(self.cache_dir, self.index_id, tidy=False):
            return None
        doclex = self._mapped(key)
        stem = None
        if before.stem is not None:
            stemmed = [stem_terms(list(t)) for t in change.new_terms]
            old = before.stem.chunks
            c = _spliced_index(old, change.row_map, chunks.n_docs, list(change.new_rows), stemmed, old.k1, old.b)
            d = _spliced_index(before.stem.docs.docs, doc_map, n_docs, docs, per_doc(stemmed), old.k1, old.b)
            arrays = {f"c_{n}": a for n, a in c.to_arrays().items()}
            arrays.update({f"d_{n}": a for n, a in d.to_arrays().items()})
            if store_arrays(self.cache_dir, STEM_KIND, self.index_id, source_cache_key(key, old.k1, old.b), arrays):
                del arrays, c, d
                stem = StemLexical.load(chunks, doc_of_row, self.cache_dir, self.index_id, old.k1, old.b, source_key=key,
                                        wait=False)
        return doclex, stem

    def before_swap(self, generation_dir: Path, *, ends: npt.NDArray[np.int64], bm25_key: str | None) -> None:
        """Once the generation in ``generation_dir`` is complete and flushed, just before it becomes current:
        record what the writer verified of it. Must not raise (``NewGeneration.commit``)."""
        self.generation_dir = generation_dir
        if self.key is not None:
            # Readers of the generation about to be current wait for its entries rather than build their own.
            self.lock = BuildLock.take(self.cache_dir, lexical_lock(self.index_id))
        if self.everything or _ivf_in_use(self.cache_dir, self.index_id):
            self.ivf = BuildLock.take(self.cache_dir, ivf_lock(self.index_id))
        paths = [generation_dir / name for name in FILES]
        verified.record(self.cache_dir, self.index_id, paths, ends=ends, bm25_key=bm25_key, doclex_key=self.key)

    def after_swap(self, still_wanted: Callable[[], bool] = lambda: True, embedder: Embedder | None = None,
                   between: Callable[[], None] | None = None) -> None:
        """Once the generation is current: build and store its derived entries (best effort, never raises).

        ``still_wanted()`` is asked before each build and between the IVF build's steps: False (a newer
        generation was published meanwhile) stops there, since nobody will open this one any more.
        ``embedder`` (the index's own) calibrates the IVF lists on spans of the chunks' text; they are
        built when ``before_swap`` took the IVF lock for them (``everything``, or a reader searched IVF).
        ``between`` runs before the lexical entries and again before the lists (a one-shot writer returns
        the heap the publish and then the stemmed arm's build freed, so that it does not add to the next).
        """
        # A build of the previous generation may have held the locks when ``before_swap`` asked: it has let
        # them go by now (it stops once this generation is published), so readers wait for this one's entries.
        if self.lock is not None and not self.lock.held:
            self.lock = BuildLock.take(self.cache_dir, lexical_lock(self.index_id))
        if self.ivf is not None and not self.ivf.held:
            self.ivf = BuildLock.take(self.cache_dir, ivf_lock(self.index_id))
        try:
            try:
                if still_wanted():
                    if between is not None:
                        between()
                    self._lexical(still_wanted)
            finally:
                self.release_lexical()
            if self.ivf is not None and still_wanted() and self.generation_dir is not None:
                if between is not None:
                    between()
                try:
                    # Through the link (<rag>/<index_id> -> .gen/<index_id>/<gen>), as readers open it: its name
                    # is the index_id read_index checks, and the generation read is this one unless a newer was
                    # published (then still_wanted() is False and the build stops at its next step).
                    warm_ivf_cache(self.generation_dir.parents[2] / self.index_id, self.cache_dir, embedder=embedder,
                                   should_stop=lambda: not still_wanted())
                except Exception:  # noqa: BLE001 - the lists only save readers time; a reader builds its own
                    pass
        finally:
            self.release()

    def _mapped(self, key: str) -> DocLexical:
        """The document-level BM25 just stored under ``key``, mapped from its entry (not held in memory)."""
        doc_of_row = self.doc_of_row
        assert doc_of_row is not None
        return DocLexical.load(self.bm25, lambda: doc_of_row, self.cache_dir, self.index_id, self.bm25_key, key,
                               wait=False)

    def _stem(self, key: str | None) -> StemLexical:
        """The stemmed arm of the document-level BM25 keyed ``key``: written into its entry a block of postings at
        a time (``StemLexical.build_into``), then mapped from it (built in memory only when it cannot be stored)."""
        assert self.doc_of_row is not None
        return StemLexical.load(self.bm25, self.doc_of_row, self.cache_dir, self.index_id, source_key=key, wait=False)

    def release_lexical(self) -> None:
        """Let readers waiting for this generation's lexical entries go (they find them, or build their own)."""
        if self.lock is not None:
            self.lock.release()

    def release(self) -> None:
        """Let readers waiting for any of this generation's entries go (they find them, or build their own)."""
        self.release_lexical()
        if self.ivf is not None:
            self.ivf.release()

    def _lexical(self, still_wanted: Callable[[], bool]) -> None:
        """The document-level BM25 entry, then the stemmed arm's when it is in use: spliced from the previous
        generation's when ``follow`` gave them, else built."""
        if self.key is None or self.doc_of_row is None:
            return
        name = (generation_of(self.generation_dir) if self.generation_dir is not None else None) or ""
        try:
            made = self._splice(*self.previous) if self.previous is not None else None
        except (OSError, ValueError, IndexError, MemoryError):
            made = None
        self.previous = None
        try:
            lex, stem = made if made is not None else (None, None)
            if lex is None:
                # Written into its entry a block at a time, then mapped: never held whole.
                entry = StreamedEntry(self.cache_dir, DOCLEX_KIND, self.index_id)
                try:
                    DocLexical.build_into(entry, self.bm25, self.doc_of_row)
                    if not entry.place(self.key):
                        return
                finally:
                    entry.discard()
                lex = self._mapped(self.key)
            if stem is None and still_wanted() and (self.everything or _stem_in_use(self.cache_dir, self.index_id)):
                # A one-shot writer, or a reader searched the stemmed arm (bm25stem, hybrid's default) before:
                # the next one finds it ready.
                stem = self._stem(lex.key)
            self.lexical = Lexical(name, lex, stem)
        except (OSError, ValueError, MemoryError):
            pass  # the readers build it: time, not a wrong answer


def _spliced_index(old: BM25Index, row_map: npt.NDArray[np.int64], n_rows: int, new_rows: list[int],
                   new_terms: Sequence[Sequence[str]], k1: float, b: float) -> BM25Index:
    """The BM25 index of ``old``'s rows moved by ``row_map`` (-1: dropped) with ``new_rows`` of ``new_terms`` put in."""
    return BM25Index.from_postings(splice_postings(old, row_map, n_rows, new_rows, new_terms), k1, b)


def _stem_in_use(cache_dir: Path, index_id: str) -> bool:
    """Whether a reader searched ``index_id``'s stemmed arm (``arraycache.mark_used``)."""
    return used(cache_dir, STEM_KIND, index_id)


def _ivf_in_use(cache_dir: Path, index_id: str) -> bool:
    """Whether a reader searched ``index_id`` with IVF (``arraycache.mark_used``)."""
    return used(cache_dir, "ivf", entry_name(index_id))


def tidy(cache_dir: Path, index_id: str) -> None:
    """Once the new generation is current: keep only the two newest entries of each kind (best effort)."""
    BM25Index.evict(cache_dir, index_id)
    DocLexical.evict(cache_dir, index_id)
    evict(cache_dir, STEM_KIND, index_id)
