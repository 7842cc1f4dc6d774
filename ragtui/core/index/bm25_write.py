"""bm25.idx (TLBM version 1): build the postings of chunks, splice them, and encode them.

Every field is written with array operations; a splice reuses the old file's
bytes where a posting's varints did not change. Reading is ``bm25``.
"""

from __future__ import annotations

import array
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    BM25Index,
    Postings,
    _bisect,
)

if TYPE_CHECKING:
    import mmap

__all__ = [
    "BATCH", "ENCODE_STEP", "PostingBytes", "PostingsBuilder", "build_postings", "build_postings_from_texts", "encode_bm25", "encode_postings", "encode_spliced", "encode_spliced_carried",
    "posting_bytes", "splice_postings",
]


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
    """

    def __init__(self) -> None:
        self._number: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        self._lengths: list[np.ndarray] = []
        self._runs: list[_Run] = []
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
        self._runs.append(_batch_postings(np.frombuffer(ids, dtype=np.int32), self._lengths[-1], self.n_docs))
        self.n_docs += len(doc_len)
        return len(doc_len)

    def finish(self) -> Postings:
        """The postings of every chunk added; the builder is empty after."""
        runs, lengths = self._runs, self._lengths
        terms_by_id = list(self._number)
        self._number, self._runs, self._lengths, self.n_docs = defaultdict(itertools.count().__next__), [], [], 0
        n_terms = len(terms_by_id)
        # UTF-8 byte order equals code point order, which is Python's str order.
        order = sorted(range(n_terms), key=terms_by_id.__getitem__)
        rank = np.empty(n_terms, dtype=np.int32)
        rank[order] = np.arange(n_terms, dtype=np.int32)
        blob, starts = _blob([terms_by_id[t].encode("utf-8") for t in order])
        del terms_by_id, order

        df = np.zeros(n_terms, dtype=np.int64)
        for run in runs:
            run.term = rank[run.term]
            df += np.bincount(run.term, minlength=n_terms)
        offsets = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=offsets[1:])
        total = int(offsets[-1])
        post_doc = np.empty(total, dtype=np.uint32)
        post_tf = np.empty(total, dtype=np.result_type(np.uint16, *(run.tf.dtype for run in runs)))
        fill = offsets[:-1].copy()  # where the next posting of each term goes
        while runs:
            run = runs.pop(0)
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


@dataclass(frozen=True, eq=False)
class PostingBytes:
    """Per posting of one bm25.idx: its gap and the bytes its (gap, tf) varints take.

    ``encode_spliced_carried`` returns the new file's, so that the next
    splice need not work them out again from the decoded postings.
    """

    gap: np.ndarray
    """int64: the posting's document number minus the previous one in its term (the first: the number itself)."""
    size: np.ndarray
    """uint8: the length of its two varints."""


def posting_bytes(post_doc: np.ndarray, offsets: np.ndarray, post_tf: np.ndarray) -> PostingBytes:
    gap = _gaps(np.asarray(post_doc, dtype=np.int64), np.asarray(offsets, dtype=np.int64))
    return PostingBytes(gap, leb128.sizes(gap) + leb128.sizes(post_tf))


def encode_spliced(old_data: bytes | memoryview | mmap.mmap, old: BM25Index, p: Postings) -> bytes:
    """``encode_postings(p)`` for ``p`` from ``splice_postings(old, ...)``, reusing ``old_data``'s bytes.

    ``old_data`` is the bm25.idx that ``old`` was decoded from. A carried-over
    posting whose gap did not change has the same varint bytes as before, so
    those bytes are copied in bulk; only new postings, postings whose gap
    changed and the term headers are encoded. The result is byte for byte
    what ``encode_postings`` gives.
    """
    return encode_spliced_carried(old_data, old, p)[0]


def encode_spliced_carried(
    old_data: bytes | memoryview | mmap.mmap, old: BM25Index, p: Postings, old_bytes: PostingBytes | None = None
) -> tuple[bytes, PostingBytes]:
    """``encode_spliced``, taking ``old_data``'s ``PostingBytes`` when the caller has them, and giving the new file's.

    The new file is laid out as stretches of ``old_data`` and a few freshly
    encoded pieces, joined once: a term whose postings all kept their bytes
    and that lost none (a clean term) has its whole entry, header included,
    where it was, so consecutive clean terms are one stretch; in the other
    terms the header is new, and each run of postings that kept their bytes
    is a stretch too. The work on every posting is a few array passes; what
    is joined piece by piece grows with the terms a change touched.
    """
    new_offsets = np.asarray(p.offsets, dtype=np.int64)
    new_tf = np.asarray(p.post_tf)
    new = posting_bytes(p.post_doc, new_offsets, new_tf)
    if p.kept is None or p.inserted is None:
        return encode_postings(p), new
    raw = memoryview(old_data).cast("B") if not isinstance(old_data, bytes) else memoryview(old_data)
    old_offsets = np.asarray(old.offsets, dtype=np.int64)
    if old_bytes is None or old_bytes.gap.size != old.post_doc.size:
        old_bytes = posting_bytes(old.post_doc, old_offsets, old.post_tf)
    kept = np.asarray(p.kept, dtype=np.int64)
    inserted = np.asarray(p.inserted, dtype=np.int64)
    n_post, n_terms = new.gap.size, new_offsets.size - 1

    # Where each old entry, and each old posting within it, lies in old_data.
    old_cum = np.zeros(old_bytes.size.size + 1, dtype=np.int64)
    np.cumsum(old_bytes.size, dtype=np.int64, out=old_cum[1:])
    old_hdr = ENTRY_FIXED + np.diff(np.asarray(old.term_starts, dtype=np.int64))
    old_head = _HEADER.size + DOC_LEN_BYTES * old.n_docs
    old_at = np.zeros(old_hdr.size + 1, dtype=np.int64)
    np.cumsum(old_hdr + np.diff(old_cum[old_offsets]), out=old_at[1:])
    old_at += old_head
    if int(old_at[-1]) != len(raw):
        raise ValueError("old_data is not the file old was decoded from")

    def carried(pos: np.ndarray) -> np.ndarray:
        """The old posting number of the carried-over postings at new positions ``pos``."""
        return kept[pos - np.searchsorted(inserted, pos)]

    def raw_at(j: np.ndarray) -> np.ndarray:
        """Where old posting ``j``'s bytes start in old_data."""
        t = np.searchsorted(old_offsets, j, side="right") - 1
        at: np.ndarray = old_at[t] + old_hdr[t] + old_cum[j] - old_cum[old_offsets[t]]
        return at

    # Postings written anew: inserted, or carried over with another gap (tf never changes).
    is_old = np.ones(n_post, dtype=bool)
    is_old[inserted] = False
    same = np.zeros(n_post, dtype=bool)
    same[is_old] = new.gap[is_old] == old_bytes.gap[kept]
    fresh = np.flatnonzero(~same)
    # Carried postings whose old neighbour before them was dropped: their bytes are reused, but not in one stretch.
    jump_k = np.flatnonzero(np.diff(kept) != 1) + 1
    jumps = jump_k + np.searchsorted(inserted - np.arange(inserted.size), jump_k, side="right")
    breaks = np.union1d(fresh, jumps)

    # Clean terms: no posting written anew and every posting of one old term, in order.
    first, end = new_offsets[:-1], new_offsets[1:]
    dirty = np.zeros(n_terms, dtype=bool)
    dirty[np.searchsorted(new_offsets, fresh, side="right") - 1] = True
    cand = np.flatnonzero(~dirty)
    head_old = carried(first[cand])
    ot = np.searchsorted(old_offsets, head_old, side="right") - 1
    ok = (old_offsets[ot] == head_old) & (old_offsets[ot + 1] - head_old == end[cand] - first[cand])
    dirty[cand[~ok]] = True
    clean, ot = cand[ok], ot[ok]
    # Consecutive clean terms whose old entries follow each other are one stretch.
    cut = np.ones(clean.size, dtype=bool)
    cut[1:] = (np.diff(clean) != 1) | (np.diff(ot) != 1)
    c_lo = np.flatnonzero(cut)
    c_hi = np.append(c_lo[1:], clean.size)[: c_lo.size] - 1
    clean_items = (clean[c_lo], old_at[ot[c_lo]], old_at[ot[c_hi] + 1] - old_at[ot[c_lo]])

    # Dirty terms: runs of postings that kept their bytes, cut at each break and at the term's ends.
    dterms = np.flatnonzero(dirty)
    term_of_break = np.searchsorted(new_offsets, breaks, side="right") - 1
    starts = np.concatenate((first[dterms], breaks[same[breaks]], fresh + 1))
    s_term = np.concatenate((dterms, term_of_break[same[breaks]], np.searchsorted(new_offsets, fresh, side="right") - 1))
    inside = starts < end[s_term]
    starts, s_term = starts[inside], s_term[inside]
    starts = np.unique(starts[same[starts] & dirty[s_term]])
    s_term = np.searchsorted(new_offsets, starts, side="right") - 1
    nxt = np.searchsorted(breaks, starts, side="right")
    stop = np.minimum(np.append(breaks, n_post)[nxt], end[s_term])
    j0 = carried(starts)
    run_at = raw_at(j0)
    run_len = old_cum[j0 + (stop - starts)] - old_cum[j0]

    # The fresh bytes: each dirty term's header, and each posting written anew.
    d_index = np.searchsorted(dterms, s_term)
    post_bytes = np.zeros(dterms.size, dtype=np.int64)
    np.add.at(post_bytes, d_index, run_len)
    f_term = np.searchsorted(new_offsets, fresh, side="right") - 1
    f_len = new.size[fresh].astype(np.int64)
    np.add.at(post_bytes, np.searchsorted(dterms, f_term), f_len)
    term_starts = np.asarray(p.term_starts, dtype=np.int64)
    t_len = term_starts[dterms + 1] - term_starts[dterms]
    if dterms.size and int(t_len.max()) > 0xFFFF:
        raise ValueError("a term is longer than 65,535 bytes, which bm25.idx cannot hold")
    h_len = ENTRY_FIXED + t_len
    h_at = np.zeros(dterms.size + 1, dtype=np.int64)
    np.cumsum(h_len, out=h_at[1:])
    headers = np.empty(int(h_at[-1]), dtype=np.uint8)
    _put_le(headers, h_at[:-1], t_len, TERM_LEN_BYTES)
    blob = np.asarray(p.term_blob, dtype=np.uint8)
    within = np.arange(int(t_len.sum()), dtype=np.int64) - np.repeat(h_at[:-1] - np.arange(dterms.size) * ENTRY_FIXED, t_len)
    headers[np.repeat(h_at[:-1] + TERM_LEN_BYTES, t_len) + within] = blob[np.repeat(term_starts[dterms], t_len) + within]
    _put_le(headers, h_at[:-1] + TERM_LEN_BYTES + t_len, end[dterms] - first[dterms], DF_BYTES)
    _put_le(headers, h_at[:-1] + TERM_LEN_BYTES + DF_BYTES + t_len, post_bytes, POSTINGS_LEN_BYTES)
    fresh_bytes = _encode_pairs(new.gap[fresh], new_tf[fresh])
    fresh = fresh.astype(np.int64)
    fresh_src = np.zeros(fresh.size + 1, dtype=np.int64)
    np.cumsum(f_len, out=fresh_src[1:])
    fresh_mv = memoryview(np.concatenate((headers, fresh_bytes)).tobytes())

    # Every piece in stream order: a term's header (or clean entry) at first[t] + t, posting i at i + term + 1.
    key = np.concatenate((first[clean_items[0]] + clean_items[0], first[dterms] + dterms, starts + s_term + 1, fresh + f_term + 1))
    src = np.concatenate((clean_items[1], h_at[:-1], run_at, headers.size + fresh_src[:-1]))
    length = np.concatenate((clean_items[2], h_len, run_len, f_len))
    from_old = np.concatenate((np.ones(clean_items[0].size, dtype=bool), np.zeros(dterms.size, dtype=bool),
                               np.ones(starts.size, dtype=bool), np.zeros(fresh.size, dtype=bool)))
    order = np.argsort(key, kind="stable")
    n_docs = p.n_docs
    avgdl = float(p.doc_len.mean(dtype=np.float64)) if n_docs else 0.0
    parts: list[bytes | memoryview] = [
        _HEADER.pack(MAGIC, VERSION, n_docs, n_terms, avgdl), np.asarray(p.doc_len, dtype="<u4").tobytes(),
    ]
    prev_old, prev_end = False, -1
    for o, a, n in zip(from_old[order].tolist(), src[order].tolist(), length[order].tolist()):
        if o and prev_old and a == prev_end:  # follows the previous stretch of old_data: one slice
            last = parts[-1]
            assert isinstance(last, memoryview)
            parts[-1] = raw[a - len(last) : a + n]
        else:
            parts.append(raw[a : a + n] if o else fresh_mv[a : a + n])
        prev_old, prev_end = o, a + n
    return b"".join(parts), new


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


def splice_postings(
    old: BM25Index,
    row_map: np.ndarray,
    n_docs: int,
    new_rows: Sequence[int],
    new_terms: Sequence[Sequence[str]],
) -> Postings:
    """The postings of a new generation that keeps some chunks of ``old`` and adds others.

    ``row_map[i]`` is the new number of old chunk i, or -1 if it is dropped;
    kept chunks must keep their relative order. Chunk ``new_rows[j]`` of the
    new generation has the analyzed terms ``new_terms[j]``. Equal, posting for
    posting, to ``build_postings`` over all the new generation's chunks, at a
    cost that grows with the old postings' size (array operations) and the
    new chunks' text (Python), not with the number of old chunks re-analyzed.
    """
    row_map = np.asarray(row_map, dtype=np.int64)
    mapped = row_map[np.asarray(old.post_doc)] if old.post_doc.size else np.zeros(0, dtype=np.int64)
    keep = mapped >= 0
    n_old_terms = old.n_terms
    kept_idx = np.flatnonzero(keep)
    kept_doc = mapped[kept_idx]
    kept_tf = np.asarray(old.post_tf)[kept_idx]
    old_offsets = np.asarray(old.offsets, dtype=np.int64)
    kept_df = np.diff(np.searchsorted(kept_idx, old_offsets))  # postings each old term keeps

    # The new chunks' (term, chunk, tf) triples, and where each new term sits among the old ones.
    counts = [Counter(terms) for terms in new_terms]
    vocab = sorted({t for c in counts for t in c})
    found = np.empty(len(vocab), dtype=np.int64)  # old term number, or -1
    place = np.empty(len(vocab), dtype=np.int64)  # old terms before it
    for j, term in enumerate(vocab):
        found[j], place[j] = _bisect(old.term_blob, old.term_starts, term.encode("utf-8"))
    fresh = found < 0
    fresh_place = place[fresh]
    # Merged dictionary: old term t moves up by the fresh terms sorted before it.
    old_rank = np.arange(n_old_terms, dtype=np.int64) + np.searchsorted(fresh_place, np.arange(n_old_terms), side="right")
    vocab_rank = np.empty(len(vocab), dtype=np.int64)
    vocab_rank[~fresh] = old_rank[found[~fresh]]
    vocab_rank[fresh] = fresh_place + np.arange(int(fresh.sum()))
    n_merged = n_old_terms + int(fresh.sum())

    index_of = {t: j for j, t in enumerate(vocab)}
    add = np.array(
        sorted((int(vocab_rank[index_of[t]]), row, tf) for row, c in zip(new_rows, counts) for t, tf in c.items()),
        dtype=np.int64,
    ).reshape(-1, 3)
    # Where each new posting goes among the kept ones: after the kept postings
    # of earlier terms, and after those of its own term with a lower chunk number.
    df = np.zeros(n_merged, dtype=np.int64)
    df[old_rank] = kept_df
    term_start = np.zeros(n_merged + 1, dtype=np.int64)
    np.cumsum(df, out=term_start[1:])
    at = np.empty(len(add), dtype=np.int64)
    for j, (rank, row, _) in enumerate(add.tolist()):
        lo, hi = term_start[rank], term_start[rank + 1]
        at[j] = lo + np.searchsorted(kept_doc[lo:hi], row)
    doc = np.insert(kept_doc, at, add[:, 1])
    tf = np.insert(kept_tf, at, add[:, 2])
    df += np.bincount(add[:, 0], minlength=n_merged)
    live = df > 0  # a term only the dropped chunks held leaves the dictionary
    offsets = np.zeros(int(live.sum()) + 1, dtype=np.int64)
    np.cumsum(df[live], out=offsets[1:])

    # Term bytes in merged order: old terms from the old blob, fresh ones from their own.
    fresh_blob, fresh_starts = _blob([t.encode("utf-8") for t, f in zip(vocab, fresh) if f])
    src = np.concatenate((np.asarray(old.term_blob, dtype=np.uint8), fresh_blob))
    src_lo = np.empty(n_merged, dtype=np.int64)
    src_len = np.empty(n_merged, dtype=np.int64)
    old_starts = np.asarray(old.term_starts, dtype=np.int64)
    src_lo[old_rank] = old_starts[:-1]
    src_len[old_rank] = np.diff(old_starts)
    fresh_rank = vocab_rank[fresh]
    src_lo[fresh_rank] = fresh_starts[:-1] + old_starts[-1]
    src_len[fresh_rank] = np.diff(fresh_starts)
    src_lo, src_len = src_lo[live], src_len[live]
    starts = np.zeros(src_len.size + 1, dtype=np.int64)
    np.cumsum(src_len, out=starts[1:])
    blob = src[np.repeat(src_lo - starts[:-1], src_len) + np.arange(int(starts[-1]))]

    doc_len = np.zeros(n_docs, dtype=np.uint32)
    kept_rows = np.flatnonzero(row_map >= 0)
    doc_len[row_map[kept_rows]] = np.asarray(old.doc_len)[kept_rows]
    for row, terms in zip(new_rows, new_terms):
        doc_len[row] = len(terms)
    return Postings(doc_len, blob, starts, offsets, doc, tf, kept_idx, at + np.arange(at.size))
