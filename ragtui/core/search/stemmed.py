"""A stemmed lexical arm derived from bm25.idx: the Snowball English stemmer over the analyzer's terms.

bm25.idx fixes the analyzer (spec/index-format.md): "mutations" and
"mutation" are two terms. ``StemLexical`` maps every term of the index's
dictionary through the Snowball English stemmer (PyStemmer), merges the
postings of the terms that share a stem (tf summed per chunk; a chunk's
length is unchanged, since every token still counts once), and scores the
merged postings with BM25 at their own k1 and b, per chunk and per document
as ``DocLexical`` does. Queries go through the same analyzer and stemmer.
A chunk's ``bm25stem`` score is::

    score(chunk) = bm25stem_doc(document of chunk) + chunk_weight * bm25stem(chunk)

(0 for a chunk without a stemmed query term of its own), exactly bm25doc's
formula over stemmed terms.

What callers may rely on: the arrays are derived only from the chunk
postings of one generation and the chunks' documents; nothing in the index
directory is read besides what ``IndexData`` holds, nothing is written there;
the cache entry (``arraycache``, kind ``stem``) is keyed by the stemmer, the
parameters and the key of the generation's document-level BM25
(``docaware.doclex_key``, itself made of bm25.idx's SHA-256 and the rows'
documents), so a fresh process finds it without hashing any array; without
that key, by the SHA-256 of every array the arm is built from. A term
whose stem would not analyze back to itself keeps its own form, so the
stemmed dictionary is a dictionary of analyzer terms. ``bm25`` and
``bm25doc`` are untouched.

Readers and writers make the entry with ``StemLexical.build_into``: the
dictionary is stemmed first, then the postings are merged a block of whole
stems at a time and appended to the entry's files, so the build holds the
stemmed dictionary and one block, whatever the number of postings; the bytes
are those of the whole build (``StemLexical.build``, ``stem_postings``: the
plain reference, and the arm of a process without a writable cache).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import shutil
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import BuildLock, StreamedEntry, drop_pages, evict, load_entry
from ragtui.core.index.bm25 import BM25Index, Postings, check_bm25_params, weight_blocks
from ragtui.core.index.bm25_prune import term_keys
from ragtui.core.index.topk import top_k
from ragtui.core.search.docaware import DocLexical, doc_lengths, doc_numbers, doc_sums, lexical_lock

__all__ = [
    "BUILD_BLOCK", "DEFAULT_STEM_B", "DEFAULT_STEM_CHUNK_WEIGHT", "DEFAULT_STEM_K1", "STEMMER", "STEM_KIND",
    "StemLexical", "stem_dictionary", "stem_terms",
]

STEM_KIND = "stem"
"""The ``arraycache`` kind of the stemmed arm's entries."""

STEMMER = "english"
"""The Snowball algorithm (PyStemmer's name for it)."""
STEM_VERSION = 1
"""Bumped when the derivation changes, so older cache entries are never read."""

# Chosen leave-one-collection-out on SciFact, Cranfield, CISI and ADI (bench/loco.py; docs/quality.md).
# SciFact train / Cranfield / CISI / ADI nDCG@10 with these: 0.6919 / 0.3657 / 0.3814 / 0.4812 (bm25: 0.6496 /
# 0.3325 / 0.3580 / 0.4044); the grid and the held-out folds are in docs/quality.md.
DEFAULT_STEM_K1 = 1.5
DEFAULT_STEM_B = 0.9
DEFAULT_STEM_CHUNK_WEIGHT = 1.0

BUILD_BLOCK = 1 << 20
"""Chunk postings ``StemLexical.build_into`` merges per stem at a time (whole stems)."""
_DICTIONARY_BATCH = 1 << 14
"""Terms ``stem_dictionary`` holds as Python strings at a time."""

_LOCAL = threading.local()
_ASCII_TERM = re.compile(r"[a-z0-9_]+")
_MEMO_TERMS = 1 << 16


def _stemmer() -> object:
    """One PyStemmer object per thread (a Stemmer is not safe to share between threads)."""
    got = getattr(_LOCAL, "stemmer", None)
    if got is None:
        import Stemmer

        # No cache of PyStemmer's own: the dictionary is stemmed once (where its cache costs 5x), and
        # query terms have StemLexical's memo.
        got = _LOCAL.stemmer = Stemmer.Stemmer(STEMMER, 0)
    return got


def stem_terms(terms: list[str]) -> list[str]:
    """The stem of each analyzer term; a term whose stem is not one analyzer term stays as it is."""
    stems: list[str] = _stemmer().stemWords(terms)  # type: ignore[attr-defined]
    # A lowercase ASCII run of [a-z0-9_] is one analyzer term as it is; anything else is checked.
    return [s if s == t or _ASCII_TERM.fullmatch(s) or analyze(s) == [s] else t for t, s in zip(terms, stems)]


@dataclass(frozen=True, eq=False)
class StemLexical:
    """Stemmed BM25 of one generation's chunks and of its documents, and the doc-aware chunk score."""

    chunks: BM25Index
    """BM25 over the chunks' stemmed terms (the same rows as the index's chunks)."""
    docs: DocLexical
    """BM25 over documents of the stemmed chunk postings."""

    @classmethod
    def build(cls, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], k1: float = DEFAULT_STEM_K1,
              b: float = DEFAULT_STEM_B) -> StemLexical:
        """Stem the dictionary of ``chunks``, merge the postings per stem, score them with ``k1``, ``b``."""
        stemmed = BM25Index.from_postings(stem_postings(chunks), k1, b)
        return cls(stemmed, DocLexical.build(stemmed, doc_of_row))

    @classmethod
    def load(cls, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], cache_dir: Path | None, name: str,
             k1: float = DEFAULT_STEM_K1, b: float = DEFAULT_STEM_B, source_key: str | None = None, *,
             wait: bool = True) -> StemLexical:
        """``build``, as the arrays of its cache entry in ``cache_dir`` (outside the index), memory-mapped.

        A missing or damaged entry is written by ``build_into`` (a block of postings at a time) and then mapped;
        the arm is built in memory only when the entry cannot be written (a read-only cache). The result is the
        same either way. ``source_key``: the ``docaware.doclex_key`` of ``chunks`` grouped as ``doc_of_row``
        (None: the entry is found by hashing the arrays instead). A new entry leaves the two newest of ``name``.
        ``wait``: before building, wait for the index's ``lexical_lock``, which a writer holds while it makes
        the entry (a caller that holds it passes False)."""
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        if cache_dir is not None:
            got = cls.stored(chunks, doc_of_row, cache_dir, name, k1, b, source_key, wait=wait)
            if got is not None:
                return got
        return cls.build(chunks, doc_of_row, k1, b)

    @classmethod
    def stored(cls, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], cache_dir: Path, name: str,
               k1: float = DEFAULT_STEM_K1, b: float = DEFAULT_STEM_B, source_key: str | None = None, *,
               wait: bool = True) -> StemLexical | None:
        """``load`` without its last resort: the arm mapped from its cache entry (written first when missing), or
        None when the entry cannot be written or read (a writer making entries for readers has no use for an
        arm built in memory)."""
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        key = source_cache_key(source_key, k1, b) if source_key is not None else cache_key(chunks, doc_of_row, k1, b)
        got = cls._cached(chunks, doc_of_row, cache_dir, name, key, k1, b)
        if got is not None:
            return got
        with BuildLock.wait(cache_dir, lexical_lock(name)) if wait else BuildLock(None):
            # Whoever held the lock may have stored this very entry.
            got = cls._cached(chunks, doc_of_row, cache_dir, name, key, k1, b) if wait else None
            if got is not None:
                return got
            entry = StreamedEntry(cache_dir, STEM_KIND, name)
            try:
                placed = False
                if entry.ok:
                    cls.build_into(entry, chunks, doc_of_row, k1, b)
                    # Whatever is under the key could not be used (a damaged entry): it is replaced.
                    shutil.rmtree(Path(cache_dir) / f"{STEM_KIND}-{name}-{key}", ignore_errors=True)
                    placed = entry.place(key)
            finally:
                entry.discard()
            if placed:
                evict(cache_dir, STEM_KIND, name)
                return cls._cached(chunks, doc_of_row, cache_dir, name, key, k1, b)
        return None

    @classmethod
    def _cached(cls, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], cache_dir: Path, name: str, key: str,
                k1: float, b: float) -> StemLexical | None:
        """The arm mapped from the entry under ``key``; None when there is none or it does not fit ``chunks``."""
        arrays = load_entry(cache_dir, STEM_KIND, name, key)
        if arrays is None:
            return None
        try:
            c = BM25Index.from_arrays({n[2:]: a for n, a in arrays.items() if n.startswith("c_")})
            d = BM25Index.from_arrays({n[2:]: a for n, a in arrays.items() if n.startswith("d_")})
            sound = (c.n_docs == chunks.n_docs and d.n_docs == (int(doc_of_row[-1]) + 1 if doc_of_row.size else 0)
                     and (c.k1, c.b, d.k1, d.b) == (k1, b, k1, b)
                     and c.offsets.size == c.n_terms + 1 and int(c.offsets[-1]) == c.post_doc.size == c.weights.size
                     and d.offsets.size == d.n_terms + 1 and int(d.offsets[-1]) == d.post_doc.size == d.weights.size)
        except (KeyError, ValueError, TypeError, IndexError):
            sound = False
        # An entry damaged since it was written: the arrays are derived, so the caller derives them again.
        return cls(c, DocLexical(doc_of_row, d)) if sound else None

    @classmethod
    def build_into(cls, entry: StreamedEntry, chunks: BM25Index, doc_of_row: npt.NDArray[np.int64],
                   k1: float = DEFAULT_STEM_K1, b: float = DEFAULT_STEM_B, block: int | None = None) -> None:
        """Write into ``entry`` the arrays of the cache entry of ``build(chunks, doc_of_row, k1, b)``, the same
        bytes, about ``block`` (``BUILD_BLOCK``) chunk postings at a time, whole stems: what is held beyond the
        dictionary and the per-chunk arrays is one block's temporaries, whatever the number of postings.

        The dictionary is stemmed first (``stem_dictionary``); then the postings are merged per stem in one
        pass: a block holds whole stems, so each stem's chunk and document frequencies (its idf at each level)
        are known where its postings are written. The chunk postings read from a mapped ``chunks`` (a cache
        entry) are given back to the page cache as each block is done."""
        check_bm25_params(k1, b)
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        stem_of, blob, starts = stem_dictionary(chunks)
        n_stems = int(starts.size - 1)
        doc_of = doc_numbers(doc_of_row)
        c_len = np.asarray(chunks.doc_len, dtype=np.uint32)
        d_len = doc_lengths(chunks, doc_of_row)
        levels = []
        for prefix, doc_len in (("c_", c_len), ("d_", d_len)):
            n = int(doc_len.size)
            avgdl = float(doc_len.mean(dtype=np.float64)) if n else 0.0
            columns = [entry.column(prefix + array_name, dtype) for array_name, dtype in
                       (("post_doc", np.uint32), ("post_tf", np.uint32), ("weights", np.float64))]
            levels.append((prefix, columns, doc_len, avgdl, n, np.zeros(n_stems + 1, dtype=np.int64)))
        for s_lo, s_hi, rows, tf, bounds in _merged(chunks, stem_of, n_stems, block):
            d_doc, d_tf, d_ends = doc_sums(doc_of, rows, tf, bounds)
            for (_, columns, doc_len, avgdl, n, offsets), post_doc, post_tf, local in (
                    (levels[0], rows, tf, bounds), (levels[1], d_doc, d_tf, np.concatenate(([0], d_ends)))):
                columns[0].write(post_doc)
                columns[1].write(post_tf)
                for w in weight_blocks(np.diff(local), local, post_doc, post_tf, doc_len, avgdl, n, k1, b):
                    columns[2].write(w)
                offsets[s_lo + 1 : s_hi + 1] = offsets[s_lo] + local[1:]
            del rows, tf, d_doc, d_tf, post_doc, post_tf
        keys = term_keys(blob, starts)
        for prefix, columns, doc_len, avgdl, n, offsets in levels:
            for column in columns:
                column.close()
            scalars = np.array([n, avgdl, k1, b], dtype=np.float64)
            for array_name, whole in (("scalars", scalars), ("doc_len", doc_len), ("term_blob", blob),
                                      ("term_starts", starts), ("df", np.diff(offsets)), ("offsets", offsets),
                                      ("term_key", keys)):
                entry.add(prefix + array_name, whole.dtype, whole.size, [whole])

    def query_text(self, query: str) -> str:
        """``query``'s terms stemmed, as text the analyzer splits back into exactly those stems."""
        terms = analyze(query)
        memo: dict[str, str] = self.__dict__.setdefault("_memo", {})
        missing = [t for t in dict.fromkeys(terms) if t not in memo]
        if missing:
            if len(memo) + len(missing) > _MEMO_TERMS:
                memo.clear()
            memo.update(zip(missing, stem_terms(missing)))
        return " ".join(memo[t] for t in terms)

    def chunk_scores(self, query: str, chunk_weight: float) -> npt.NDArray[np.float64]:
        """Dense stemmed doc-aware score of every chunk (0.0 for a chunk without a stemmed query term)."""
        return self.docs.chunk_scores(self.chunks, self.query_text(query), chunk_weight)

    def search(self, query: str, k: int, chunk_weight: float) -> tuple[np.ndarray, np.ndarray]:
        """Top-k chunks by stemmed doc-aware score (desc, ties by ascending row); chunks scoring 0 left out."""
        return self.docs.search(self.chunks, self.query_text(query), k, chunk_weight)

    def chunk_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k chunks by their own stemmed BM25 alone."""
        own = self.chunks.scores(self.query_text(query))
        rows = np.flatnonzero(own > 0.0)
        return top_k(own[rows], rows, k)


def stem_dictionary(chunks: BM25Index) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The stemmed dictionary of ``chunks``: (the number of each term's stem, the stems' UTF-8 bytes one after the
    other in ascending byte order, where each stem starts and the last ends). The terms are taken as Python
    strings ``_DICTIONARY_BATCH`` at a time; what is held whole is one string of each distinct stem."""
    blob = chunks.term_blob
    term_starts = np.asarray(chunks.term_starts, dtype=np.int64)
    n_terms = int(term_starts.size - 1)
    seen: dict[str, int] = {}
    met = np.empty(n_terms, dtype=np.int64)  # the number of each term's stem, in the order stems were met
    for lo in range(0, n_terms, _DICTIONARY_BATCH):
        hi = min(lo + _DICTIONARY_BATCH, n_terms)
        raw = bytes(blob[term_starts[lo] : term_starts[hi]])
        cuts = (term_starts[lo : hi + 1] - term_starts[lo]).tolist()
        terms = [raw[x:y].decode("utf-8") for x, y in itertools.pairwise(cuts)]
        met[lo:hi] = [seen.setdefault(stem, len(seen)) for stem in stem_terms(terms)]
    # Python compares str by code point, which is UTF-8 byte order: the dictionary stays sorted as bm25.idx's
    # is. (A dict and sorted, not numpy's unique over fixed-width strings: 0.02 s instead of 0.9 s at 52k terms.)
    vocab = sorted(seen)
    rank = np.empty(len(vocab), dtype=np.int64)
    rank[np.fromiter((seen[stem] for stem in vocab), dtype=np.int64, count=len(vocab))] = np.arange(len(vocab))
    del seen
    stems = np.frombuffer("".join(vocab).encode("utf-8"), dtype=np.uint8)
    starts = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(stem.encode("utf-8")) for stem in vocab), dtype=np.int64, count=len(vocab)),
              out=starts[1:])
    del vocab
    return rank[met], stems, starts


def stem_postings(chunks: BM25Index) -> Postings:
    """The postings of ``chunks`` with every term replaced by its stem (``stem_terms``), merged per chunk, all at
    once (the plain reference of ``StemLexical.build_into``'s blocks)."""
    stem_of, blob, term_starts = stem_dictionary(chunks)
    n_stems = int(term_starts.size - 1)
    df = np.diff(chunks.offsets)
    post_doc = np.asarray(chunks.post_doc, dtype=np.int64)
    post_tf = np.asarray(chunks.post_tf, dtype=np.int64)
    n = max(1, chunks.n_docs)
    key = np.repeat(stem_of, df) * n + post_doc
    if key.size > 1 and not bool(np.all(key[1:] > key[:-1])):
        order = np.argsort(key, kind="stable")
        key, post_tf = key[order], post_tf[order]
    if key.size:
        new = np.ones(key.size, dtype=bool)
        new[1:] = key[1:] != key[:-1]
        at = np.flatnonzero(new)
        tf = np.add.reduceat(post_tf, at)
        key = key[at]
    else:
        tf = post_tf
    sid, doc = np.divmod(key, n)
    offsets = np.zeros(n_stems + 1, dtype=np.int64)
    np.cumsum(np.bincount(sid, minlength=n_stems), out=offsets[1:])
    return Postings(
        doc_len=np.asarray(chunks.doc_len, dtype=np.uint32),
        term_blob=blob,
        term_starts=term_starts,
        offsets=offsets,
        post_doc=doc.astype(np.uint32),
        post_tf=tf.astype(np.uint32),
    )


def _merged(chunks: BM25Index, stem_of: npt.NDArray[np.int64], n_stems: int, block: int | None,
            ) -> Iterator[tuple[int, int, npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.int64]]]:
    """The stemmed postings of ``chunks`` (its terms' stems numbered ``stem_of``), about ``block`` chunk postings at
    a time (whole stems), in order: (first stem, stem after the last, rows, tfs summed, where
    each stem's postings start in the block and the last ends). Each stem's are ``stem_postings``'s: its terms'
    postings merged, rows ascending, a row's tfs summed."""
    block = BUILD_BLOCK if block is None else block
    offsets = np.asarray(chunks.offsets, dtype=np.int64)
    df = np.diff(offsets)
    # The terms stem by stem (each stem's in dictionary order), where each stem's terms start among them, and
    # how many chunk postings come before each stem's.
    order = np.argsort(stem_of, kind="stable")
    first_term = np.zeros(n_stems + 1, dtype=np.int64)
    np.cumsum(np.bincount(stem_of, minlength=n_stems), out=first_term[1:])
    before = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(df[order], out=before[1:])
    source = before[first_term]
    del before
    n = max(1, chunks.n_docs)
    s_lo = 0
    while s_lo < n_stems:
        s_hi = max(s_lo + 1, int(np.searchsorted(source, source[s_lo] + block, side="right")) - 1)
        s_hi = min(s_hi, n_stems)
        terms = order[first_term[s_lo] : first_term[s_hi]]
        lengths = df[terms]
        total = int(source[s_hi] - source[s_lo])
        if total == 0:
            empty = np.zeros(0, dtype=np.uint32)
            yield s_lo, s_hi, empty, empty, np.zeros(s_hi - s_lo + 1, dtype=np.int64)
            s_lo = s_hi
            continue
        # Where each posting of the block is among the chunk postings, its terms' ranges one after the other: a
        # step of 1, and at each term's first posting the jump from the last term's end to its start.
        firsts = offsets[terms]
        lo, size = firsts[lengths > 0], lengths[lengths > 0]
        at = np.ones(total, dtype=np.int64)
        at[np.cumsum(size) - size] = lo - np.concatenate(([0], lo[:-1] + size[:-1] - 1))
        np.cumsum(at, out=at)
        rows = np.asarray(chunks.post_doc[at], dtype=np.uint32)
        tf = np.asarray(chunks.post_tf[at], dtype=np.uint32)
        del at
        # Each posting's (stem within the block, row), ascending once merged.
        key = np.repeat((stem_of[terms] - s_lo).astype(np.int64), lengths)
        key *= n
        key += rows
        del rows
        if key.size > 1 and not bool(np.all(key[1:] > key[:-1])):
            # Terms of one stem: each term's rows ascend, so the sort merges runs; equal keys are one row of two terms.
            by = np.argsort(key, kind="stable")
            key = key[by]
            tf = tf[by]
            del by
            new = np.empty(key.size, dtype=bool)
            new[0] = True
            np.not_equal(key[1:], key[:-1], out=new[1:])
            if not bool(new.all()):
                starts = np.flatnonzero(new)
                tf = np.add.reduceat(tf, starts, dtype=np.uint32)  # modulo 2^32, as a sum in int64 cast is
                key = key[starts]
            del new
        bounds = np.searchsorted(key, np.arange(s_hi - s_lo + 1, dtype=np.int64) * n, side="left").astype(np.int64)
        np.remainder(key, n, out=key)
        rows = key.astype(np.uint32)
        del key
        yield s_lo, s_hi, rows, tf, bounds
        del rows, tf
        # Mapped from the cache (a reader's or the writer's case): what was read stays in the page cache, not in
        # this process. A stem's terms lie near each other in the dictionary, so a block's postings lie below
        # the end of its furthest term and a little above the last block's.
        furthest = int((firsts + lengths).max())
        drop_pages(chunks.post_doc, furthest)
        drop_pages(chunks.post_tf, furthest)
        s_lo = s_hi


def _stemmer_identity() -> str:
    import Stemmer

    return f"stem{STEM_VERSION}\0{STEMMER}\0{getattr(Stemmer, '__version__', '')}\0"


def source_cache_key(source_key: str, k1: float, b: float) -> str:
    """The entry's key from the key of what it is derived from (``docaware.doclex_key``), the stemmer and k1, b."""
    h = hashlib.sha256(f"{_stemmer_identity()}doclex\0{source_key}\0".encode())
    h.update(struct.pack("<dd", k1, b))
    return f"v{STEM_VERSION}-" + h.hexdigest()[:40]


def cache_key(chunks: BM25Index, doc_of_row: npt.NDArray[np.int64], k1: float, b: float) -> str:
    """The SHA-256 of everything the arm is derived from: the chunk postings, the documents, the parameters."""
    h = hashlib.sha256()
    h.update(_stemmer_identity().encode())
    h.update(struct.pack("<ddq", k1, b, chunks.n_docs))
    for a in (chunks.doc_len, chunks.term_blob, chunks.term_starts, chunks.offsets, chunks.post_doc, chunks.post_tf,
              doc_of_row):
        arr = np.ascontiguousarray(a)
        h.update(struct.pack("<q", arr.nbytes))
        h.update(arr.data)
    return f"v{STEM_VERSION}-" + h.hexdigest()[:40]
