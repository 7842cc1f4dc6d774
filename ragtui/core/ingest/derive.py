"""What the writer derives for readers when it publishes: the structures every fresh reader would otherwise build.

A reader of a generation needs, besides the four files, structures derived
from them: the decoded BM25 arrays (``BM25Index``, stored by the publish
itself), the document-level BM25 of ``bm25doc`` (``docaware.DocLexical``), the
stemmed arm of ``bm25stem`` and of hybrid's default (``stemmed.StemLexical``),
the IVF lists and their calibration (``ivf_cache``) and the facts the writer
checked (``verified``).
The writer has everything they are made of in memory, so it makes them
once, into ``<artifacts>/rag/.cache/``: ``Derivation`` keys them while the
generation is written and builds them once it is current, holding the
index's lexical lock (and, for the lists, its IVF lock) meanwhile, so that a
reader of the new generation waits for them instead of building its own;
``tidy`` then keeps the two newest entries of each kind.

Which are made: a one-shot writer (``ragtui ingest``, ``sync``: ``everything``)
makes every one, at every size, so that the first query of a fresh process in
any mode builds nothing. The document-level BM25 and the stemmed arm are
written into their entries a block of postings at a time, by every writer at
every save: their builds hold no array of the size of the postings (a splice
of the previous generation's, as the chunk index is spliced, holds them whole:
spec/index-format.md, "Derived entries"). A long-running writer (the watch agent)
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

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.embedders.base import Embedder
from ragtui.core.index import verified
from ragtui.core.index.arraycache import BuildLock, StreamedEntry, evict, used
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.index_format import FILES
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
from ragtui.core.search.stemmed import STEM_KIND, StemLexical

__all__ = ["Derivation", "tidy"]


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
                   between: Callable[[], None] | None = None, lists_wanted: Callable[[], bool] | None = None) -> None:
        """Once the generation is current: build and store its derived entries (best effort, never raises).

        ``still_wanted()`` is asked before each build and between the IVF build's steps: False (a newer
        generation was published meanwhile) stops there, since nobody will open this one any more.
        ``embedder`` (the index's own) calibrates the IVF lists on spans of the chunks' text; they are
        built when ``before_swap`` took the IVF lock for them (``everything``, or a reader searched IVF).
        ``between`` runs before the lexical entries and again before the lists (a one-shot writer returns
        the heap the publish and then the stemmed arm's build freed, so that it does not add to the next).
        ``lists_wanted()``, asked instead of ``still_wanted()`` for the IVF lists, may stop them sooner.
        """
        lists_wanted = lists_wanted or still_wanted
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
            if self.ivf is not None and lists_wanted() and self.generation_dir is not None:
                if between is not None:
                    between()
                try:
                    # Through the link (<rag>/<index_id> -> .gen/<index_id>/<gen>), as readers open it: its name
                    # is the index_id read_index checks, and the generation read is this one unless a newer was
                    # published (then still_wanted() is False and the build stops at its next step).
                    warm_ivf_cache(self.generation_dir.parents[2] / self.index_id, self.cache_dir, embedder=embedder,
                                   should_stop=lambda: not lists_wanted())
                except Exception:  # noqa: BLE001 - the lists only save readers time; a reader builds its own
                    pass
        finally:
            self.release()

    def _stem(self) -> None:
        """The stemmed arm of the document-level BM25 (keyed ``key``), written into its entry a block of postings at
        a time (``StemLexical.build_into``); nothing is built in memory when the entry cannot be written."""
        assert self.doc_of_row is not None
        try:
            StemLexical.stored(self.bm25, self.doc_of_row, self.cache_dir, self.index_id, source_key=self.key,
                               wait=False)
        except (OSError, ValueError, MemoryError):
            pass  # the readers build it: time, not a wrong answer

    def _doclex(self) -> None:
        """The document-level BM25 entry, written a block at a time, then mapped: never held whole."""
        assert self.doc_of_row is not None and self.key is not None
        try:
            entry = StreamedEntry(self.cache_dir, DOCLEX_KIND, self.index_id)
            try:
                DocLexical.build_into(entry, self.bm25, self.doc_of_row)
                entry.place(self.key)
            finally:
                entry.discard()
        except (OSError, ValueError, MemoryError):
            pass  # the readers build it: time, not a wrong answer

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
        """The document-level BM25 entry and, when it is in use, the stemmed arm's, each written into its entry a
        block of postings at a time.

        Neither is made from the other. A long-running writer builds the stemmed arm beside the document-level
        BM25, in a second thread, so that readers waiting for both after a save wait for the longer build, not
        the sum. A one-shot writer builds them one after the other: nobody waits for them, and its peak memory
        stays that of one build."""
        if self.key is None or self.doc_of_row is None:
            return
        # A one-shot writer, or a reader searched the stemmed arm (bm25stem, hybrid's default) before: the next one
        # finds it ready.
        if not (self.everything or _stem_in_use(self.cache_dir, self.index_id)):
            self._doclex()
        elif self.everything:
            self._doclex()
            if still_wanted():
                self._stem()
        else:
            with ThreadPoolExecutor(1, thread_name_prefix="stem entry") as pool:
                stemmed = pool.submit(self._stem)
                self._doclex()
                stemmed.result()


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
