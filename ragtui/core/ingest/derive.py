"""What the writer derives for readers when it publishes: the structures every fresh reader would otherwise build.

A reader of a generation needs, besides the four files, structures derived
from them: the decoded BM25 arrays (``BM25Index``, stored by the publish
itself), the document-level BM25 of ``bm25doc`` (``docaware.DocLexical``), the
stemmed arm of ``bm25stem`` and of hybrid's default (``stemmed.StemLexical``;
built here only once a reader has used it for an earlier generation, so an
index nobody searches that way does not pay for it at every save) and the
facts the writer checked (``verified``).
The writer has everything they are made of in memory, so it builds them
once, into ``<artifacts>/rag/.cache/``, while the new generation is still a
directory nobody reads: ``derive`` once bm25.idx's key is known, ``before_swap``
once the four files are complete and flushed (the link not yet renamed), and
``tidy`` once the generation is current.

Every step is best effort and leaves either no entry or a complete one (an
``arraycache`` entry is written under a temporary name with a ``complete``
marker and renamed into place; a killed writer's temporary is removed by the
next writer): a missing or damaged entry costs the reader a rebuild, never a
wrong answer, and never fails the publish.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.index import verified
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.index_format import FILES
from ragtui.core.search.docaware import DocLexical, doc_groups_of_rows, doclex_key
from ragtui.core.search.stemmed import STEM_KIND, StemLexical

__all__ = ["before_swap", "derive", "tidy"]


def derive(cache_dir: Path, index_id: str, bm25: BM25Index, bm25_key: str | None,
           spans: Iterable[tuple[int, int]]) -> str | None:
    """Store the document-level BM25 of the generation whose chunk index is ``bm25`` (keyed ``bm25_key``), its
    documents' rows [lo, hi) ``spans`` in index order; the entry's key, or None when nothing was stored."""
    if bm25_key is None:
        return None
    try:
        doc_of_row = doc_groups_of_rows(list(spans), bm25.n_docs)
        lex = DocLexical.build(bm25, doc_of_row, doclex_key(bm25_key, doc_of_row))
        if not lex.store(cache_dir, index_id, tidy=False):
            return None
        if _stem_in_use(cache_dir, index_id):
            # Some reader searched the stemmed arm (bm25stem, hybrid's default arm): the next one finds it ready.
            StemLexical.load(bm25, doc_of_row, cache_dir, index_id, source_key=lex.key)
        return lex.key
    except (OSError, ValueError, MemoryError):
        return None  # the readers build it: time, not a wrong answer


def _stem_in_use(cache_dir: Path, index_id: str) -> bool:
    """Whether the cache holds a stemmed arm of ``index_id`` (a reader built one for an earlier generation)."""
    prefix = f"{STEM_KIND}-{index_id}-"
    try:
        return any(n.startswith(prefix) and ".tmp" not in n for n in os.listdir(cache_dir))
    except OSError:
        return False


def before_swap(cache_dir: Path, index_id: str, generation_dir: Path, *, ends: npt.NDArray[np.int64],
                bm25_key: str | None, doclex_key: str | None) -> None:
    """What runs once the generation in ``generation_dir`` is complete and flushed, just before it becomes current.

    Must not raise (``NewGeneration.commit``).
    """
    paths = [generation_dir / name for name in FILES]
    # IVF lists: warming the IVF cache for this generation belongs here, before the generation is current.
    verified.record(cache_dir, index_id, paths, ends=ends, bm25_key=bm25_key, doclex_key=doclex_key)


def tidy(cache_dir: Path, index_id: str) -> None:
    """Once the new generation is current: keep only the two newest entries of each kind (best effort)."""
    BM25Index.evict(cache_dir, index_id)
    DocLexical.evict(cache_dir, index_id)
