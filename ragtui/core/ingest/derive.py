"""What the writer derives for readers when it publishes: the structures every fresh reader would otherwise build.

A reader of a generation needs, besides the four files, structures derived
from them: the decoded BM25 arrays (``BM25Index``, stored by the publish
itself), the document-level BM25 of ``bm25doc`` (``docaware.DocLexical``), the
stemmed arm of ``bm25stem`` and of hybrid's default (``stemmed.StemLexical``;
built here only once a reader has used it for an earlier generation, so an
index nobody searches that way does not pay for it at every save) and the
facts the writer checked (``verified``).
The writer has everything they are made of in memory, so it builds them
once, into ``<artifacts>/rag/.cache/``: ``Derivation`` keys them while the
generation is written and builds them once it is current; ``tidy`` then
keeps the two newest entries of each kind.

Every step is best effort and leaves either no entry or a complete one (an
``arraycache`` entry is written under a temporary name with a ``complete``
marker and renamed into place; a killed writer's temporary is removed by the
next writer): a missing or damaged entry costs the reader a rebuild, never a
wrong answer, and never fails the publish.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.embedders.base import Embedder
from ragtui.core.index import verified
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.index_format import FILES
from ragtui.core.search.docaware import DocLexical, doc_groups_of_rows, doclex_key
from ragtui.core.search.ivf_cache import warm_ivf_cache
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
    generation_dir: Path | None = None
    """The generation's directory, once ``before_swap`` has seen it complete (its four files, flushed)."""

    @classmethod
    def plan(cls, cache_dir: Path, index_id: str, bm25: BM25Index, bm25_key: str | None,
             spans: Iterable[tuple[int, int]]) -> Derivation:
        """The entries of the generation whose chunk index is ``bm25`` (keyed ``bm25_key``, ``BM25Index.store``),
        its documents' rows [lo, hi) ``spans`` in index order."""
        doc_of_row = key = None
        if bm25_key is not None:
            try:
                doc_of_row = doc_groups_of_rows(list(spans), bm25.n_docs)
                key = doclex_key(bm25_key, doc_of_row)
            except ValueError:
                doc_of_row = key = None
        return cls(cache_dir, index_id, bm25, doc_of_row, key)

    def before_swap(self, generation_dir: Path, *, ends: npt.NDArray[np.int64], bm25_key: str | None) -> None:
        """Once the generation in ``generation_dir`` is complete and flushed, just before it becomes current:
        record what the writer verified of it. Must not raise (``NewGeneration.commit``)."""
        self.generation_dir = generation_dir
        paths = [generation_dir / name for name in FILES]
        verified.record(self.cache_dir, self.index_id, paths, ends=ends, bm25_key=bm25_key, doclex_key=self.key)

    def after_swap(self, still_wanted: Callable[[], bool] = lambda: True, embedder: Embedder | None = None) -> None:
        """Once the generation is current: build and store its derived entries (best effort, never raises).

        ``still_wanted()`` is asked before each build: False (a newer generation was published meanwhile)
        stops here, since nobody will open this one any more. ``embedder`` (the index's own) calibrates
        the IVF lists on spans of the chunks' text; they are built only when a reader has searched IVF.
        """
        if still_wanted():
            self._lexical(still_wanted)
        if still_wanted() and self.generation_dir is not None and _in_use(self.cache_dir, "ivf", self.index_id):
            try:
                # Through the link (<rag>/<index_id> -> .gen/<index_id>/<gen>), as readers open it: its name is
                # the index_id read_index checks, and the generation read is this one unless a newer was published.
                warm_ivf_cache(self.generation_dir.parents[2] / self.index_id, self.cache_dir, embedder=embedder)
            except Exception:  # noqa: BLE001 - the lists only save readers time; a reader builds its own
                pass

    def _lexical(self, still_wanted: Callable[[], bool]) -> None:
        """The document-level BM25 entry, then the stemmed arm's when it is in use."""
        if self.key is None or self.doc_of_row is None:
            return
        try:
            lex = DocLexical.build(self.bm25, self.doc_of_row, self.key)
            if (lex.store(self.cache_dir, self.index_id, tidy=False) and still_wanted()
                    and _stem_in_use(self.cache_dir, self.index_id)):
                # A reader searched the stemmed arm (bm25stem, hybrid's default) before: the next one finds it ready.
                StemLexical.load(self.bm25, self.doc_of_row, self.cache_dir, self.index_id, source_key=lex.key)
        except (OSError, ValueError, MemoryError):
            pass  # the readers build it: time, not a wrong answer


def _stem_in_use(cache_dir: Path, index_id: str) -> bool:
    """Whether the cache holds a stemmed arm of ``index_id`` (a reader built one for an earlier generation)."""
    return _in_use(cache_dir, STEM_KIND, index_id)


def _in_use(cache_dir: Path, kind: str, index_id: str) -> bool:
    """Whether the cache holds an entry of ``kind`` for ``index_id`` (a reader built one for an earlier generation)."""
    prefix = f"{kind}-{index_id}-"
    try:
        return any(n.startswith(prefix) and ".tmp" not in n for n in os.listdir(cache_dir))
    except OSError:
        return False


def tidy(cache_dir: Path, index_id: str) -> None:
    """Once the new generation is current: keep only the two newest entries of each kind (best effort)."""
    BM25Index.evict(cache_dir, index_id)
    DocLexical.evict(cache_dir, index_id)
