"""The next bm25.idx from the previous one: postings carried over and renumbered, bytes reused in place.

``splice_postings`` gives the postings of a generation that keeps some chunks
of the previous one and adds others; ``encode_spliced`` writes them as
the previous file with a few bytes taken out and a few put in, which is byte
for byte what ``bm25_write.encode_postings`` writes from scratch (a property
test compares them). Both work on whole arrays: what grows with the corpus is
a handful of passes over the postings and the file's bytes, with no step per
term or per stretch of the old file in Python.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ragtui.core.index import leb128
from ragtui.core.index.arraycache import drop_pages
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
)
from ragtui.core.index.bm25_write import _blob, _encode_pairs, _put_le, encode_postings

if TYPE_CHECKING:
    import mmap

__all__ = ["LAYOUT_STEP", "PostingBytes", "encode_spliced", "splice_postings"]


_BEHIND = 1 << 18
"""Values before a stretch whose pages are let go with it: ``drop_pages`` lets whole pages go only, and the
kernel maps the pages around one that faults (64 KiB by default), the stretch before's included."""

LAYOUT_STEP = 1 << 20
"""Postings worked out at a time where a whole pass is made: the temporaries are a few bytes a posting of one step."""


class PostingBytes:
    """Per posting of one bm25.idx: its gap and the bytes its (gap, tf) varints take, worked out from the postings
    when asked (a stretch, or given positions): nothing of the size of the postings is kept. A stretch of postings
    mapped from a file is read once: its pages are let go (``arraycache.drop_pages``) once its values are out.

    The gap is the posting's document number minus the previous one in its term (the first: the number itself),
    uint32 when the numbers are (int64 otherwise).
    """

    def __init__(self, post_doc: np.ndarray, offsets: np.ndarray, post_tf: np.ndarray) -> None:
        self.post_doc, self.post_tf = post_doc, post_tf
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.n = int(post_doc.size)

    def gaps(self, lo: int, hi: int) -> np.ndarray:
        """The gaps of postings lo .. hi-1."""
        docs = np.asarray(self.post_doc[lo:hi])
        if docs.dtype != np.uint32:
            docs = docs.astype(np.int64)
        g = np.empty(hi - lo, dtype=docs.dtype)
        if hi <= lo:
            return g
        # Differences in the chunk numbers' own type: within a term they ascend, and the one at a term's first
        # posting (which may wrap around) is overwritten with the number itself.
        np.subtract(docs[1:], docs[:-1], out=g[1:], casting="unsafe")
        g[0] = (int(docs[0]) - int(self.post_doc[lo - 1])) % (1 << 32) if lo else int(docs[0])
        offsets = self.offsets
        firsts = offsets[np.searchsorted(offsets, lo) : np.searchsorted(offsets, hi)] - lo
        g[firsts] = docs[firsts]
        drop_pages(self.post_doc, hi, lo - _BEHIND)  # (and the pages mapped around the last stretch)
        return g

    def sizes(self, lo: int, hi: int) -> np.ndarray:
        """The varint bytes (uint8) of postings lo .. hi-1."""
        s = leb128.sizes(self.gaps(lo, hi))
        s += leb128.sizes(np.asarray(self.post_tf[lo:hi]))
        drop_pages(self.post_tf, hi, lo - _BEHIND)
        return s

    def gap_at(self, at: np.ndarray) -> np.ndarray:
        """The gaps (int64) of the postings at positions ``at``."""
        at = np.asarray(at, dtype=np.int64)
        docs = np.asarray(self.post_doc[at]).astype(np.int64)
        before = np.asarray(self.post_doc[np.maximum(at - 1, 0)]).astype(np.int64)
        first = self.offsets[np.searchsorted(self.offsets, at, side="right") - 1] == at
        out: np.ndarray = np.where(first, docs, docs - before)
        return out

    def size_at(self, at: np.ndarray) -> np.ndarray:
        """The varint bytes (uint8) of the postings at positions ``at``."""
        at = np.asarray(at, dtype=np.int64)
        s = leb128.sizes(self.gap_at(at))
        s += leb128.sizes(np.asarray(self.post_tf[at]))
        return s


def encode_spliced(
    old_data: bytes | memoryview | mmap.mmap, old: BM25Index, p: Postings, *, stretch_limit: int | None = None,
) -> bytes | memoryview:
    """``encode_postings(p)`` for ``p`` from ``splice_postings(old, ...)``, reusing ``old_data``'s bytes.

    ``old_data`` is the bm25.idx that ``old`` was decoded from. A carried-over
    posting whose gap did not change has the same varint bytes as before, and
    a term none of whose postings changed has the same entry; only the file
    header, the entry heads of the other terms and the postings written anew
    are encoded. The result is byte for byte what ``encode_postings`` gives,
    as a view of the array it was put together in (not copied into ``bytes``).

    Every byte of the old file either survives unchanged — a clean term's
    whole entry (no posting of it written anew, none dropped, none added), or
    a carried-over posting whose gap is the same — or goes: the file header
    and ``doc_len``, the entry head of every other term, the postings dropped
    or renumbered against their neighbour. The survivors keep their relative
    order in the new file, so the new file is the survivors in order with the
    new pieces (the header, the heads of the changed terms, the postings
    written anew) put in where the new file's order places them: a piece
    goes after as many surviving bytes as come before it in the new file.
    Both steps are whole-array passes over the file's bytes (a mask of
    what goes, a mask of what is put in), so a change that touches every
    term — a document whose chunk count changed renumbers the chunks after
    it, and with them one posting of most terms — costs no more per piece.
    Where the pieces are few (up to ``stretch_limit``, ``STRETCHES`` by
    default) the body is copied stretch by stretch instead: the same bytes.
    """
    new_offsets = np.asarray(p.offsets, dtype=np.int64)
    new_tf = np.asarray(p.post_tf)
    if p.dropped is None or p.inserted is None:
        return encode_postings(p)
    raw = np.frombuffer(old_data, dtype=np.uint8)
    old_offsets = np.asarray(old.offsets, dtype=np.int64)
    new = PostingBytes(p.post_doc, new_offsets, new_tf)
    old_bytes = PostingBytes(old.post_doc, old_offsets, old.post_tf)
    dropped = np.asarray(p.dropped, dtype=np.int64)
    inserted = np.asarray(p.inserted, dtype=np.int64)
    n_terms, n_old_terms = new_offsets.size - 1, old_offsets.size - 1

    old_hdr = ENTRY_FIXED + np.diff(np.asarray(old.term_starts, dtype=np.int64))
    old_head = _HEADER.size + DOC_LEN_BYTES * old.n_docs

    # The carried-over postings, by rank: carried posting c is new posting c + (new ones before it) and old
    # posting c + (dropped ones before it).
    ins_shift = inserted - np.arange(inserted.size)
    drop_shift = dropped - np.arange(dropped.size)

    def new_number(c: np.ndarray) -> np.ndarray:
        return c + np.searchsorted(ins_shift, c, side="right")

    def old_number(c: np.ndarray) -> np.ndarray:
        return c + np.searchsorted(drop_shift, c, side="right")

    # Postings written anew: inserted, or carried over with another gap (tf never changes). A carried posting
    # whose new gap takes as many bytes as the old one keeps its place and is patched there (most of them: a
    # chunk count that changed moves one posting of most terms by a few chunk numbers), so its term's entry
    # keeps its head; one whose size changed goes and is put in anew.
    regapped = _differing(new.gaps, new.n, inserted, old_bytes.gaps, old_bytes.n, dropped)
    re_new, re_old = new_number(regapped), old_number(regapped)
    in_place = new.size_at(re_new) == old_bytes.size_at(re_old)
    patched_new, patched_old = re_new[in_place], re_old[in_place]
    fresh = _merged(inserted, re_new[~in_place])
    gone = _merged(dropped, re_old[~in_place])  # old postings whose bytes go
    del regapped, re_new, re_old
    gone_size = old_bytes.size_at(gone).astype(np.int64)
    gone_cum = np.zeros(gone.size + 1, dtype=np.int64)
    np.cumsum(gone_size, out=gone_cum[1:])

    def old_before(i: np.ndarray) -> np.ndarray:
        """The old postings before new posting number ``i``'s place: those before the carried postings before it."""
        c = i - np.searchsorted(inserted, i)  # carried postings before it: old postings before x
        return np.where(c > 0, old_number(np.maximum(c - 1, 0)) + 1, 0)

    def surviving_before(i: np.ndarray) -> np.ndarray:
        """Bytes of the postings that keep theirs before new posting number ``i``."""
        x = old_before(i)
        return old_cum[x] - gone_cum[np.searchsorted(gone, x)]

    # Clean terms: no posting written anew and every posting of one old term, in order.
    first, end = new_offsets[:-1], new_offsets[1:]
    f_term = np.searchsorted(new_offsets, fresh, side="right") - 1
    dirty = np.zeros(n_terms, dtype=bool)
    dirty[f_term] = True
    cand = np.flatnonzero(~dirty)
    head_new = first[cand]
    head_old = old_number(head_new - np.searchsorted(inserted, head_new))
    ot = np.searchsorted(old_offsets, head_old, side="right") - 1
    ok = (old_offsets[ot] == head_old) & (old_offsets[ot + 1] - head_old == end[cand] - first[cand])
    dirty[cand[~ok]] = True
    clean, clean_old = cand[ok], ot[ok]
    dterms = np.flatnonzero(dirty)

    # Where each old entry, and each old posting within it, lies in old_data: the old postings' byte offsets,
    # worked out in one pass at the positions asked for below only.
    old_cum = _OffsetsAt(old_bytes.sizes, old_bytes.n, np.concatenate((
        old_offsets, gone, patched_old, old_before(first[dterms]), old_before(end[dterms]), old_before(fresh))))
    old_at = np.zeros(n_old_terms + 1, dtype=np.int64)
    np.cumsum(old_hdr + np.diff(old_cum[old_offsets]), out=old_at[1:])
    old_at += old_head
    if int(old_at[-1]) != raw.size:
        raise ValueError("old_data is not the file old was decoded from")

    # What goes: the old entry head of every term that is not clean, and the postings that do not stay.
    old_clean = np.zeros(n_old_terms, dtype=bool)
    old_clean[clean_old] = True
    h_gone = np.flatnonzero(~old_clean)
    g_term = np.searchsorted(old_offsets, gone, side="right") - 1
    go_at = np.concatenate((old_at[h_gone], old_at[g_term] + old_hdr[g_term] + old_cum[gone] - old_cum[old_offsets[g_term]]))
    go_len = np.concatenate((old_hdr[h_gone], gone_size))
    body = raw[old_head:]

    # What is put in: each dirty term's head, and each posting written anew, in the new file's order,
    # each after as many surviving bytes as come before it in the new file.
    f_len = new.size_at(fresh).astype(np.int64)
    clean_head = np.zeros(n_terms + 1, dtype=np.int64)  # bytes of clean terms' entries' heads before each term
    clean_head[clean + 1] = old_hdr[clean_old]
    np.cumsum(clean_head, out=clean_head)
    d_first = surviving_before(first[dterms])
    post_bytes = surviving_before(end[dterms]) - d_first
    np.add.at(post_bytes, np.searchsorted(dterms, f_term), f_len)
    heads, h_len = _entry_heads(p, dterms, end[dterms] - first[dterms], post_bytes)
    pieces = np.concatenate((heads, _encode_pairs(new.gap_at(fresh), new_tf[fresh])))
    # A term's head sits at first[t] + t in the stream of heads and postings, posting i at i + term + 1.
    key = np.concatenate((first[dterms] + dterms, fresh + f_term + 1))
    at = np.concatenate((clean_head[dterms] + d_first, clean_head[f_term] + surviving_before(fresh)))
    length = np.concatenate((h_len, f_len))
    src = np.zeros(length.size + 1, dtype=np.int64)
    np.cumsum(length, out=src[1:])
    order = np.argsort(key, kind="stable")
    at, length, src = at[order], length[order], src[:-1][order]

    n_docs = p.n_docs
    avgdl = float(p.doc_len.mean(dtype=np.float64)) if n_docs else 0.0
    new_head = _HEADER.size + DOC_LEN_BYTES * n_docs
    go_at -= old_head
    out = np.empty(new_head + body.size - int(go_len.sum()) + pieces.size, dtype=np.uint8)
    out[: _HEADER.size] = np.frombuffer(_HEADER.pack(MAGIC, VERSION, n_docs, n_terms, avgdl), dtype=np.uint8)
    out[_HEADER.size : new_head] = np.frombuffer(np.asarray(p.doc_len, dtype="<u4").tobytes(), dtype=np.uint8)
    if go_at.size + at.size <= (STRETCHES if stretch_limit is None else stretch_limit):
        _copy_stretches(out[new_head:], body, go_at, go_len, pieces, at, length, src)
    else:
        _place_masked(out[new_head:], body, go_at, go_len, pieces, at, length, src)
    if patched_old.size:
        # Where each patched posting's bytes landed: its place among the surviving bytes, after the bytes put in
        # at or before that place.
        p_term = np.searchsorted(old_offsets, patched_old, side="right") - 1
        p_at = old_at[p_term] + old_hdr[p_term] + old_cum[patched_old] - old_cum[old_offsets[p_term]] - old_head
        by = np.argsort(go_at, kind="stable")
        go_sorted, gone_before = go_at[by], np.concatenate(([0], np.cumsum(go_len[by])))
        p_at -= gone_before[np.searchsorted(go_sorted, p_at)]
        put_before = np.concatenate(([0], np.cumsum(length)))
        p_at += put_before[np.searchsorted(at, p_at, side="right")] + new_head
        out[_spans(p_at, new.size_at(patched_new))] = _encode_pairs(new.gap_at(patched_new), new_tf[patched_new])
    _let_go(raw, old.post_doc, old.post_tf)
    return out.data


def _let_go(*arrays: np.ndarray) -> None:
    """Once a splice's passes are done: let go of whatever pages of the mapped ``arrays`` are still resident (each
    pass lets its stretches go as it reads them; the kernel may have mapped a few around them since)."""
    for a in arrays:
        drop_pages(a, a.size)


STRETCHES = 4096
"""Up to this many pieces, ``encode_spliced_carried`` copies stretch by stretch; past it, by masks over the bytes."""


def _copy_stretches(out: np.ndarray, body: np.ndarray, go_at: np.ndarray, go_len: np.ndarray,
                    pieces: np.ndarray, at: np.ndarray, length: np.ndarray, src: np.ndarray) -> None:
    """The new body, one copy per stretch: the surviving bytes between the spans that go, and the pieces put in
    after ``at`` surviving bytes each (``at`` non-decreasing). For few pieces: each copy is a block move."""
    order = np.argsort(go_at, kind="stable")
    go_at, go_len = go_at[order].tolist(), go_len[order].tolist()
    # The surviving stretches of body, in order, with the count of surviving bytes before each.
    stretches: list[tuple[int, int]] = []
    pos = 0
    for a, n in zip(go_at, go_len):
        if a > pos:
            stretches.append((pos, a))
        pos = max(pos, a + n)
    if pos < body.size:
        stretches.append((pos, body.size))
    w = 0  # bytes written
    done = 0  # surviving bytes written
    read_to = 0  # body read up to here
    puts = list(zip(at.tolist(), length.tolist(), src.tolist()))
    k = 0
    for lo, hi in stretches:
        while lo < hi:
            # Pieces due before the next surviving byte go first.
            while k < len(puts) and puts[k][0] <= done:
                _, n, s = puts[k]
                out[w : w + n] = pieces[s : s + n]
                w += n
                k += 1
            upto = hi if k == len(puts) else min(hi, lo + puts[k][0] - done)
            for a in range(lo, upto, PLACE_WINDOW):  # a window at a time: a mapped file's pages are read once
                b = min(a + PLACE_WINDOW, upto)
                out[w + a - lo : w + b - lo] = body[a:b]
                drop_pages(body, b, read_to - _BEHIND)  # (and the pages mapped around the last stretch)
                read_to = b
            w += upto - lo
            done += upto - lo
            lo = upto
    for _, n, s in puts[k:]:
        out[w : w + n] = pieces[s : s + n]
        w += n


PLACE_WINDOW = 1 << 23
"""Bytes of the old body ``_place_masked`` works on at a time: its masks and positions are a window's."""


def _place_masked(out: np.ndarray, body: np.ndarray, go_at: np.ndarray, go_len: np.ndarray,
                  pieces: np.ndarray, at: np.ndarray, length: np.ndarray, src: np.ndarray,
                  window: int = PLACE_WINDOW) -> None:
    """The new body by whole-array passes: the put-in bytes where they go (``np.insert``'s placement), the
    surviving bytes around them in order. For many pieces: no step per piece.

    A ``window`` of the old body at a time: its surviving bytes, and the pieces that go before the first
    surviving byte of the next window, make the next stretch of ``out``. The spans that go are disjoint;
    ``at`` (each piece's place among the surviving bytes) ascends."""
    order = np.argsort(go_at, kind="stable")
    g_at = go_at[order]
    g_end = g_at + go_len[order]
    put_before = np.zeros(at.size + 1, dtype=np.int64)
    np.cumsum(length, out=put_before[1:])
    n = int(body.size)
    kept_before = written = placed = 0
    for lo in range(0, max(n, 1), window):
        hi = min(lo + window, n)
        stays = np.ones(hi - lo, dtype=bool)
        a, b = int(np.searchsorted(g_end, lo, side="right")), int(np.searchsorted(g_at, hi))
        if b > a:
            starts, ends = np.maximum(g_at[a:b], lo), np.minimum(g_end[a:b], hi)
            stays[_spans(starts - lo, ends - starts)] = False
        survivors = body[lo:hi][stays]
        drop_pages(body, hi, lo - _BEHIND)  # a mapped file: read once here
        upto = at.size if hi >= n else int(np.searchsorted(at, kept_before + survivors.size))
        size = survivors.size + int(put_before[upto] - put_before[placed])
        view = out[written : written + size]
        if upto > placed:
            lens = length[placed:upto]
            put_pos = np.repeat(at[placed:upto] - kept_before, lens) + np.arange(int(lens.sum()), dtype=np.int64)
            view[put_pos] = pieces[_spans(src[placed:upto], lens)]
            kept = np.ones(size, dtype=bool)
            kept[put_pos] = False
            view[kept] = survivors
        else:
            view[:] = survivors
        written, kept_before, placed = written + size, kept_before + survivors.size, upto
    if written != out.size:
        raise ValueError("the pieces and the surviving bytes do not fill the new body")


def _merged(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The union of two ascending arrays with no element in common, ascending."""
    out = np.concatenate((a, b))
    out.sort(kind="stable")  # two sorted runs: a merge
    return out


class _OffsetsAt:
    """[0, s(0), s(0) + s(1), ...] for the ``n`` varint lengths ``sizes(lo, hi)`` gives, at the positions ``at``
    (0 to ``n``) only: one pass over the sizes, ``step`` at a time, keeping 8 bytes a position asked for and
    nothing a posting. Indexed by an array of those positions, it gives their int64 offsets."""

    def __init__(self, sizes: Callable[[int, int], np.ndarray], n: int, at: np.ndarray, step: int = LAYOUT_STEP) -> None:
        self.at = np.unique(np.asarray(at, dtype=np.int64))
        if self.at.size and (int(self.at[0]) < 0 or int(self.at[-1]) > n):
            raise ValueError("a position past the sizes")
        self.values = np.empty(self.at.size, dtype=np.int64)
        step = max(1, step)
        total = 0
        for lo in range(0, n + 1, step):
            hi = min(lo + step, n + 1)  # the offsets of positions lo .. hi-1
            got = sizes(lo, min(hi, n))  # the sizes of positions lo .. hi-1 (the last one past the end: none)
            a, b = np.searchsorted(self.at, [lo, hi])
            if b > a:
                seg = np.zeros(got.size + 1, dtype=np.int64)
                np.cumsum(got, dtype=np.int64, out=seg[1:])
                self.values[a:b] = seg[self.at[a:b] - lo] + total
            total += int(got.sum(dtype=np.int64))

    def __getitem__(self, at: np.ndarray) -> np.ndarray:
        at = np.asarray(at, dtype=np.int64)
        i = np.searchsorted(self.at, at)
        if at.size and not np.array_equal(self.at[np.minimum(i, self.at.size - 1)] if self.at.size else i, at):
            raise ValueError("an offset asked for at a position not worked out")
        out: np.ndarray = self.values[i]
        return out


def _differing(a: Callable[[int, int], np.ndarray], a_n: int, a_gone: np.ndarray,
               b: Callable[[int, int], np.ndarray], b_n: int, b_gone: np.ndarray, step: int = LAYOUT_STEP) -> np.ndarray:
    """The positions c (ascending) where ``np.delete(A, a_gone)[c] != np.delete(B, b_gone)[c]``, for the arrays A
    of ``a_n`` values whose stretches ``a(lo, hi)`` gives and B of ``b_n`` (``a_gone`` and ``b_gone`` ascending,
    the two results of one length), without making A, B or either result: each side's values are asked for
    ``step`` positions at a time, and compared stretch by stretch where neither side skips an element."""
    n = int(a_n - a_gone.size)
    if n != b_n - b_gone.size:
        raise ValueError("the two sides differ in length once their gone elements are left out")
    a_shift = a_gone - np.arange(a_gone.size)  # from this position on, one more element of ``a`` is skipped
    b_shift = b_gone - np.arange(b_gone.size)
    out = [np.zeros(0, dtype=np.int64)]
    for first in range(0, n, step):
        last = min(first + step, n)  # positions first .. last-1: each side's values worked out once for them
        # Only the shifts within these positions: both arrays are ascending.
        a_in = a_shift[np.searchsorted(a_shift, first) : np.searchsorted(a_shift, last, side="right")]
        b_in = b_shift[np.searchsorted(b_shift, first) : np.searchsorted(b_shift, last, side="right")]
        cuts = np.unique(np.concatenate(([first, last], a_in, b_in)))
        skip_a = np.searchsorted(a_shift, cuts[:-1], side="right")
        skip_b = np.searchsorted(b_shift, cuts[:-1], side="right")
        a_lo, b_lo = first + int(skip_a[0]), first + int(skip_b[0])
        a_vals = a(a_lo, last + int(np.searchsorted(a_shift, last - 1, side="right")))
        b_vals = b(b_lo, last + int(np.searchsorted(b_shift, last - 1, side="right")))
        for lo, hi, x, y in zip(cuts[:-1].tolist(), cuts[1:].tolist(), skip_a.tolist(), skip_b.tolist()):
            if hi > lo:
                differ = np.flatnonzero(a_vals[lo + x - a_lo : hi + x - a_lo] != b_vals[lo + y - b_lo : hi + y - b_lo])
                if differ.size:
                    out.append(differ + lo)
    return np.concatenate(out)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every span, in order, as one array."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    before = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=before[1:])
    return np.repeat(np.asarray(starts, dtype=np.int64) - before, lengths) + np.arange(total, dtype=np.int64)


def _entry_heads(p: Postings, terms: np.ndarray, df: np.ndarray, postings_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entry heads (u16 length, the term's bytes, u32 df, u32 postings_bytes) of ``terms``, one after another,
    and each one's length."""
    term_starts = np.asarray(p.term_starts, dtype=np.int64)
    t_len = term_starts[terms + 1] - term_starts[terms]
    if terms.size and int(t_len.max()) > 0xFFFF:
        raise ValueError("a term is longer than 65,535 bytes, which bm25.idx cannot hold")
    h_len = ENTRY_FIXED + t_len
    h_at = np.zeros(terms.size + 1, dtype=np.int64)
    np.cumsum(h_len, out=h_at[1:])
    heads = np.empty(int(h_at[-1]), dtype=np.uint8)
    _put_le(heads, h_at[:-1], t_len, TERM_LEN_BYTES)
    blob = np.asarray(p.term_blob, dtype=np.uint8)
    heads[_spans(h_at[:-1] + TERM_LEN_BYTES, t_len)] = blob[_spans(term_starts[terms], t_len)]
    _put_le(heads, h_at[:-1] + TERM_LEN_BYTES + t_len, df, DF_BYTES)
    _put_le(heads, h_at[:-1] + TERM_LEN_BYTES + DF_BYTES + t_len, postings_bytes, POSTINGS_LEN_BYTES)
    return heads, h_len


RENUMBER_STEP = 1 << 20
"""Old postings renumbered at a time by the splice: indexing with a uint32 array makes an intp copy of it."""


def _dropped_postings(row_map: np.ndarray, post_doc: np.ndarray, step: int = RENUMBER_STEP) -> np.ndarray:
    """The numbers of the postings whose chunk ``row_map`` drops (-1), ascending: ``step`` postings at a time."""
    n = int(post_doc.size)
    found = [np.zeros(0, dtype=np.int64)]
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        gone = np.flatnonzero(np.take(row_map, np.asarray(post_doc[lo:hi])) < 0)
        drop_pages(post_doc, hi, lo - _BEHIND)  # a mapped file: read once here
        if gone.size:
            found.append(gone + lo)
    return np.concatenate(found)


def _kept_before(old: BM25Index, row_map: np.ndarray, old_offsets: np.ndarray, dropped: np.ndarray,
                 term: np.ndarray, row: np.ndarray) -> np.ndarray:
    """For each new posting (old term number ``term``, or -1 for a term the old index lacks; new chunk ``row``):
    how many postings of that term are kept with a new chunk number below ``row``.

    Kept chunks keep their order, so those are the term's old postings before the first kept old chunk
    numbered ``row`` or more now, less the dropped ones among them: bisections of the old postings (whose
    chunk numbers ascend within a term), with no array of the kept ones.
    """
    out = np.zeros(term.size, dtype=np.int64)
    known = np.flatnonzero(term >= 0)
    if not known.size:
        return out
    t = term[known]
    kept_chunks = np.flatnonzero(row_map >= 0)
    # The first kept old chunk numbered ``row`` or more now (past the last: every old chunk comes before).
    first_old = np.append(kept_chunks, row_map.size)[np.searchsorted(row_map[kept_chunks], row[known])]
    lo, hi = old_offsets[t], old_offsets[t + 1]
    at = _insert_points(np.asarray(old.post_doc), lo, hi, first_old)
    out[known] = (at - lo) - (np.searchsorted(dropped, at) - np.searchsorted(dropped, lo))
    return out


def _carry_and_insert(old: BM25Index, row_map: np.ndarray, dropped: np.ndarray, at: np.ndarray, add_doc: np.ndarray,
                      add_tf: np.ndarray, step: int = RENUMBER_STEP) -> tuple[np.ndarray, np.ndarray]:
    """The new postings' chunk numbers and tfs: the old postings not ``dropped``, renumbered by ``row_map``, with
    ``add_doc``/``add_tf`` put in before kept posting ``at[j]`` (``np.insert``'s rule, ``at`` ascending).

    Written straight into the two results ``step`` old postings at a time: a kept posting's place is its rank
    among the kept plus the new ones put in before it, one shift for every stretch between two insertions.
    """
    post_doc, post_tf = old.post_doc, old.post_tf
    n_old = int(post_doc.size)
    n = n_old - int(dropped.size) + int(at.size)
    doc = np.empty(n, dtype=row_map.dtype)
    tf = np.empty(n, dtype=np.asarray(post_tf[:0]).dtype)
    kept = 0  # kept postings before this step
    for lo in range(0, n_old, step):
        hi = min(lo + step, n_old)
        d = np.take(row_map, np.asarray(post_doc[lo:hi]))
        f = np.asarray(post_tf[lo:hi])
        gone = dropped[np.searchsorted(dropped, lo) : np.searchsorted(dropped, hi)]
        if gone.size:
            keep = np.ones(hi - lo, dtype=bool)
            keep[gone - lo] = False
            d, f = d[keep], f[keep]
        # Kept postings kept..kept+len(d): stretches split where a new posting goes in.
        cuts = [kept, *at[np.searchsorted(at, kept, side="right") : np.searchsorted(at, kept + d.size)].tolist(),
                kept + d.size]
        for a, b in zip(cuts, cuts[1:]):
            if b > a:
                shift = int(np.searchsorted(at, a, side="right"))
                doc[a + shift : b + shift] = d[a - kept : b - kept]
                tf[a + shift : b + shift] = f[a - kept : b - kept]
        kept += d.size
        drop_pages(post_doc, hi, lo - _BEHIND)  # mapped files: read once here
        drop_pages(post_tf, hi, lo - _BEHIND)
    put = at + np.arange(at.size)
    doc[put] = add_doc
    tf[put] = add_tf
    return doc, tf


def _renumber(row_map: np.ndarray, post_doc: np.ndarray, step: int = RENUMBER_STEP) -> np.ndarray:
    """``row_map[post_doc]``, ``step`` postings at a time: the index's intp copy is one step's, not 8 bytes a
    posting of the whole index."""
    n = int(post_doc.size)
    out = np.empty(n, dtype=row_map.dtype)
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        np.take(row_map, np.asarray(post_doc[lo:hi]), out=out[lo:hi])
    return out


def _insert_points(sorted_runs: np.ndarray, lo: np.ndarray, hi: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each j, ``lo[j] + searchsorted(sorted_runs[lo[j]:hi[j]], values[j])``: one bisection of all the
    runs at once (each run ascending), a few dozen array passes over the queries instead of a call per query."""
    lo = np.asarray(lo, dtype=np.int64).copy()
    hi = np.asarray(hi, dtype=np.int64).copy()
    values = np.asarray(values, dtype=np.int64)
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) >> 1
        below = np.zeros(lo.size, dtype=bool)
        below[open_] = sorted_runs[mid[open_]] < values[open_]
        lo = np.where(open_ & below, mid + 1, lo)
        hi = np.where(open_ & ~below, mid, hi)


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
    # Chunk numbers in 32 bits while they fit (half the bytes to move): -1 marks a dropped chunk.
    wide = max(n_docs, int(np.asarray(row_map).size)) >= 1 << 31
    row_map = np.asarray(row_map, dtype=np.int64 if wide else np.int32)
    n_old_terms = old.n_terms
    old_offsets = np.asarray(old.offsets, dtype=np.int64)
    # The old postings of dropped chunks: a pass over the old postings, a step at a time (only these are kept).
    dropped = _dropped_postings(row_map, old.post_doc)
    # Postings each old term keeps.
    kept_df = np.diff(old_offsets) - np.bincount(np.searchsorted(old_offsets, dropped, side="right") - 1,
                                                 minlength=n_old_terms)

    # The new chunks' (term, chunk, tf) triples, and where each new term sits among the old ones.
    counts = [Counter(terms) for terms in new_terms]
    vocab = sorted({t for c in counts for t in c})
    # Each one's old term number (or -1), and how many old terms sort before it.
    found, place = old.locate_many([term.encode("utf-8") for term in vocab])
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
        sorted((int(vocab_rank[index_of[t]]), row, tf, int(found[index_of[t]]))
               for row, c in zip(new_rows, counts) for t, tf in c.items()),
        dtype=np.int64,
    ).reshape(-1, 4)
    # Where each new posting goes among the kept ones: after the kept postings
    # of earlier terms, and after those of its own term with a lower chunk number.
    df = np.zeros(n_merged, dtype=np.int64)
    df[old_rank] = kept_df
    term_start = np.zeros(n_merged + 1, dtype=np.int64)
    np.cumsum(df, out=term_start[1:])
    at = term_start[add[:, 0]] + _kept_before(old, row_map, old_offsets, dropped, add[:, 3], add[:, 1])
    doc, tf = _carry_and_insert(old, row_map, dropped, at, add[:, 1], add[:, 2])
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
    if not wide:
        doc = doc.view(np.uint32)  # no chunk number is negative any more
    _let_go(old.post_doc, old.post_tf)
    return Postings(doc_len, blob, starts, offsets, doc, tf, dropped, at + np.arange(at.size))
