"""bm25.idx (TLBM version 1): the format's layout, decode, and score.

Decoding happens once, at load, with numpy; the query path is then a gather
and a sum over precomputed per-posting weights, with no varint work per query.
Building and encoding a bm25.idx (whole or spliced) is ``bm25_write``.

``BM25Index`` is immutable after construction and safe to share between
threads.

Over 500 lines on purpose: decoding, the per-posting weights, the cached
arrays and their soundness check, and scoring all read the same arrays of
one class; every reader relies on their invariants (sizes, order, dtypes),
which are easiest to keep when they are written down in one place.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import IndexFormatError, UsageError
from ragtui.core.index import leb128
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import BuildLock, StreamedEntry, evict, load_entry, store_arrays
from ragtui.core.index.bm25_prune import (
    PruneArrays,
    SearchStats,
    exhaustive_top_k,
    prune_arrays,
    query_key,
    term_keys,
    top_k_terms,
)

if TYPE_CHECKING:
    import mmap

__all__ = [
    "B_RANGE", "K1_RANGE", "BM25Index", "MAGIC", "Postings", "VERSION", "bm25_params_problem", "check_bm25_params",
]

MAGIC = b"TLBM"
VERSION = 1
_HEADER = struct.Struct("<4sIIId")
"""magic, version, n_docs, n_terms, avgdl."""
DOC_LEN_BYTES = 4
"""Each chunk's length (u32) follows the header."""
TERM_LEN_BYTES = 2
"""A term entry starts with the length of the term's UTF-8 (u16), then the term;"""
DF_BYTES = POSTINGS_LEN_BYTES = 4
"""then its df (u32) and the length of its postings in bytes (u32), then the postings."""
ENTRY_FIXED = TERM_LEN_BYTES + DF_BYTES + POSTINGS_LEN_BYTES
"""The bytes of a term entry besides the term and its postings."""

DECODE_PIECE = 1 << 18
"""Postings ``BM25Index.decode`` decodes at a time (a piece of whole terms): its temporaries stay a few tens of MB
(about 40 bytes a posting), except for a term with more postings, which is a piece of its own."""
DECODE_PIECE_BYTES = 1 << 20
"""Bytes of postings a decoded piece holds at most (besides a term larger than that on its own)."""


K1_RANGE = (0.0, 100.0)
"""k1 (term-frequency saturation) may be 0 to 100; the usual values are 0.9 to 2."""
B_RANGE = (0.0, 1.0)
"""b (length normalization) may be 0 (none) to 1 (full)."""


def bm25_params_problem(k1: object, b: object) -> str | None:
    """What is wrong with ``k1`` and ``b`` (a sentence), or None when both are numbers in their ranges.

    Outside the ranges the weights stop meaning anything: a negative k1
    divides by zero or turns scores negative, a huge one overflows to inf.
    """
    for name, value, (lo, hi) in (("k1", k1, K1_RANGE), ("b", b, B_RANGE)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"BM25 {name} must be a finite number from {lo:g} to {hi:g} (got {value!r})"
        if not lo <= value <= hi:
            return f"BM25 {name} must be from {lo:g} to {hi:g} (got {value!r})"
    return None


def check_bm25_params(k1: object, b: object) -> None:
    """Raise ``UsageError`` unless ``k1`` is in ``K1_RANGE`` and ``b`` in ``B_RANGE``."""
    problem = bm25_params_problem(k1, b)
    if problem:
        raise UsageError(problem)


@dataclass(frozen=True, eq=False)
class Postings:
    """The content of a bm25.idx before encoding: terms, per-chunk lengths and postings.

    ``term_blob``/``term_starts`` hold the terms in ascending UTF-8 byte
    order; the postings of term t are ``[offsets[t], offsets[t+1])`` in
    ascending chunk order.
    """

    doc_len: np.ndarray
    term_blob: np.ndarray
    term_starts: np.ndarray
    offsets: np.ndarray
    post_doc: np.ndarray
    post_tf: np.ndarray
    dropped: np.ndarray | None = None
    """After ``splice_postings``: the old posting numbers not carried over, ascending (the rest are, in order)."""
    inserted: np.ndarray | None = None
    """After ``splice_postings``: the positions of the postings that are new (the rest are carried over)."""

    @property
    def n_docs(self) -> int:
        return int(self.doc_len.size)

    @property
    def df(self) -> np.ndarray:
        return np.diff(self.offsets)


def _bisect(blob: np.ndarray, starts: np.ndarray, key: bytes) -> tuple[int, int]:
    """(the number of ``key`` among the sorted terms or -1, how many terms sort before it)."""
    lo, hi = 0, starts.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        here = bytes(blob[starts[mid] : starts[mid + 1]])
        if here < key:
            lo = mid + 1
        elif here > key:
            hi = mid
        else:
            return mid, mid
    return -1, lo


@dataclass(frozen=True, eq=False)
class BM25Index:
    """A decoded bm25.idx with per-posting weights precomputed for k1 and b.

    The term dictionary stays as one UTF-8 blob with offsets (no per-term
    Python objects), searched by bisection, so loading it costs no more than
    reading it.
    """

    n_docs: int
    avgdl: float
    k1: float
    b: float
    doc_len: np.ndarray
    """u32 terms per chunk."""
    term_blob: np.ndarray
    """uint8: every term's UTF-8 bytes, concatenated in ascending order."""
    term_starts: np.ndarray
    """int64: term t is term_blob[term_starts[t]:term_starts[t+1]]."""
    df: np.ndarray
    offsets: np.ndarray
    """int64: the postings of term t are [offsets[t], offsets[t+1])."""
    post_doc: np.ndarray
    post_tf: np.ndarray
    weights: np.ndarray
    """float64 per posting: idf(t) * tf*(k1+1) / (tf + k1*(1-b+b*doc_len/avgdl))."""
    term_key: np.ndarray
    """uint64 per term: its first 8 UTF-8 bytes, big-endian, zero-padded (``bm25_prune.term_keys``):
    sorted like the terms, so one ``searchsorted`` finds a query's terms."""

    @property
    def n_terms(self) -> int:
        return int(self.df.size)

    def term(self, t: int) -> str:
        """The text of term number ``t``."""
        return bytes(self.term_blob[self.term_starts[t] : self.term_starts[t + 1]]).decode("utf-8")

    def lookup(self, term: str) -> int:
        """The number of ``term`` in the dictionary, or -1."""
        return self.lookup_many([term.encode("utf-8")])[0]

    def terms_before(self, key: bytes) -> int:
        """How many dictionary terms sort before the UTF-8 bytes ``key`` (a prefix's range starts there)."""
        return _bisect(self.term_blob, self.term_starts, key)[1]

    def lookup_many(self, raws: list[bytes]) -> list[int]:
        """The number of each UTF-8 term of ``raws`` in the dictionary, or -1.

        One ``searchsorted`` over the terms' 8-byte keys narrows each term to
        the few terms sharing its first 8 bytes (usually one); only those are
        compared, so a query costs no Python-level bisection of the dictionary.
        """
        found: list[int] = self.locate_many(raws)[0].tolist()
        return found

    def locate_many(self, raws: Sequence[bytes]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """For each UTF-8 term of ``raws``: its number in the dictionary or -1, and how many terms sort before it.

        ``lookup_many``'s narrowing by 8-byte keys: a term whose key no dictionary term shares needs no
        comparison at all (the terms before it are those with a smaller key).
        """
        found = np.full(len(raws), -1, dtype=np.int64)
        if not raws:
            return found, np.zeros(0, dtype=np.int64)
        keys = np.array([query_key(r) for r in raws], dtype=np.uint64)
        tk = np.asarray(self.term_key)
        lo = np.searchsorted(tk, keys, side="left")
        hi = np.searchsorted(tk, keys, side="right")
        before = lo.astype(np.int64)
        # Plain views of the maps: a memmap's indexing makes an object per slice.
        blob, starts = np.asarray(self.term_blob), np.asarray(self.term_starts)
        at = np.minimum(lo, starts.size - 2)
        first = starts[at].tolist()
        size = (starts[at + 1] - starts[at]).tolist()
        for i, (raw, t, n, a, length) in enumerate(zip(raws, lo.tolist(), (hi - lo).tolist(), first, size)):
            if n == 1:
                # Same key and same length up to 8 bytes: the same term, no bytes to compare.
                here = raw if length <= 8 and length == len(raw) else bytes(blob[a : a + length])
                if here == raw:
                    found[i] = t
                elif here < raw:
                    before[i] = t + 1
            elif n > 1:
                j, k = _bisect(blob, starts[t : t + n + 1], raw)
                found[i] = t + j if j >= 0 else -1
                before[i] = t + k
        return found, before

    def to_arrays(self) -> dict[str, np.ndarray]:
        scalars = np.array([self.n_docs, self.avgdl, self.k1, self.b], dtype=np.float64)
        arrays = {name: getattr(self, name) for name in _ARRAYS}
        return {"scalars": scalars, **arrays}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BM25Index:
        n_docs, avgdl, k1, b = (float(x) for x in arrays["scalars"])
        if "term_key" not in arrays:  # derived: an entry that lost it still loads
            arrays = {**arrays, "term_key": term_keys(arrays["term_blob"], arrays["term_starts"])}
        return cls(int(n_docs), avgdl, k1, b, **{name: arrays[name] for name in _ARRAYS})

    def describes(self, data: bytes | memoryview | mmap.mmap) -> bool:
        """Whether bm25.idx bytes ``data`` have this index's header and doc_len (a cheap check, not a decoding)."""
        n = self.n_docs
        if len(data) < _HEADER.size + 4 * n:
            return False
        magic, version, n_docs, n_terms, avgdl = _HEADER.unpack_from(data, 0)
        if (magic, version, n_docs, n_terms) != (MAGIC, VERSION, n, self.n_terms) or avgdl != self.avgdl:
            return False
        return bool(np.array_equal(np.frombuffer(data, dtype="<u4", count=n, offset=_HEADER.size), self.doc_len))

    def blocks(self) -> PruneArrays:
        """The block entries of the pruned search, built now if they are not yet (memory only the pruned path
        pays)."""
        got: PruneArrays | None = self.__dict__.get("_blocks")
        if got is None:
            with _BLOCKS_LOCK:
                got = self.__dict__.get("_blocks")
                if got is None:
                    got = prune_arrays(self.offsets, self.post_doc, self.weights)
                    object.__setattr__(self, "_blocks", got)
        return got

    def blocks_if_built(self, scoring: int) -> PruneArrays | None:
        """The block entries if they are built; else None, and the search scores its ``scoring`` postings whole.

        Building the entries reads every posting of the index (at 100k chunks, seconds of a fresh process whose
        one query scores 86k postings in milliseconds), so a search does not wait for them: the postings the
        searches scored whole are counted, and once they reach the index's postings (what the build reads) the
        entries are built in a thread of their own, for the searches after it. A process that answers a few
        queries never pays for them; one that answers many pays once, no more than it already spent without
        them (the rent-or-buy rule). Either path gives the same result.
        """
        got: PruneArrays | None = self.__dict__.get("_blocks")
        if got is not None:
            return got
        with _BLOCKS_LOCK:
            scored = self.__dict__.get("_scored_whole", 0) + scoring
            object.__setattr__(self, "_scored_whole", scored)
            if scored >= int(self.offsets[-1]) and "_blocks_thread" not in self.__dict__:
                thread = threading.Thread(target=self._build_blocks, name="ragtui-bm25-blocks", daemon=True)
                object.__setattr__(self, "_blocks_thread", thread)
                thread.start()
        return None

    def _build_blocks(self) -> None:
        try:
            self.blocks()
        except MemoryError:
            pass  # the searches go on scoring every posting: slower, the same results

    def wait_blocks(self) -> None:
        """Return once a build of the block entries that ``blocks_if_built`` started has ended."""
        thread = self.__dict__.get("_blocks_thread")
        if thread is not None:
            thread.join()

    @classmethod
    def from_postings(cls, p: Postings, k1: float, b: float) -> BM25Index:
        """The index ``encode_postings(p)`` decodes to, without encoding or decoding."""
        check_bm25_params(k1, b)
        n_docs = p.n_docs
        avgdl = float(p.doc_len.mean(dtype=np.float64)) if n_docs else 0.0
        df = np.diff(p.offsets)
        # Any integer dtype is taken as it is (a splice's tfs are already uint32): no copy to widen and narrow back.
        post_doc = np.asarray(p.post_doc)
        post_tf = np.asarray(p.post_tf)
        doc_len = np.asarray(p.doc_len, dtype=np.uint32)
        weights = _weights(df, p.offsets, post_doc, post_tf, doc_len, avgdl, n_docs, k1, b)
        blob = np.asarray(p.term_blob, dtype=np.uint8)
        starts = np.asarray(p.term_starts, dtype=np.int64)
        offsets = np.asarray(p.offsets, dtype=np.int64)
        return cls(n_docs, avgdl, k1, b, doc_len, blob, starts, df, offsets, post_doc.astype(np.uint32, copy=False),
                   post_tf.astype(np.uint32, copy=False), weights, term_keys(blob, starts))

    @staticmethod
    def cache_key(data: bytes | memoryview | mmap.mmap, k1: float, b: float) -> str:
        return BM25Index.cache_key_of(hashlib.sha256(data), k1, b)

    @staticmethod
    def cache_key_of(digest: hashlib._Hash, k1: float, b: float) -> str:
        """``cache_key`` from a SHA-256 fed the file's bytes (a writer hashes them as it writes them)."""
        digest.update(struct.pack("<dd", k1, b))
        # "k": the entry also holds term_key (an entry of an older ragtui lacks it).
        return f"v{VERSION}k-" + digest.hexdigest()[:40]

    @classmethod
    def placed(cls, entry: StreamedEntry, key: str, p: Postings, k1: float, b: float, cache_dir: Path,
               name: str = "index") -> BM25Index:
        """The arrays ``stream_arrays`` wrote into ``entry``, named as the readers' entry of ``key`` and mapped from
        it; made from ``p`` in memory only when the entry could not be written or read back."""
        try:
            if entry.place(key):
                found = load_entry(cache_dir, "bm25", name, key)
                if found is not None and _sound(found, k1, b):
                    return cls.from_arrays(found)
        finally:
            entry.discard()
        return cls.from_postings(p, k1, b)

    @staticmethod
    def stream_arrays(p: Postings, k1: float, b: float, entry: StreamedEntry, block: int = 1 << 20) -> None:
        """Write into ``entry`` the arrays of ``from_postings(p, k1, b).to_arrays()``, the same bytes, ``block``
        postings at a time: what is held beyond ``p`` is one block's widened tfs and weights, not 12 bytes a posting."""
        check_bm25_params(k1, b)
        n_docs = p.n_docs
        avgdl = float(p.doc_len.mean(dtype=np.float64)) if n_docs else 0.0
        offsets = np.asarray(p.offsets, dtype=np.int64)
        df = np.diff(p.offsets)
        post_doc, post_tf = np.asarray(p.post_doc), np.asarray(p.post_tf)
        doc_len = np.asarray(p.doc_len, dtype=np.uint32)
        blob = np.asarray(p.term_blob, dtype=np.uint8)
        starts = np.asarray(p.term_starts, dtype=np.int64)
        n = int(post_doc.size)

        def pieces(a: np.ndarray) -> Iterator[np.ndarray]:
            return (a[lo : lo + block] for lo in range(0, n, block))

        scalars = np.array([n_docs, avgdl, k1, b], dtype=np.float64)
        for name, whole in (("scalars", scalars), ("doc_len", doc_len), ("term_blob", blob), ("term_starts", starts),
                            ("df", df), ("offsets", offsets)):
            entry.add(name, whole.dtype, whole.size, [whole])
        entry.add("post_doc", np.uint32, n, pieces(post_doc))
        entry.add("post_tf", np.uint32, n, pieces(post_tf))
        entry.add("weights", np.float64, n, weight_blocks(df, offsets, post_doc, post_tf, doc_len, avgdl, n_docs, k1, b))
        keys = term_keys(blob, starts)
        entry.add("term_key", keys.dtype, keys.size, [keys])

    def store(self, data: bytes | memoryview | mmap.mmap, cache_dir: Path | None, name: str = "index") -> str | None:
        """Put this index in ``cache_dir`` as the decoding of ``data``, so a reader's ``load`` finds it.

        Returns the entry's key (``cache_key``), or None without a ``cache_dir``.
        """
        if cache_dir is None:
            return None
        key = self.cache_key(data, self.k1, self.b)
        store_arrays(cache_dir, "bm25", name, key, self.to_arrays())
        return key

    @staticmethod
    def evict(cache_dir: Path | None, name: str = "index") -> None:
        """Drop all but the newest cached decodings of ``name`` (after a ``store``)."""
        if cache_dir is not None:
            evict(cache_dir, "bm25", name)

    @classmethod
    def load(
        cls,
        data: bytes | memoryview | mmap.mmap,
        k1: float,
        b: float,
        path: str = "bm25.idx",
        cache_dir: Path | None = None,
        name: str = "index",
        key: str | None = None,
    ) -> BM25Index:
        """``decode``, reusing decoded arrays from ``cache_dir`` keyed by the file's SHA-256 (and k1, b).

        ``key``: the file's ``cache_key`` as its writer recorded it (``verified``).
        The entry of that key is taken without hashing the file when it holds
        the file's header and doc_len; otherwise the file is hashed as usual.
        """
        return cls.load_keyed(data, k1, b, path, cache_dir, name, key)[0]

    @classmethod
    def load_keyed(
        cls,
        data: bytes | memoryview | mmap.mmap,
        k1: float,
        b: float,
        path: str = "bm25.idx",
        cache_dir: Path | None = None,
        name: str = "index",
        key: str | None = None,
    ) -> tuple[BM25Index, str | None]:
        """``load``, and the file's ``cache_key`` (None without a ``cache_dir``: nothing was hashed).

        The key names the file's content: structures derived from this index
        key their cache entries by it (``docaware.doclex_key``) instead of
        hashing the arrays again.
        """
        check_bm25_params(k1, b)
        if cache_dir is None:
            return cls.decode(data, k1, b, path), None
        if key is not None:
            found = load_entry(cache_dir, "bm25", name, key)
            if found is not None and _sound(found, k1, b):
                index = cls.from_arrays(found)
                if index.describes(data):
                    return index, key
        key = cls.cache_key(data, k1, b)
        return cls._cached_decode(data, k1, b, path, Path(cache_dir), name, key), key

    @classmethod
    def _cached_decode(cls, data: bytes | memoryview | mmap.mmap, k1: float, b: float, path: str, cache_dir: Path,
                       name: str, key: str) -> BM25Index:
        """The index of ``data`` mapped from the cache entry of ``key``, decoded into that entry first when it is
        missing (``decode_into``: a piece at a time, never the whole index in memory). A reader that finds another
        decoding the same name waits for it (``decode_lock``), then looks again. Decoded in memory only when the
        entry cannot be written or read back."""
        found = load_entry(cache_dir, "bm25", name, key)
        if found is not None and _sound(found, k1, b):
            return cls.from_arrays(found)
        with BuildLock.wait(cache_dir, decode_lock(name)):
            found = load_entry(cache_dir, "bm25", name, key)  # whoever held the lock may have placed it
            if found is not None:
                if _sound(found, k1, b):
                    return cls.from_arrays(found)
                # Damaged but readable (a file of the entry lost or cut short): drop it and decode anew.
                shutil.rmtree(cache_dir / f"bm25-{name}-{key}", ignore_errors=True)
            entry = StreamedEntry(cache_dir, "bm25", name, tag=f"decoded{threading.get_ident()}")
            try:
                if entry.ok:
                    cls.decode_into(data, k1, b, entry, path)
                    if entry.place(key):
                        found = load_entry(cache_dir, "bm25", name, key)
                        if found is not None and _sound(found, k1, b):
                            evict(cache_dir, "bm25", name)
                            return cls.from_arrays(found)
            finally:
                entry.discard()
        return cls.decode(data, k1, b, path)

    @classmethod
    def decode(cls, data: bytes | memoryview | mmap.mmap, k1: float, b: float, path: str = "bm25.idx",
               piece: int = DECODE_PIECE, piece_bytes: int = DECODE_PIECE_BYTES) -> BM25Index:
        """Decode and validate bm25.idx bytes; raise ``IndexFormatError`` naming ``path``.

        ``k1`` and ``b`` must lie in ``K1_RANGE`` and ``B_RANGE`` (else ``UsageError``). The postings are
        decoded a piece of whole terms at a time (``piece`` postings, ``piece_bytes`` bytes of postings; a term
        larger than that is a piece of its own) into arrays of their final size: what is held beyond the
        result is the dictionary and one piece's temporaries. ``data`` is read where it is (a map stays a map).
        """
        check_bm25_params(k1, b)
        head = _read_head(data, path)
        total = int(head.offsets[-1])
        pieces = _decoded_pieces(head, piece, piece_bytes)
        if total > head.postings_bytes // 2:
            # A posting takes at least two bytes: such a file cannot be sound, so nothing of ``total``'s size is
            # allocated; the pieces find what is wrong (the ``bad`` below is never reached).
            for _ in pieces:
                pass
            raise head.bad("postings count disagrees with the df values")
        post_doc = np.empty(total, dtype=np.uint32)
        post_tf = np.empty(total, dtype=np.uint32)
        weights = np.empty(total, dtype=np.float64)
        norm = _length_norm(head.doc_len, head.avgdl, k1, b)
        for t0, t1, lo, hi, docs, tf in pieces:
            post_doc[lo:hi] = docs
            post_tf[lo:hi] = tf
            _piece_weights(head, t0, t1, lo, post_doc[lo:hi], post_tf[lo:hi], norm, k1, b, weights[lo:hi])
        return cls(
            n_docs=head.n_docs,
            avgdl=head.avgdl,
            k1=k1,
            b=b,
            doc_len=head.doc_len,
            term_blob=head.term_blob,
            term_starts=head.term_starts,
            df=head.df,
            offsets=head.offsets,
            post_doc=post_doc,
            post_tf=post_tf,
            weights=weights,
            term_key=term_keys(head.term_blob, head.term_starts),
        )

    @staticmethod
    def decode_into(data: bytes | memoryview | mmap.mmap, k1: float, b: float, entry: StreamedEntry,
                    path: str = "bm25.idx", piece: int = DECODE_PIECE, piece_bytes: int = DECODE_PIECE_BYTES) -> None:
        """Write into ``entry`` the arrays of ``decode(data, k1, b).to_arrays()``, the same bytes, a piece at a
        time: what is held is the dictionary and one piece's temporaries, never the decoded postings.

        Raises ``IndexFormatError`` like ``decode`` (only once every piece is read: a file is sound or not as a
        whole); the caller then discards ``entry``, which must not be placed.
        """
        check_bm25_params(k1, b)
        head = _read_head(data, path)
        total = int(head.offsets[-1])
        scalars = np.array([head.n_docs, head.avgdl, k1, b], dtype=np.float64)
        for name, whole in (("scalars", scalars), ("doc_len", head.doc_len), ("term_blob", head.term_blob),
                            ("term_starts", head.term_starts), ("df", head.df), ("offsets", head.offsets)):
            entry.add(name, whole.dtype, whole.size, [whole])
        sound = total <= head.postings_bytes // 2  # else ``decode``'s reasoning: the pieces will find the fault
        columns = [entry.column(col, dtype, total if sound else 0)
                   for col, dtype in (("post_doc", np.uint32), ("post_tf", np.uint32), ("weights", np.float64))]
        norm = _length_norm(head.doc_len, head.avgdl, k1, b)
        for t0, t1, lo, hi, docs, tf in _decoded_pieces(head, piece, piece_bytes):
            doc32, tf32 = docs.astype(np.uint32), tf.astype(np.uint32)
            weights = np.empty(hi - lo, dtype=np.float64)
            _piece_weights(head, t0, t1, lo, doc32, tf32, norm, k1, b, weights)
            columns[0].write(doc32)
            columns[1].write(tf32)
            columns[2].write(weights)
        if not sound:
            raise head.bad("postings count disagrees with the df values")
        for column in columns:
            column.close()
        keys = term_keys(head.term_blob, head.term_starts)
        entry.add("term_key", keys.dtype, keys.size, [keys])

    def term_ids(self, query: str) -> list[tuple[int, int]]:
        """(term number, repetitions) for the query's terms found in the dictionary, in first-seen order."""
        counts = Counter(analyze(query))
        memo: dict[str, int] = self.__dict__.setdefault("_memo", {})
        ids = [memo.get(term) for term in counts]
        if None in ids:
            missing = [term for term, t in zip(counts, ids) if t is None]
            if len(memo) + len(missing) > _MEMO_TERMS:
                memo.clear()
            looked = dict(zip(missing, self.lookup_many([term.encode("utf-8") for term in missing])))
            memo.update(looked)
            ids = [looked[term] if t is None else t for term, t in zip(counts, ids)]
        return [(t, reps) for t, reps in zip(ids, counts.values()) if t is not None and t >= 0]

    def scores(self, query: str) -> np.ndarray:
        """Dense float64 scores of every chunk (0.0 where no query term occurs)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        for t, reps in self.term_ids(query):
            lo, hi = self.offsets[t], self.offsets[t + 1]
            w = self.weights[lo:hi]
            # Within one term a chunk appears once, so fancy-index add is exact.
            out[self.post_doc[lo:hi]] += w * reps if reps != 1 else w
        return out

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k chunks by descending score, ties by ascending chunk number.

        Chunks without any query term are never returned. Returns (rows
        int64, scores float64). Exactly ``search_exhaustive``'s result (the
        same rows, order and scores), found with dynamic pruning
        (``bm25_prune``) where that pays.
        """
        return self.search_terms(self.term_ids(query), k)

    def search_terms(
        self, found: list[tuple[int, int]], k: int, stats: SearchStats | None = None, how: str = "auto"
    ) -> tuple[np.ndarray, np.ndarray]:
        """``search`` for (term number, repetitions) pairs, as ``term_ids`` gives them.

        ``stats``, when given, is filled with the postings the search read;
        ``how`` picks the path (``bm25_prune.top_k_terms``; every path gives the same result).
        """
        return top_k_terms(self.n_docs, self.offsets, self.post_doc, self.weights, self.blocks, found, k, stats, how,
                           self.blocks_if_built)

    def search_exhaustive(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``search`` by scoring every posting of every query term: the reference of the pruned path."""
        return exhaustive_top_k(self.n_docs, self.offsets, self.post_doc, self.weights, self.term_ids(query), k)


_ARRAYS = ("doc_len", "term_blob", "term_starts", "df", "offsets", "post_doc", "post_tf", "weights", "term_key")
_BLOCKS_LOCK = threading.Lock()
_MEMO_TERMS = 1 << 16
"""``term_ids`` remembers this many looked-up query terms per index (found or not), then starts over.
A dict is safe to share between threads here: a racing reader at worst looks a term up again."""


_KINDS = {"doc_len": "u", "term_blob": "u", "term_starts": "i", "df": "iu", "offsets": "i", "post_doc": "u",
          "post_tf": "iu", "weights": "f", "term_key": "u"}
"""The dtype kind each cached array has (``to_arrays``: post_doc is uint32); ``term_key`` may be missing (derived)."""


def _sound(arrays: dict[str, np.ndarray], k1: float, b: float) -> bool:
    """Whether a cache entry's arrays fit together as one decoded index (its sizes and bounds).

    The entry is keyed by the file's SHA-256, so it cannot be stale; this
    catches an entry damaged since it was written (a file missing, cut
    short, or of another shape), which would otherwise fail deep inside a
    search. It costs a look at each array's shape and ends, not a pass over
    the postings.
    """
    try:
        scalars = arrays["scalars"]
        if scalars.shape != (4,) or not np.isfinite(scalars).all() or (float(scalars[2]), float(scalars[3])) != (k1, b):
            return False
        for name, kinds in _KINDS.items():
            a = arrays.get(name)
            if a is None:
                if name == "term_key":
                    continue
                return False
            if a.ndim != 1 or a.dtype.kind not in kinds:
                return False
        n_docs, n_terms = int(scalars[0]), arrays["df"].size
        starts, offsets, n_post = arrays["term_starts"], arrays["offsets"], arrays["post_doc"].size
        return bool(
            n_docs == arrays["doc_len"].size
            and starts.size == n_terms + 1 and offsets.size == n_terms + 1
            and int(starts[0]) == 0 and int(starts[-1]) == arrays["term_blob"].size
            and int(offsets[0]) == 0 and int(offsets[-1]) == n_post
            and arrays["post_tf"].size == n_post and arrays["weights"].size == n_post
            and ("term_key" not in arrays or arrays["term_key"].size == n_terms)
        )
    except (KeyError, IndexError, ValueError, TypeError):
        return False


def decode_lock(name: str) -> str:
    """The ``BuildLock`` name under which a reader decodes bm25.idx of index ``name`` into the cache."""
    return f"bm25-{name}"


@dataclass(frozen=True, eq=False)
class _Head:
    """A bm25.idx read and checked up to its postings: the header, doc_len, the dictionary and where each term's
    postings are (``_read_head``)."""

    whole: np.ndarray
    """uint8: the file's bytes where they are (a map stays a map)."""
    bad: Callable[[str], IndexFormatError]
    n_docs: int
    avgdl: float
    doc_len: np.ndarray
    term_blob: np.ndarray
    term_starts: np.ndarray
    df: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    region_lo: npt.NDArray[np.int64]
    """The file offset of each term's postings."""
    region_hi: npt.NDArray[np.int64]

    @property
    def postings_bytes(self) -> int:
        return int((self.region_hi - self.region_lo).sum())


def _read_head(data: bytes | memoryview | mmap.mmap, path: str) -> _Head:
    """Everything of a bm25.idx but its postings, read and validated (``IndexFormatError`` naming ``path``)."""
    size = len(data)

    def bad(problem: str) -> IndexFormatError:
        return IndexFormatError(path, problem)

    if size < _HEADER.size:
        raise bad(f"truncated: {size} bytes is shorter than the 24-byte header")
    magic, version, n_docs, n_terms, avgdl = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise bad(f"unknown magic {bytes(magic)!r} (expected b'TLBM')")
    if version != VERSION:
        raise bad(f"unsupported version {version} (this reader knows version {VERSION})")
    pos = _HEADER.size
    if pos + 4 * n_docs > size:
        raise bad(f"truncated: doc_len needs {4 * n_docs} bytes, {size - pos} remain")
    doc_len = np.frombuffer(data, dtype="<u4", count=n_docs, offset=pos).astype(np.uint32)
    pos += 4 * n_docs
    if not math.isfinite(avgdl):
        raise bad(f"avgdl is {avgdl}")
    expected_avgdl = float(doc_len.mean(dtype=np.float64)) if n_docs else 0.0
    if abs(avgdl - expected_avgdl) > 1e-9 * max(1.0, expected_avgdl):
        raise bad(f"avgdl {avgdl!r} is not the mean of doc_len ({expected_avgdl!r})")
    # A term entry takes at least 10 bytes: refuse an absurd n_terms before allocating for it.
    if n_terms > (size - pos) // 10:
        raise bad(f"truncated: n_terms {n_terms} cannot fit in the {size - pos} bytes that remain")

    term_parts: list[bytes] = []
    df = np.zeros(n_terms, dtype=np.int64)
    region_lo = np.zeros(n_terms, dtype=np.int64)
    region_hi = np.zeros(n_terms, dtype=np.int64)
    prev = b""
    unpack_u16 = struct.Struct("<H").unpack_from
    unpack_ii = struct.Struct("<II").unpack_from
    for t in range(n_terms):
        if pos + 2 > size:
            raise bad(f"truncated in the entry of term #{t}")
        (term_len,) = unpack_u16(data, pos)
        pos += 2
        if pos + term_len + 8 > size:
            raise bad(f"truncated in the entry of term #{t}")
        raw = bytes(data[pos : pos + term_len])  # bytes and maps slice to bytes already; a memoryview is copied
        pos += term_len
        if t and raw <= prev:
            raise bad(f"terms out of order or repeated at term #{t} ({raw!r} after {prev!r})")
        prev = raw
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise bad(f"term #{t} is not valid UTF-8") from None
        term_df, postings_bytes = unpack_ii(data, pos)
        pos += 8
        if pos + postings_bytes > size:
            raise bad(f"truncated: postings of term {raw!r} overrun the file")
        if term_df > n_docs:
            raise bad(f"term {raw!r} has df {term_df} > n_docs {n_docs}")
        term_parts.append(raw)
        df[t] = term_df
        region_lo[t] = pos
        region_hi[t] = pos + postings_bytes
        pos += postings_bytes
    if pos != size:
        raise bad(f"{size - pos} unexpected bytes after the last term")

    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=offsets[1:])
    whole = np.frombuffer(data, dtype=np.uint8)
    lengths = region_hi - region_lo
    if n_terms:
        if np.any(lengths[df == 0] != 0):
            raise bad("a term with df 0 has postings bytes")
        nonempty = np.flatnonzero(lengths > 0)
        cut = whole[region_hi[nonempty] - 1] & 0x80  # each term's postings end with a varint's last byte
        if np.any(cut):
            raise bad(f"truncated varint at the end of the postings of term #{int(nonempty[np.flatnonzero(cut)[0]])}")
    term_starts = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([len(x) for x in term_parts], out=term_starts[1:])
    term_blob = np.frombuffer(b"".join(term_parts), dtype=np.uint8)
    return _Head(whole, bad, n_docs, avgdl, doc_len, term_blob, term_starts, df, offsets, region_lo, region_hi)


class _Fault(NamedTuple):
    rank: int
    """Its kind: its place in ``_FAULTS``."""
    problem: str


_FAULTS = ("longer than 5", "32 bits", "varints per term", "count", "tf 0", "ascending", "document range")
"""What a piece of postings can get wrong, in the order the checks run over the whole file: of several faults the
first kind is reported, and of that kind the one of the first term (of a document out of range, the largest)."""
_RANGE = _FAULTS.index("document range")


def _decoded_pieces(head: _Head, piece: int, piece_bytes: int) -> Iterator[tuple[int, int, int, int,
                                                                                 npt.NDArray[np.int64],
                                                                                 npt.NDArray[np.uint64]]]:
    """The postings of ``head``'s file, decoded and checked a piece of whole terms at a time: (first term, end
    term, first posting, end posting, chunk numbers, tfs) per piece, in order.

    Every check is the one the whole file would get at once and raises the same ``IndexFormatError``; since
    that is the first fault in the order of ``_FAULTS`` over the whole file, a fault found in a piece is held
    (and nothing more yielded) until the pieces after it are read for a fault that comes first. Then doc_len
    is compared with the term counts summed over every piece.
    """
    n_docs, df, offsets = head.n_docs, head.df, head.offsets
    n_terms = df.size
    lengths = head.region_hi - head.region_lo
    ends = np.cumsum(lengths)  # postings bytes through each term
    # Each chunk's terms counted over the postings: a sum of at most n_terms tfs below 2**32 each, exact in int64
    # below 2**31 terms (a file of over 20 GiB could have more: then the sums of each piece in float64).
    counted = np.zeros(n_docs, dtype=np.int64)
    exact = n_terms < 1 << 31
    fault: _Fault | None = None
    top = -1  # the largest chunk number of any posting, for the "document range" fault
    t0 = 0
    while t0 < n_terms and (fault is None or fault.rank > 0):
        before = int(ends[t0 - 1]) if t0 else 0
        t1 = min(int(np.searchsorted(offsets[1:], offsets[t0] + piece, side="right")),
                 int(np.searchsorted(ends, before + piece_bytes, side="right")))
        t1 = max(t1, t0 + 1)
        lo, hi = int(offsets[t0]), int(offsets[t1])
        got = _decode_piece(head, t0, t1)
        if isinstance(got, _Fault):
            if got.rank == _RANGE:
                top = max(top, int(got.problem))
            if fault is None or got.rank < fault.rank:
                fault = got
        else:
            docs, tf = got
            if docs.size:
                top = max(top, int(docs.max()))
            if fault is None:
                if exact:
                    np.add.at(counted, docs, tf.view(np.int64))  # tf < 2**32: the same bits as int64
                else:
                    counted += np.bincount(docs, weights=tf, minlength=n_docs).astype(np.int64)
                yield t0, t1, lo, hi, docs, tf
        t0 = t1
    if fault is not None:
        problem = f"a posting names document {top}, but n_docs is {n_docs}" if fault.rank == _RANGE else fault.problem
        raise head.bad(problem)
    if not np.array_equal(counted, head.doc_len.astype(np.int64)):
        raise head.bad("doc_len disagrees with the term counts in the postings")


def _decode_piece(head: _Head, t0: int, t1: int) -> _Fault | tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """The chunk numbers (int64) and tfs (uint64) of the postings of terms [t0, t1), or (the rank in
    ``_FAULTS``, the problem) of the first check they fail (the problem of a "document range" fault is the
    piece's largest chunk number)."""
    df = head.df[t0:t1]
    region_lo, region_hi = head.region_lo[t0:t1], head.region_hi[t0:t1]
    lengths = region_hi - region_lo
    first, last = int(region_lo[0]), int(region_hi[-1])
    span = head.whole[first:last]
    if t1 - t0 == 1:
        blob = span
    else:
        # The terms' postings lie in order with each next term's head between them: keep the postings' bytes.
        inside = np.zeros(span.size + 1, dtype=np.int8)
        full = lengths > 0
        inside[region_lo[full] - first] = 1
        inside[region_hi[full] - first] = -1
        np.cumsum(inside, dtype=np.int8, out=inside)
        blob = span[inside[:-1].view(np.bool_)]
    try:
        values = leb128.decode(blob)
    except leb128.VarintError as e:
        return _Fault(0 if "longer than 5" in str(e) else 1, f"bad postings: {e}")
    # Count varints per region: each region must hold exactly 2*df of them.
    value_ends = np.flatnonzero((blob & 0x80) == 0)
    per_region = np.diff(np.concatenate(([0], np.searchsorted(value_ends, np.cumsum(lengths), side="left"))))
    if not np.array_equal(per_region, 2 * df):
        i = int(np.flatnonzero(per_region != 2 * df)[0])
        return _Fault(2, f"postings of term #{t0 + i} hold {per_region[i]} varints where df {df[i]} needs"
                         f" {2 * df[i]} (they overrun postings_bytes or leave bytes over)")
    n = int(head.offsets[t1] - head.offsets[t0])
    if values.size != 2 * n:
        return _Fault(3, "postings count disagrees with the df values")
    gaps = values[0::2].astype(np.int64)
    tf = values[1::2]
    if n and int(tf.min()) < 1:
        return _Fault(4, "a posting has tf 0")
    firsts = (head.offsets[t0:t1] - head.offsets[t0])[df > 0]
    zero = gaps < 1
    zero[firsts] = False
    if np.any(zero):
        return _Fault(5, "postings are not in strictly ascending document order")
    del zero
    # Each term's chunk numbers: the running sum of its gaps.
    docs = np.cumsum(gaps)
    docs -= np.repeat(docs[firsts] - gaps[firsts], df[df > 0])
    if n and int(docs.max()) >= head.n_docs:
        return _Fault(_RANGE, str(int(docs.max())))
    return docs, tf


def _piece_weights(head: _Head, t0: int, t1: int, lo: int, post_doc: npt.NDArray[np.uint32],
                   post_tf: npt.NDArray[np.uint32], norm: npt.NDArray[np.float64], k1: float, b: float,
                   out: npt.NDArray[np.float64]) -> None:
    """``_weights`` of the postings of terms [t0, t1) (the first is posting ``lo``) into ``out``: each weight
    depends only on its posting, its term's df and its chunk's length, so the pieces' weights are the whole's."""
    offsets = head.offsets[t0 : t1 + 1] - lo
    for _ in weight_blocks(head.df[t0:t1], offsets, post_doc, post_tf, head.doc_len, head.avgdl, head.n_docs, k1, b,
                           out=out, norm=norm):
        pass


_TF_TABLE = 1 << 16
"""Up to this tf, ``_weights`` looks tf*(k1+1) up in a table."""


WEIGHT_BLOCK = 1 << 16
"""Postings whose weights ``_weights`` works out at a time: its temporaries stay in the processor's cache."""


def _weights(
    df: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    post_doc: npt.NDArray[np.int64] | npt.NDArray[np.uint32],
    post_tf: npt.NDArray[np.int64] | npt.NDArray[np.uint32],
    doc_len: npt.NDArray[np.uint32],
    avgdl: float,
    n_docs: int,
    k1: float,
    b: float,
    block: int = WEIGHT_BLOCK,
) -> npt.NDArray[np.float64]:
    """Each posting's weight: ``_weights_reference`` to the bit, in fewer passes over the postings.

    The length norm is computed once per chunk and gathered, ``tf*(k1+1)``
    once per distinct tf; the remaining operations run in place, ``block``
    postings at a time, so that each block's values stay in the cache from
    the first operation to the last instead of every operation streaming all
    postings through memory. Each value goes through the same IEEE
    operations on the same operands as in the reference (addition and
    multiplication commute exactly), so the results are identical.
    """
    out = np.empty(int(post_doc.size), dtype=np.float64)
    for _ in weight_blocks(df, offsets, post_doc, post_tf, doc_len, avgdl, n_docs, k1, b, block, out):
        pass
    return out


def weight_blocks(
    df: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    post_doc: npt.NDArray[np.int64] | npt.NDArray[np.uint32],
    post_tf: npt.NDArray[np.int64] | npt.NDArray[np.uint32] | npt.NDArray[np.uint16],
    doc_len: npt.NDArray[np.uint32],
    avgdl: float,
    n_docs: int,
    k1: float,
    b: float,
    block: int = WEIGHT_BLOCK,
    out: npt.NDArray[np.float64] | None = None,
    norm: npt.NDArray[np.float64] | None = None,
) -> Iterator[npt.NDArray[np.float64]]:
    """``_weights``, ``block`` postings at a time, in order: each block's weights are ``out``'s slice when ``out``
    is given, else a buffer that the next block reuses (a caller that keeps a block copies it). ``norm``: the
    chunks' ``_length_norm``, when the caller has it already."""
    n = int(post_doc.size)
    if n == 0:
        return
    dff = df.astype(np.float64)
    idf = np.log(1.0 + (n_docs - dff + 0.5) / (dff + 0.5))
    if norm is None:
        norm = _length_norm(doc_len, avgdl, k1, b)
    top = int(post_tf.max())
    table = np.arange(top + 1, dtype=np.float64) * (k1 + 1.0) if top <= _TF_TABLE else None  # tf * (k1 + 1)
    offsets = np.asarray(offsets, dtype=np.int64)
    w = np.empty(min(block, n), dtype=np.float64)
    own = np.empty(min(block, n), dtype=np.float64) if out is None else None
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        o = out[lo:hi] if out is not None else own[: hi - lo]  # type: ignore[index]
        t = w[: hi - lo]
        np.take(norm, post_doc[lo:hi], out=t)
        np.add(t, post_tf[lo:hi], out=t)  # tf + norm
        if table is not None:
            np.take(table, post_tf[lo:hi], out=o)
        else:  # a term repeated that often is rare (or the file is hostile): no table that large
            np.multiply(post_tf[lo:hi], k1 + 1.0, out=o)
        np.divide(o, t, out=o)
        # The idf of each posting's term: the terms this block overlaps, each for its postings inside it.
        t_lo = int(np.searchsorted(offsets, lo, side="right")) - 1
        t_hi = int(np.searchsorted(offsets, hi, side="left"))
        inside = np.clip(offsets[t_lo + 1 : t_hi + 1], lo, hi) - np.clip(offsets[t_lo:t_hi], lo, hi)
        np.multiply(o, np.repeat(idf[t_lo:t_hi], inside), out=o)
        yield o


def _length_norm(doc_len: npt.NDArray[np.uint32], avgdl: float, k1: float, b: float) -> npt.NDArray[np.float64]:
    """Each chunk's ``k1 * (1 - b + b * doc_len / avgdl)``, the weights' length norm."""
    dl = doc_len.astype(np.float64)
    norm: npt.NDArray[np.float64] = k1 * (1.0 - b + b * dl / avgdl) if avgdl > 0 else np.full_like(dl, k1 * (1.0 - b))
    return norm


def _weights_reference(
    df: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    post_doc: npt.NDArray[np.int64],
    post_tf: npt.NDArray[np.int64],
    doc_len: npt.NDArray[np.uint32],
    avgdl: float,
    n_docs: int,
    k1: float,
    b: float,
) -> npt.NDArray[np.float64]:
    """The BM25 weight of each posting, written as the formula reads (the plain reference of ``_weights``)."""
    if post_doc.size == 0:
        return np.zeros(0, dtype=np.float64)
    dff = df.astype(np.float64)
    idf = np.log(1.0 + (n_docs - dff + 0.5) / (dff + 0.5))
    per_posting_idf = np.repeat(idf, df)
    tf = post_tf.astype(np.float64)
    dl = doc_len.astype(np.float64)[post_doc]
    norm = k1 * (1.0 - b + b * dl / avgdl) if avgdl > 0 else np.full_like(dl, k1 * (1.0 - b))
    return per_posting_idf * (tf * (k1 + 1.0) / (tf + norm))
