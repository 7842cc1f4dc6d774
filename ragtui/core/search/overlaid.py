"""A generation with its overlay, as a reader sees it: ``OverlaidData``, the next generation before its publish.

``ragtui watch`` writes an overlay of the current generation before it
publishes the next one (``core.index.overlay``). A ``Retriever`` whose
generation has a sound overlay reads the next generation through it:
``OverlaidData`` stands where an ``IndexData`` stands (``Retriever.data``),
its rows, records and vectors those of the next generation, and its searches
rank as an index of the next generation would (``layered.LayeredGeneration``).

What callers may rely on:

* ``overlaid`` is cheap when nothing changed: one ``lstat`` of the overlay's
  name, compared with what the view was made from. A new overlay (a later save
  of the same base) makes a new view; an unsound one is ignored, remembered by
  its identity so that it is not read again, and the generation is read alone.
* The view's ``records`` answer ``[row]``, ``len``, iteration and
  ``find(chunk_id)`` for next-generation rows; its ``vectors`` gather rows
  (``take``, ``[rows]``) without copying the base's; ``bm25`` and ``stats`` are
  the base generation's (term weights for highlighting, what its writer
  verified); ``generation`` names the base and the overlay both, so a view made
  from another overlay never passes for this one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragtui.core.index.overlay import generation_dir_of, overlay_identity, read_overlay_of

if TYPE_CHECKING:
    from ragtui.core.index.bm25 import BM25Index
    from ragtui.core.index.index_format import IndexData
    from ragtui.core.index.records import IndexMeta
    from ragtui.core.search.docaware import DocLexical
    from ragtui.core.search.ivf import IVFIndex
    from ragtui.core.search.layered import LayeredGeneration, LayeredRecords, LayeredVectors
    from ragtui.core.search.stemmed import StemLexical

__all__ = ["Ignored", "OverlaidData", "overlaid"]


@dataclass(frozen=True, eq=False)
class OverlaidData:
    """The next generation of ``base`` as its overlay describes it, read as an ``IndexData`` is."""

    base: IndexData
    overlay: str
    """The overlay's identity (``overlay.overlay_identity``) when it was read."""
    layered: LayeredGeneration
    meta: IndexMeta
    """The base's, with the next generation's chunk count."""

    @property
    def path(self) -> Path:
        return self.base.path

    @property
    def generation(self) -> str:
        return f"{self.base.generation}+{self.overlay}"

    @property
    def records(self) -> LayeredRecords:
        return self.layered.records

    @property
    def vectors(self) -> LayeredVectors:
        return self.layered.vectors

    @property
    def bm25(self) -> BM25Index:
        return self.base.bm25

    @property
    def stats(self) -> dict[str, object]:
        return self.base.stats

    @property
    def n_chunks(self) -> int:
        return self.layered.n_chunks


@dataclass(frozen=True, eq=False)
class Ignored:
    """An overlay of ``base`` that was read and found unsound (or could not be layered): not read again."""

    base: IndexData
    overlay: str
    reason: str


def overlaid(base: IndexData, known: OverlaidData | Ignored | None, *, doclex: Callable[[], DocLexical],
             stemlex: Callable[[], StemLexical], ivf: Callable[[], IVFIndex]) -> OverlaidData | Ignored | None:
    """The view of ``base`` with its overlay now: ``known`` again when the overlay is the one it was made from,
    None when ``base`` has none, ``Ignored`` when the one there is unsound. ``doclex``, ``stemlex`` and ``ivf``
    give the base's own derived structures (the retriever's), called when a search first needs them."""
    try:
        where = generation_dir_of(base)
    except ValueError:
        return None
    identity = overlay_identity(where)
    if identity is None:
        return None
    if known is not None and known.base is base and known.overlay == identity:
        return known
    # The layered search is imported here, when an overlay is there: every reader imports this module.
    from ragtui.core.search.layered import LayeredGeneration

    reasons: list[str] = []
    content = read_overlay_of(base, reasons)
    if content is None:
        return Ignored(base, identity, reasons[-1] if reasons else "unsound")
    try:
        layered = LayeredGeneration(base, content.segments, content.records, content.vectors,
                                    doclex=doclex, stemlex=stemlex, ivf=ivf)
    except ValueError as e:
        return Ignored(base, identity, str(e))
    meta = dataclasses.replace(base.meta, n_chunks=layered.n_chunks)
    return OverlaidData(base, content.identity, layered, meta)

