"""Each document's rows in a generation, held as two flat structures rather than an entry per document.

A generation's rows belong to its documents in index order (ascending doc_id
bytes), each document's chunks one consecutive run. ``DocRows`` keeps the
doc_ids that have chunks as one sorted list and their first rows as one
array, so a look-up is a bisection, and the next generation's rows after a
save are the last ones with the few changed documents taken out and put in:
list and array operations that run in C, where a dict of every document
meant a Python step per document at every save.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["DocRows"]


class DocRows(Mapping[str, tuple[int, int]]):
    """doc_id -> its rows [lo, hi), for the documents with chunks, iterated in index order."""

    __slots__ = ("ids", "starts")

    def __init__(self, ids: list[str], starts: npt.NDArray[np.int64]) -> None:
        if starts.shape != (len(ids) + 1,):
            raise ValueError("one start per document and the row count")
        self.ids = ids
        """The doc_ids, ascending (UTF-8 byte order, which is code point order)."""
        self.starts = starts
        """int64: document i's rows are [starts[i], starts[i + 1]); the last entry is the row count."""

    @classmethod
    def of_counts(cls, ids: list[str], counts: Sequence[int] | npt.NDArray[np.int64]) -> DocRows:
        """From the doc_ids (ascending) and each one's number of chunks (every one above 0)."""
        starts = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.asarray(counts, dtype=np.int64), out=starts[1:])
        return cls(ids, starts)

    @classmethod
    def of_spans(cls, spans: Mapping[str, tuple[int, int]]) -> DocRows:
        """From any mapping doc_id -> (lo, hi) that lays the rows out in index order."""
        if isinstance(spans, DocRows):
            return spans
        ids = sorted(spans)
        return cls.of_counts(ids, [spans[d][1] - spans[d][0] for d in ids])

    @property
    def n_rows(self) -> int:
        return int(self.starts[-1])

    def sizes(self) -> npt.NDArray[np.int64]:
        """Each document's number of rows, in index order."""
        return np.diff(self.starts)

    def find(self, doc_id: str) -> int:
        """The position of ``doc_id`` among the documents, or -1."""
        i = bisect.bisect_left(self.ids, doc_id)
        return i if i < len(self.ids) and self.ids[i] == doc_id else -1

    def __getitem__(self, doc_id: str) -> tuple[int, int]:
        i = self.find(doc_id)
        if i < 0:
            raise KeyError(doc_id)
        return int(self.starts[i]), int(self.starts[i + 1])

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self.find(doc_id) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def replaced(self, gone: Iterable[str], put: Mapping[str, int]) -> DocRows:
        """These rows with the documents ``gone`` taken out and those of ``put`` (doc_id -> its number of chunks)
        put in (a document in both is replaced; one put with 0 chunks holds no rows)."""
        drop = sorted({i for i in (self.find(d) for d in itertools.chain(gone, put)) if i >= 0})
        keep = np.ones(len(self.ids), dtype=bool)
        keep[drop] = False
        ids = list(itertools.compress(self.ids, keep.tolist())) if drop else list(self.ids)
        sizes = self.sizes()[keep] if drop else self.sizes()
        added = sorted((d, n) for d, n in put.items() if n > 0)
        if added:
            at = [bisect.bisect_left(ids, d) for d, _ in added]
            for k, (d, _) in enumerate(added):
                ids.insert(at[k] + k, d)
            sizes = np.insert(sizes, at, [n for _, n in added])
        return DocRows.of_counts(ids, sizes)
