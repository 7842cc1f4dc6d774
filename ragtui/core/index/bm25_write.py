"""bm25.idx (TLBM version 1): build the postings of chunks and encode them.

Every field is written with array operations. The next file from the
previous one is ``bm25_splice``; reading is ``bm25``.
"""

from __future__ import annotations

import array
import itertools
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ragtui.core.index import leb128
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.bm25 import (
    _HEADER,
    DF_BYTES,
    DOC_LEN_BYTES,
    ENTRY_FIXED,
    MAGIC,
    POSTINGS_LEN_BYTES,
    TERM_LEN_BYTES,
    VERSION,
    Postings,
)

__all__ = ["BATCH", "ENCODE_STEP", "PostingsBuilder", "build_postings", "build_postings_from_texts", "encode_bm25", "encode_pieces", "encode_postings"]


def encode_bm25(doc_terms: Sequence[Sequence[str]]) -> bytes:
    """Encode the analyzed terms of each chunk (in chunk order) as bm25.idx bytes.

    The output depends only on ``doc_terms``: the same input gives the same bytes.
    """
    return encode_postings(build_postings(doc_terms))


BATCH = 16_384
"""Chunks analyzed and reduced to postings at a time by ``build_postings``: what it holds at once beyond the postings."""


def build_postings_from_texts(texts: Iterable[str], batch: int = BATCH) -> Postings:
    """The postings of chunks given as their texts (chunk i is the i-th text), analyzed ``batch`` at a time.

    Equal to ``build_postings([analyze(t) for t in texts])``, and encoded to
    the same bytes, without ever holding every chunk's terms.
    """
    return build_postings(map(analyze, texts), batch)


def build_postings(doc_terms: Iterable[Sequence[str]], batch: int = BATCH) -> Postings:
    """The postings of chunks given as their analyzed terms (chunk i is the i-th of ``doc_terms``).

    The chunks are taken ``batch`` at a time (``PostingsBuilder``), so what is
    held at once is the term dictionary, the postings and one batch's
    occurrences, never every chunk's terms.
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    builder = PostingsBuilder()
    chunks = iter(doc_terms)
    while builder.add(itertools.islice(chunks, batch)) == batch:
        pass
    return builder.finish()


class PostingsBuilder:
    """``build_postings`` fed a batch of chunks at a time (``add``), then ``finish``ed.

    Each term occurrence of a batch is numbered (a dict that hands out the
    next number to each new term, kept for all batches), and the batch's
    occurrences are at once reduced to its postings, (term number, chunk
    number, tf) in the narrowest integer types that hold them. Once every
    chunk is in, the terms are ordered and each batch's postings scattered to
    their place: a batch's postings of a term follow the previous batches'
    (they hold lower chunk numbers), so the result is in (term, chunk) order,
    the same whatever the batches were.

    With ``spill`` (a directory), each batch's postings are appended to a
    file there instead of held (a temporary file without a name, or one
    ending in ``.tmp`` unlinked at once where the system cannot make those)
    and read back one batch at a time to be scattered: what is held until
    ``finish`` is the term dictionary, each term's count so far and each
    chunk's length, not the postings. The file is gone once the builder is
    finished or ``close``d, or its process ends.
    """

    def __init__(self, spill: Path | None = None) -> None:
        self._number: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        self._lengths: list[np.ndarray] = []
        self._runs: list[_Run] = []
        self._spill_dir = spill
        self._spill: BinaryIO | None = None
        self._spilled: list[tuple[int, np.dtype]] = []
        """Per batch spilled: its number of postings and the dtype of its tfs."""
        self._df = np.zeros(0, dtype=np.int64)
        """Per term number: the postings of the batches spilled so far."""
        self.spilled_bytes = 0
        self.n_docs = 0

    def add(self, doc_terms: Iterable[Sequence[str]]) -> int:
        """Take the next chunks, given as their analyzed terms; how many there were."""
        lookup = self._number.__getitem__
        ids = array.array("i")
        doc_len = array.array("I")
        for terms in doc_terms:
            before = len(ids)
            ids.extend(map(lookup, terms))
            doc_len.append(len(ids) - before)
        if not doc_len:
            return 0
        self._lengths.append(np.array(doc_len, dtype=np.uint32))
        run = _batch_postings(np.frombuffer(ids, dtype=np.int32), self._lengths[-1], self.n_docs)
        del ids
        if self._spill_dir is None:
            self._runs.append(run)
        else:
            self._put(run)
        self.n_docs += len(doc_len)
        return len(doc_len)

    def _put(self, run: _Run) -> None:
        """Append one batch's postings to the spill file, and count them per term."""
        if self._spill is None:
            assert self._spill_dir is not None
            self._spill = tempfile.TemporaryFile(dir=self._spill_dir, prefix="postings-", suffix=".tmp")
        n_terms = len(self._number)
        if self._df.size < n_terms:
            grown = np.zeros(max(n_terms, 2 * self._df.size), dtype=np.int64)
            grown[: self._df.size] = self._df
            self._df = grown
        self._df[:n_terms] += np.bincount(run.term, minlength=n_terms)
        for part in (run.term, run.doc, run.tf):
            self._spill.write(np.ascontiguousarray(part).data)
            self.spilled_bytes += part.nbytes
        self._spilled.append((int(run.term.size), run.tf.dtype))

    def _read_back(self) -> Iterator[_Run]:
        """The batches spilled, in order, one at a time."""
        spill = self._spill
        if spill is None:
            return
        spill.flush()
        at = 0
        for n, tf_type in self._spilled:
            parts = []
            for dtype in (np.dtype(np.int32), np.dtype(np.uint32), tf_type):
                part = np.empty(n, dtype=dtype)
                if os.preadv(spill.fileno(), [part.data], at) != part.nbytes:
                    raise OSError("the spilled postings were cut short")
                at += part.nbytes
                parts.append(part)
            yield _Run(*parts)

    def close(self) -> None:
        """Drop what was added (and the spill file)."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._spilled, self._runs, self._lengths, self.n_docs = [], [], [], 0
        self._df = np.zeros(0, dtype=np.int64)

    def finish(self) -> Postings:
        """The postings of every chunk added; the builder is empty after."""
        try:
            return self._finish()
        finally:
            self.close()

    def _finish(self) -> Postings:
        runs, lengths = self._runs, self._lengths
        terms_by_id = list(self._number)
        self._number, self._runs, self._lengths = defaultdict(itertools.count().__next__), [], []
        n_terms = len(terms_by_id)
        # UTF-8 byte order equals code point order, which is Python's str order.
        order = sorted(range(n_terms), key=terms_by_id.__getitem__)
        rank = np.empty(n_terms, dtype=np.int32)
        rank[order] = np.arange(n_terms, dtype=np.int32)
        blob, starts = _blob([terms_by_id[t].encode("utf-8") for t in order])
        del terms_by_id, order

        df = np.zeros(n_terms, dtype=np.int64)
        df[rank] = self._df[:n_terms] if self._spill is not None else 0
        for run in runs:
            run.term = rank[run.term]
            df += np.bincount(run.term, minlength=n_terms)
        offsets = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=offsets[1:])
        total = int(offsets[-1])
        tf_types = [run.tf.dtype for run in runs] + [tf_type for _, tf_type in self._spilled]
        post_doc = np.empty(total, dtype=np.uint32)
        post_tf = np.empty(total, dtype=np.result_type(np.uint16, *tf_types))
        fill = offsets[:-1].copy()  # where the next posting of each term goes

        def batches() -> Iterator[_Run]:
            while runs:
                yield runs.pop(0)
            for run in self._read_back():
                run.term = rank[run.term]
                yield run

        for run in batches():
            perm = _stable_order(run.term, n_terms)
            term = run.term[perm]
            # A posting's place: after its term's postings of earlier batches and those before it in this batch.
            at = fill[term] + (np.arange(term.size, dtype=np.int64) - np.searchsorted(term, term))
            post_doc[at] = run.doc[perm]
            post_tf[at] = run.tf[perm]
            fill += np.bincount(term, minlength=n_terms)
            del run, perm, term, at
        doc_len_all = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.uint32)
        return Postings(doc_len_all, blob, starts, offsets, post_doc, post_tf)


@dataclass(eq=False)
class _Run:
    """One batch's postings, ordered by term number then chunk: term number (int32), chunk (uint32), tf."""

    term: np.ndarray
    doc: np.ndarray
    tf: np.ndarray


def _batch_postings(ids: np.ndarray, doc_len: np.ndarray, first_doc: int) -> _Run:
    """The postings of one batch's chunks from their occurrences' term numbers (in chunk order)."""
    n = max(int(doc_len.size), 1)
    key = np.repeat(np.arange(doc_len.size, dtype=np.int64), doc_len)
    key += ids.astype(np.int64) * n  # term number, then chunk within the batch
    key.sort()
    if not key.size:
        empty = np.zeros(0, dtype=np.uint32)
        return _Run(np.zeros(0, dtype=np.int32), empty, empty.astype(np.uint16))
    new = np.empty(key.size, dtype=bool)
    new[0] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    first = np.flatnonzero(new)
    del new
    tf = np.diff(first, append=key.size)
    key = key[first]
    del first
    term, doc = np.divmod(key, n)
    del key
    doc += first_doc
    tf_type = np.uint16 if int(tf.max()) <= 0xFFFF else np.uint32
    return _Run(term.astype(np.int32), doc.astype(np.uint32), tf.astype(tf_type))


def _stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for keys in [0, n_keys), by 16-bit radix passes (numpy's
    stable sort is a radix sort only for 16-bit keys, and several times faster there than a comparison sort)."""
    perm = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while n_keys > 1 << shift:
        digit = ((keys[perm] >> shift) & 0xFFFF).astype(np.uint16)
        perm = perm[np.argsort(digit, kind="stable")]
        shift += 16
    return perm


def _blob(raws: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    starts = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws)), out=starts[1:])
    return np.frombuffer(b"".join(raws), dtype=np.uint8), starts


def _scatter(out: np.ndarray, dest_start: np.ndarray, src: np.ndarray, src_start: np.ndarray) -> None:
    """Copy the runs ``src[src_start[i]:src_start[i+1]]`` to ``out[dest_start[i]:...]``, all at once."""
    lengths = np.diff(src_start)
    if src.size:
        out[np.repeat(dest_start - src_start[:-1], lengths) + np.arange(src.size)] = src


def _put_le(out: np.ndarray, pos: np.ndarray, values: np.ndarray, width: int) -> None:
    v = values.astype(np.uint64)
    for k in range(width):
        out[pos + k] = ((v >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)


def _put_entry_heads(out: np.ndarray, at: np.ndarray, p: Postings, df: np.ndarray, postings_bytes: np.ndarray) -> None:
    """Write each term's entry head (u16 length, its bytes, u32 df, u32 postings_bytes) at ``at``."""
    starts = np.asarray(p.term_starts, dtype=np.int64)
    term_len = np.diff(starts)
    _put_le(out, at, term_len, TERM_LEN_BYTES)
    _scatter(out, at + TERM_LEN_BYTES, np.asarray(p.term_blob, dtype=np.uint8), starts)
    _put_le(out, at + TERM_LEN_BYTES + term_len, df, DF_BYTES)
    _put_le(out, at + TERM_LEN_BYTES + DF_BYTES + term_len, postings_bytes, POSTINGS_LEN_BYTES)


ENCODE_STEP = 1 << 20
"""Postings encoded at a time by ``encode_postings``: its temporaries are a few dozen bytes per posting of one step."""


def encode_postings(p: Postings, step: int = ENCODE_STEP) -> bytes:
    """bm25.idx bytes for ``p``: every field written with array operations, no per-term loop.

    The postings' varints are encoded ``step`` postings at a time, so that
    what is held beyond ``p`` and the output is a byte or two per posting.
    """
    if step < 1:
        raise ValueError("step must be at least 1")
    n_docs, n_terms = p.n_docs, p.term_starts.size - 1
    offsets = np.asarray(p.offsets, dtype=np.int64)
    df = np.diff(offsets)
    post_doc = np.asarray(p.post_doc)
    tf = np.asarray(p.post_tf)
    n_post = int(post_doc.size)
    first = np.zeros(n_post, dtype=bool)  # the first posting of its term: its gap is its chunk number
    first[offsets[:-1][df > 0]] = True
    pay_start = np.empty(n_terms + 1, dtype=np.int64)  # payload bytes of term t: [pay_start[t], pay_start[t+1])
    pieces: list[np.ndarray] = []
    done = 0
    for lo in range(0, n_post, step):
        hi = min(lo + step, n_post)
        gaps = post_doc[lo:hi].astype(np.int64)
        if lo:
            gaps[0] -= int(post_doc[lo - 1])
        gaps[1:] -= post_doc[lo : hi - 1]
        opens = first[lo:hi]
        gaps[opens] = post_doc[lo:hi][opens]
        cum = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(leb128.sizes(gaps) + leb128.sizes(tf[lo:hi]), out=cum[1:])
        t_lo, t_hi = np.searchsorted(offsets, (lo, hi))
        pay_start[t_lo:t_hi] = done + cum[offsets[t_lo:t_hi] - lo]
        pieces.append(_encode_pairs(gaps, tf[lo:hi]))
        done += int(cum[-1])
    pay_start[np.searchsorted(offsets, n_post) :] = done
    payload = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
    del pieces, first

    term_len = np.diff(p.term_starts)
    if n_terms and int(term_len.max()) > 0xFFFF:
        raise ValueError("a term is longer than 65,535 bytes, which bm25.idx cannot hold")
    head_len = ENTRY_FIXED + term_len
    entry = head_len + np.diff(pay_start)
    head = _HEADER.size + DOC_LEN_BYTES * n_docs
    at = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(entry, out=at[1:])
    at += head
    out = np.empty(int(at[-1]), dtype=np.uint8)
    avgdl = float(p.doc_len.mean(dtype=np.float64)) if n_docs else 0.0
    out[: _HEADER.size] = np.frombuffer(_HEADER.pack(MAGIC, VERSION, n_docs, n_terms, avgdl), dtype=np.uint8)
    out[_HEADER.size : head] = np.frombuffer(np.asarray(p.doc_len, dtype="<u4").tobytes(), dtype=np.uint8)
    starts = at[:-1]
    _put_entry_heads(out, starts, p, df, np.diff(pay_start))
    # The payload fills every byte after the file header that no entry head takes, in order.
    is_payload = np.ones(out.size - head, dtype=bool)
    head_bytes = int(head_len.sum())
    is_payload[np.repeat(starts - head - np.cumsum(head_len) + head_len, head_len) + np.arange(head_bytes)] = False
    out[head:][is_payload] = payload
    return out.tobytes()


def encode_pieces(p: Postings, step: int = ENCODE_STEP) -> Iterator[bytes]:
    """``encode_postings(p, step)`` in pieces that follow each other: the file header and chunk lengths, then the
    terms' entries about ``step`` postings at a time (a term with more is a piece of its own).

    What is held at once beyond ``p`` is one piece and its temporaries, not the whole file.
    """
    if step < 1:
        raise ValueError("step must be at least 1")
    n_docs, n_terms = p.n_docs, p.term_starts.size - 1
    doc_len = np.asarray(p.doc_len)
    avgdl = float(doc_len.mean(dtype=np.float64)) if n_docs else 0.0
    yield _HEADER.pack(MAGIC, VERSION, n_docs, n_terms, avgdl) + np.asarray(doc_len, dtype="<u4").tobytes()
    offsets = np.asarray(p.offsets, dtype=np.int64)
    starts = np.asarray(p.term_starts, dtype=np.int64)
    empty = np.zeros(0, dtype=np.uint32)
    t_lo = 0
    while t_lo < n_terms:
        # The terms whose postings end within step of this piece's first posting, at least one.
        t_hi = max(t_lo + 1, int(np.searchsorted(offsets, offsets[t_lo] + step, side="right")) - 1)
        t_hi = min(t_hi, n_terms)
        lo, hi = int(offsets[t_lo]), int(offsets[t_hi])
        part = Postings(empty, p.term_blob[starts[t_lo] : starts[t_hi]], starts[t_lo : t_hi + 1] - starts[t_lo],
                        offsets[t_lo : t_hi + 1] - lo, p.post_doc[lo:hi], p.post_tf[lo:hi])
        # A file of no chunks holding these terms: its entries are the whole file's, after a header of its own.
        yield encode_postings(part, step)[_HEADER.size :]
        t_lo = t_hi


def _encode_pairs(gaps: np.ndarray, tf: np.ndarray) -> np.ndarray:
    """The postings' varints, (gap, tf) after (gap, tf), as uint8."""
    pairs = np.empty(2 * gaps.size, dtype=np.int64)
    pairs[0::2] = gaps
    pairs[1::2] = tf
    return np.frombuffer(leb128.encode(pairs), dtype=np.uint8)


def _gaps(post_doc: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each posting's gap: its document number minus the previous one in the same term (the first: itself)."""
    gaps = post_doc.copy()
    if gaps.size:
        gaps[1:] -= post_doc[:-1]
        df = np.diff(offsets)
        firsts = offsets[:-1][df > 0]
        gaps[firsts] = post_doc[firsts]
    return gaps
