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
"""

from __future__ import annotations

import hashlib
import re
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import cached_arrays
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.topk import top_k
from ragtui.core.search.docaware import DocLexical, lexical_lock

__all__ = [
    "DEFAULT_STEM_B", "DEFAULT_STEM_CHUNK_WEIGHT", "DEFAULT_STEM_K1", "STEMMER", "STEM_KIND", "StemLexical", "stem_terms",
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
        """``build``, reusing the arrays of an earlier build from ``cache_dir`` (outside the index).

        ``source_key``: the ``docaware.doclex_key`` of ``chunks`` grouped as ``doc_of_row`` (None: the
        entry is found by hashing the arrays instead). A new entry leaves the two newest of ``name``.
        ``wait``: before building, wait for a writer that is making the entry (``DocLexical.load``)."""
        doc_of_row = np.asarray(doc_of_row, dtype=np.int64)
        if cache_dir is None:
            return cls.build(chunks, doc_of_row, k1, b)

        def compute() -> dict[str, np.ndarray]:
            built = cls.build(chunks, doc_of_row, k1, b)
            out = {f"c_{n}": a for n, a in built.chunks.to_arrays().items()}
            out.update({f"d_{n}": a for n, a in built.docs.docs.to_arrays().items()})
            return out

        key = source_cache_key(source_key, k1, b) if source_key is not None else cache_key(chunks, doc_of_row, k1, b)
        arrays, _ = cached_arrays(cache_dir, STEM_KIND, name, key, compute, lock=lexical_lock(name) if wait else None)
        try:
            c = BM25Index.from_arrays({n[2:]: a for n, a in arrays.items() if n.startswith("c_")})
            d = BM25Index.from_arrays({n[2:]: a for n, a in arrays.items() if n.startswith("d_")})
            sound = (c.n_docs == chunks.n_docs and d.n_docs == (int(doc_of_row[-1]) + 1 if doc_of_row.size else 0)
                     and (c.k1, c.b, d.k1, d.b) == (k1, b, k1, b)
                     and c.offsets.size == c.n_terms + 1 and int(c.offsets[-1]) == c.post_doc.size == c.weights.size
                     and d.offsets.size == d.n_terms + 1 and int(d.offsets[-1]) == d.post_doc.size == d.weights.size)
        except (KeyError, ValueError, TypeError, IndexError):
            sound = False
        if not sound:  # an entry damaged since it was written: the arrays are derived, so derive them again
            return cls.build(chunks, doc_of_row, k1, b)
        return cls(c, DocLexical(doc_of_row, d))

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


def stem_postings(chunks: BM25Index) -> Postings:
    """The postings of ``chunks`` with every term replaced by its stem (``stem_terms``), merged per chunk."""
    n_terms = chunks.n_terms
    blob = bytes(chunks.term_blob)
    starts = chunks.term_starts.tolist()
    terms = [blob[starts[t] : starts[t + 1]].decode("utf-8") for t in range(n_terms)]
    stems = stem_terms(terms)
    # Python compares str by code point, which is UTF-8 byte order: the dictionary stays sorted as bm25.idx's
    # is. (A set and a dict here, not numpy's unique over fixed-width strings: 0.02 s instead of 0.9 s at 52k terms.)
    vocab: list[str] = sorted(set(stems))
    number = {stem: i for i, stem in enumerate(vocab)}
    stem_of = np.fromiter((number[stem] for stem in stems), dtype=np.int64, count=len(stems))
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
    offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(sid, minlength=len(vocab)), out=offsets[1:])
    raw = [s.encode("utf-8") for s in vocab]
    term_starts = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=term_starts[1:])
    return Postings(
        doc_len=np.asarray(chunks.doc_len, dtype=np.uint32),
        term_blob=np.frombuffer(b"".join(raw), dtype=np.uint8),
        term_starts=term_starts,
        offsets=offsets,
        post_doc=doc.astype(np.uint32),
        post_tf=tf.astype(np.uint32),
    )


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
