"""bm25.idx (TLBM version 1): build the postings of chunks, splice them, and encode them.

Every field is written with array operations; a splice reuses the old file's
bytes where a posting's varints did not change. Reading is ``bm25``.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragtui.core.index import leb128
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
    "PostingBytes", "build_postings", "encode_bm25", "encode_postings", "encode_spliced", "encode_spliced_carried",
    "posting_bytes", "splice_postings",
]


def encode_bm25(doc_terms: Sequence[Sequence[str]]) -> bytes:
    """Encode the analyzed terms of each chunk (in chunk order) as bm25.idx bytes.

    The output depends only on ``doc_terms``: the same input gives the same bytes.
    """
    return encode_postings(build_postings(doc_terms))


def build_postings(doc_terms: Sequence[Sequence[str]]) -> Postings:
    """The postings of chunks given as their analyzed terms (chunk i is ``doc_terms[i]``).

    One pass of C-level calls numbers every term occurrence (a dict that
    hands out the next number to each new term); everything after that is
    array work: a stable radix sort of the occurrences by term (they are
    already in chunk order), then runs of equal (term, chunk) are postings
    and their lengths the tfs.
    """
    n_docs = len(doc_terms)
    doc_len = np.fromiter(map(len, doc_terms), dtype=np.uint32, count=n_docs)
    total = int(doc_len.sum(dtype=np.uint64))
    number: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    term_ids = np.fromiter(
        map(number.__getitem__, itertools.chain.from_iterable(doc_terms)), dtype=np.int64, count=total
    )
    terms_by_id = list(number)
    n_terms = len(terms_by_id)
    # UTF-8 byte order equals code point order, which is Python's str order.
    order = sorted(range(n_terms), key=terms_by_id.__getitem__)
    rank = np.empty(n_terms, dtype=np.int64)
    rank[order] = np.arange(n_terms, dtype=np.int64)

    occ_term = rank[term_ids]
    perm = _stable_order(occ_term, n_terms)
    occ_term = occ_term[perm]
    occ_doc = np.repeat(np.arange(n_docs, dtype=np.int64), doc_len.astype(np.int64))[perm]
    new = np.ones(total, dtype=bool)
    if total:
        new[1:] = (occ_term[1:] != occ_term[:-1]) | (occ_doc[1:] != occ_doc[:-1])
    first = np.flatnonzero(new)
    tf = np.diff(np.append(first, total))
    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(occ_term[first], minlength=n_terms), out=offsets[1:])
    blob, starts = _blob([terms_by_id[t].encode("utf-8") for t in order])
    return Postings(doc_len, blob, starts, offsets, occ_doc[first], tf)


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


def encode_postings(p: Postings) -> bytes:
    """bm25.idx bytes for ``p``: every field written with array operations, no per-term loop."""
    n_docs, n_terms = p.n_docs, p.term_starts.size - 1
    df = np.diff(p.offsets)
    gaps = _gaps(np.asarray(p.post_doc, dtype=np.int64), np.asarray(p.offsets, dtype=np.int64))
    tf = np.asarray(p.post_tf)
    payload = _encode_pairs(gaps, tf)
    cum = np.zeros(gaps.size + 1, dtype=np.int64)
    np.cumsum(leb128.sizes(gaps) + leb128.sizes(tf), out=cum[1:])
    pay_start = cum[p.offsets]  # payload bytes of term t: [pay_start[t], pay_start[t+1])

    term_len = np.diff(p.term_starts)
    if n_terms and int(term_len.max()) > 0xFFFF:
        raise ValueError("a term is longer than 65,535 bytes, which bm25.idx cannot hold")
    entry = ENTRY_FIXED + term_len + np.diff(pay_start)
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
    _scatter(out, starts + ENTRY_FIXED + term_len, payload, pay_start)
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
    """``encode_spliced``, taking ``old_data``'s ``PostingBytes`` when the caller has them, and giving the new file's."""
    new_offsets = np.asarray(p.offsets, dtype=np.int64)
    new_tf = np.asarray(p.post_tf)
    new = posting_bytes(p.post_doc, new_offsets, new_tf)
    if p.kept is None or p.inserted is None:
        return encode_postings(p), new
    raw = np.frombuffer(old_data, dtype=np.uint8)
    old_offsets = np.asarray(old.offsets, dtype=np.int64)
    if old_bytes is None or old_bytes.gap.size != old.post_doc.size:
        old_bytes = posting_bytes(old.post_doc, old_offsets, old.post_tf)
    old_gap, old_len = old_bytes.gap, old_bytes.size
    new_gap, new_len = new.gap, new.size
    n_post = new_gap.size

    # Which postings keep their bytes: carried over with the same gap (tf never changes).
    is_old = np.ones(n_post, dtype=bool)
    is_old[p.inserted] = False
    same_kept = new_gap[is_old] == old_gap[p.kept]
    same = np.zeros(n_post, dtype=bool)
    same[is_old] = same_kept
    reuse = np.zeros(old_gap.size, dtype=bool)
    reuse[p.kept] = same_kept

    # The old file's bytes minus every header and every posting not reused.
    old_cum = np.zeros(old_gap.size + 1, dtype=np.int64)
    np.cumsum(old_len, dtype=np.int64, out=old_cum[1:])
    old_term_len = np.diff(np.asarray(old.term_starts, dtype=np.int64))
    old_head = _HEADER.size + DOC_LEN_BYTES * old.n_docs
    hdr_len = ENTRY_FIXED + old_term_len
    entry_at = old_head + np.concatenate(([0], np.cumsum(hdr_len + np.diff(old_cum[old_offsets]))))
    if int(entry_at[-1]) != raw.size:
        raise ValueError("old_data is not the file old was decoded from")
    hdr_cum = np.concatenate(([0], np.cumsum(hdr_len)))
    drop = np.zeros(raw.size, dtype=bool)
    drop[:old_head] = True
    # numpy's stubs type np.diff(np.asarray(x, dtype=np.int64)) as timedelta64, so hdr_len too; it is int64.
    drop[np.repeat(entry_at[:-1] - hdr_cum[:-1], hdr_len) + np.arange(int(hdr_cum[-1]))] = True  # type: ignore[arg-type]
    gone = np.flatnonzero(~reuse)
    if gone.size:
        term = np.searchsorted(old_offsets, gone, side="right") - 1
        # A posting's place in the file: its term's postings start, plus the bytes before it in that term.
        at = entry_at[term] + hdr_len[term] + old_cum[gone] - old_cum[old_offsets[term]]
        gone_len = old_len[gone].astype(np.int64)
        gone_cum = np.concatenate(([0], np.cumsum(gone_len)))
        drop[np.repeat(at - gone_cum[:-1], gone_len) + np.arange(int(gone_cum[-1]))] = True
    kept_bytes = raw[~drop]

    # What goes between the reused bytes: every term's header, and each posting not reused.
    n_terms = new_offsets.size - 1
    fresh = np.flatnonzero(~same)
    reused_len = np.where(same, new_len, 0)
    marks = np.unique(np.concatenate(([0], new_offsets[:-1], fresh)))
    marks = marks[marks < n_post]
    if marks.size:
        seg = np.add.reduceat(reused_len, marks, dtype=np.int64)
        ahead = np.concatenate(([0], np.cumsum(seg)[:-1]))
    else:
        ahead = np.zeros(0, dtype=np.int64)

    def before(i: np.ndarray) -> np.ndarray:
        """Reused bytes ahead of posting i."""
        return ahead[np.searchsorted(marks, i)]

    post_bytes = (
        np.add.reduceat(new_len, new_offsets[:-1], dtype=np.int64) if n_terms else np.zeros(0, dtype=np.int64)
    )
    term_len = np.diff(np.asarray(p.term_starts, dtype=np.int64))
    if n_terms and int(term_len.max()) > 0xFFFF:
        raise ValueError("a term is longer than 65,535 bytes, which bm25.idx cannot hold")
    h_len = ENTRY_FIXED + term_len
    h_at = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(h_len, out=h_at[1:])
    headers = np.empty(int(h_at[-1]), dtype=np.uint8)
    _put_entry_heads(headers, h_at[:-1], p, np.diff(new_offsets), post_bytes)
    fresh_bytes = _encode_pairs(new_gap[fresh], new_tf[fresh])
    fresh_len = new_len[fresh].astype(np.int64)
    fresh_at = np.zeros(fresh.size + 1, dtype=np.int64)
    np.cumsum(fresh_len, out=fresh_at[1:])
    # Stream order: term t's header, then its postings; both kinds sorted into it by that order.
    order_key = np.concatenate((new_offsets[:-1] + np.arange(n_terms), fresh + np.searchsorted(new_offsets, fresh, side="right")))
    order = np.argsort(order_key, kind="stable")
    item_pos = np.concatenate((before(new_offsets[:-1]), before(fresh)))[order]
    item_len = np.concatenate((h_len, fresh_len))[order].astype(np.int64, copy=False)
    item_src = np.concatenate((h_at[:-1], headers.size + fresh_at[:-1]))[order]
    src = np.concatenate((headers, fresh_bytes))
    item_cum = np.zeros(item_len.size + 1, dtype=np.int64)
    np.cumsum(item_len, out=item_cum[1:])
    values = src[np.repeat(item_src - item_cum[:-1], item_len) + np.arange(int(item_cum[-1]))]
    body = np.insert(kept_bytes, np.repeat(item_pos, item_len), values)

    n_docs = p.n_docs
    avgdl = float(p.doc_len.mean(dtype=np.float64)) if n_docs else 0.0
    head = _HEADER.pack(MAGIC, VERSION, n_docs, n_terms, avgdl) + np.asarray(p.doc_len, dtype="<u4").tobytes()
    return head + body.tobytes(), new


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
    kept_cum = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(keep, out=kept_cum[1:])
    kept_df = np.diff(kept_cum[old_offsets])  # postings each old term keeps

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
