"""Exact BM25 top-k with dynamic pruning: block-max bounds over fixed ranges of chunk numbers.

``BM25Index.search`` ranks with ``top_k_terms``; ``exhaustive_top_k`` is the
plain reference it must equal. The pruned path returns exactly the
reference's result: the same chunks, in the same order (ties by ascending
chunk number), with bit-identical scores, because every returned score is a
sum over the query's terms in the reference's order.

The chunk numbers are cut into fixed blocks of ``BLOCK`` (chunks 0..63,
64..127, ...). From the decoded postings each term gets one entry per
block that holds any of its postings: the block, the largest weight of the
term's postings in it (the block maximum), and where those postings start.
These arrays live in the reader's memory, never in the index directory.
Making them reads every posting of the index, which one query never pays
back: a reader builds them, in a thread of its own, only once its searches
have scored as many postings whole as the index holds
(``BM25Index.blocks_if_built``), and scores every posting until then. A term
in most chunks has about n_docs/64 entries where it has n_docs postings.

A query then:

1. sums its terms' block maxima per block (one ``bincount`` over the
   entries): an upper bound on the score of every chunk of each block;
2. scores exactly the chunks of the few blocks with the highest bounds; the
   k-th best of those scores is a lower bound ``theta`` on the k-th best score;
3. scores exactly the chunks of every other block whose bound reaches
   ``theta``; a block whose bound is below ``theta`` cannot hold a top-k
   chunk, not even a tie, and its postings are never read.

This is block-max pruning over chunk-number ranges rather than over runs of
each term's postings (block-max WAND's blocks): the blocks of all terms line
up, so the bounds of every block come from one array operation, which is
what pays in numpy. Queries whose terms hold few postings skip all of it and
score every posting with one ``bincount`` in query order (bit-identical to
the reference's term-by-term adds: the same additions in the same order).

Every bound compares with a slack of ``SLACK`` times the query's largest
possible score, far above the rounding of a sum of doubles, so rounding can
only keep a block, never drop one that holds a top-k chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragtui.core.index.topk import top_k

__all__ = [
    "BLOCK", "PruneArrays", "SearchStats", "dense_scores_top_k", "exhaustive_top_k", "prune_arrays",
    "query_key", "term_keys", "top_k_terms",
]

BLOCK = 16
"""Chunk numbers per block of the block maxima (16 read the fewest postings at 100k chunks; bench_bm25.py)."""
SLACK = 1e-9
"""Relative slack of every bound comparison (of the largest score the query can reach)."""
PRUNE_MIN_POSTINGS = 65_536
"""``auto`` prunes only queries whose terms hold at least this many postings..."""
PRUNE_MAX_ENTRIES = 0.5
"""... and at most this many block entries per posting. Pruning in numpy costs several times more per
entry or posting read than the one ``bincount`` pass does per posting, but that pass also writes and
scans a score for every chunk of the index, which grows with the index and not with the query. Measured
over 200 real queries of two or more terms, each path timed alone (load 7): at 1M chunks, prune at most
0.1 entries a posting 1,213 ms, at most 0.5 506 ms (every query the faster path: 486 ms); at 100k 52.7
against 51.5 ms; at 10k no query reaches ``PRUNE_MIN_POSTINGS``."""
SEED_BLOCKS = 128
"""Blocks scored first (at least), to find the lower bound ``theta`` (128 was fastest at 100k chunks, of 4 to 512)."""


@dataclass(frozen=True, eq=False)
class PruneArrays:
    """The block entries of the pruned search, derived from the postings (module docstring)."""

    entry_at: npt.NDArray[np.int64]
    """The entries of term t are [entry_at[t], entry_at[t+1]), in ascending block order."""
    entry_block: npt.NDArray[np.uint32]
    """Each entry's block (chunk number // BLOCK)."""
    entry_max: npt.NDArray[np.float64]
    """Each entry's block maximum: the largest weight of its term's postings in its block."""
    entry_start: npt.NDArray[np.int64]
    """Entry e's postings are [entry_start[e], entry_start[e+1]) (one more value than entries)."""



def term_keys(term_blob: np.ndarray, term_starts: np.ndarray) -> npt.NDArray[np.uint64]:
    """Each term's first 8 bytes, big-endian, zero-padded: non-decreasing over terms in byte order."""
    starts = np.asarray(term_starts, dtype=np.int64)
    n = starts.size - 1
    key = np.zeros(max(n, 0), dtype=np.uint64)
    if n <= 0:
        return key
    blob = np.asarray(term_blob, dtype=np.uint8)
    length = np.diff(starts)
    for j in range(8):
        has = length > j
        byte = np.zeros(n, dtype=np.uint64)
        byte[has] = blob[starts[:-1][has] + j]
        key |= byte << np.uint64(8 * (7 - j))
    return key


def query_key(raw: bytes) -> int:
    """``term_keys`` of one term's bytes."""
    return int.from_bytes(raw[:8].ljust(8, b"\0"), "big")


def prune_arrays(
    offsets: np.ndarray,
    post_doc: np.ndarray,
    weights: np.ndarray,
) -> PruneArrays:
    """The block entries of decoded postings (array operations only)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    total = int(offsets[-1]) if offsets.size else 0
    block = np.asarray(post_doc, dtype=np.int64) // BLOCK
    # An entry starts at each term's first posting and wherever the block changes within a term.
    new = np.ones(total, dtype=bool)
    if total:
        new[1:] = block[1:] != block[:-1]
        new[offsets[:-1][offsets[:-1] < total]] = True
    starts = np.flatnonzero(new)
    entry_start = np.append(starts, total).astype(np.int64)
    if starts.size:
        entry_max = np.maximum.reduceat(np.asarray(weights, dtype=np.float64), starts)
    else:
        entry_max = np.zeros(0, dtype=np.float64)
    entry_at = np.searchsorted(starts, offsets).astype(np.int64)
    return PruneArrays(entry_at, block[starts].astype(np.uint32), entry_max, entry_start)


@dataclass
class SearchStats:
    """What one search read: for the benchmark's postings-touched figure."""

    postings: int = 0
    """Postings of the query's terms (what the exhaustive scorer reads)."""
    touched: int = 0
    """Block entries plus postings the search read."""
    pruned: bool = False
    """Whether the pruned path ran (else every posting was scored)."""
    blocks: int = 0
    """Blocks whose chunks were scored exactly, of ``n_blocks``."""
    n_blocks: int = 0


def exhaustive_top_k(
    n_docs: int,
    offsets: np.ndarray,
    post_doc: np.ndarray,
    weights: np.ndarray,
    found: list[tuple[int, int]],
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The reference: every posting of every query term added into dense scores, in query order."""
    scores = np.zeros(n_docs, dtype=np.float64)
    for t, reps in found:
        lo, hi = offsets[t], offsets[t + 1]
        w = weights[lo:hi]
        # Within one term a chunk appears once, so fancy-index add is exact.
        scores[post_doc[lo:hi]] += w * reps if reps != 1 else w
    matched = np.flatnonzero(scores > 0.0)
    return top_k(scores[matched], matched, k)


def dense_scores_top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``top_k`` of the positive entries of dense ``scores``, without a selection over all of them.

    A threshold at a fraction of the best score keeps every entry at or
    above it; once at least k are kept, the k-th best (and every tie with
    it) is among them, so ``top_k`` over them alone is exact. The threshold
    drops until that holds (at worst every positive entry is kept).
    """
    n = scores.size
    if k >= n:
        keep = np.flatnonzero(scores > 0.0)
    else:
        best = float(scores.max()) if n else 0.0
        cut = 0.5 * best
        keep = np.flatnonzero(scores >= cut) if best > 0.0 else np.zeros(0, dtype=np.int64)
        while keep.size < k and cut > 0.0:
            cut = cut / 8.0 if cut > best * 1e-6 else 0.0
            keep = np.flatnonzero(scores >= cut) if cut > 0.0 else np.flatnonzero(scores > 0.0)
    return top_k(scores[keep], keep, k)


def top_k_terms(
    n_docs: int,
    offsets: np.ndarray,
    post_doc: np.ndarray,
    weights: np.ndarray,
    blocks: Callable[[], PruneArrays],
    found: list[tuple[int, int]],
    k: int,
    stats: SearchStats | None = None,
    how: str = "auto",
    built: Callable[[int], PruneArrays | None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``exhaustive_top_k``'s result, pruned where that pays (module docstring).

    ``how``: ``auto`` (prune where the measured costs say it pays), ``pruned``
    (always, for a query of two or more terms), ``dense`` (never). All three
    give the same result. ``blocks`` gives the block entries (built on first use).
    ``built``, when given, stands in for ``blocks`` on the ``auto`` path: the entries if they are built, else
    None (told how many postings are scored instead), and the query scores every posting.
    """
    if not found or k <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    tids = np.array([t for t, _ in found], dtype=np.int64)
    los = offsets[tids].tolist()
    his = offsets[tids + 1].tolist()
    # A term without postings adds nothing (only a hostile file has one).
    spans = [(a, b, r) for a, b, (_, r) in zip(los, his, found) if b > a]
    found = [f for f, a, b in zip(found, los, his) if b > a]
    if not found:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    total = sum(b - a for a, b, _ in spans)
    if stats is not None:
        stats.postings = stats.touched = total
    if len(found) == 1:
        # One term: its postings are the matched chunks, its weights their scores.
        (a, b, r), = spans
        w = weights[a:b]
        return top_k(w * r if r != 1 else w, post_doc[a:b], k)
    if how == "pruned" or (how == "auto" and total >= PRUNE_MIN_POSTINGS):
        pa = blocks() if how == "pruned" or built is None else built(total)
        result = None if pa is None else _block_max(n_docs, post_doc, weights, pa, found, total, k, stats,
                                                     how == "pruned")
        if result is not None:
            return result
    docs = np.concatenate([post_doc[a:b] for a, b, _ in spans])
    w = np.concatenate([weights[a:b] * r if r != 1 else weights[a:b] for a, b, r in spans])
    return dense_scores_top_k(np.bincount(docs, weights=w, minlength=n_docs), k)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(every index of the ranges [starts[i], ends[i]) in order, each range's length)."""
    lengths = ends - starts
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(int(before[-1] + lengths[-1]) if lengths.size else 0), lengths


def _block_max(
    n_docs: int,
    post_doc: np.ndarray,
    weights: np.ndarray,
    pa: PruneArrays,
    found: list[tuple[int, int]],
    total: int,
    k: int,
    stats: SearchStats | None,
    force: bool,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The pruned search, or None where it would not pay (the caller then scores every posting)."""
    at = pa.entry_at
    ea = [int(at[t]) for t, _ in found]
    eb = [int(at[t + 1]) for t, _ in found]
    n_entries = sum(eb) - sum(ea)
    if not force and n_entries > PRUNE_MAX_ENTRIES * total:
        return None
    # The query's entries in query order (term by term), with each term's repetitions.
    entries = np.concatenate([np.arange(a, b) for a, b in zip(ea, eb)])
    reps = np.repeat(np.array([r for _, r in found], dtype=np.float64), np.subtract(eb, ea))
    blocks = pa.entry_block[entries]
    n_blocks = (n_docs + BLOCK - 1) // BLOCK
    bound = np.bincount(blocks, weights=pa.entry_max[entries] * reps, minlength=n_blocks)
    slack = SLACK * float(bound.max())

    # Seed: the blocks with the highest bounds, scored exactly, give theta.
    n_seed = min(n_blocks, max(SEED_BLOCKS, 2 * ((k + BLOCK - 1) // BLOCK)))
    seed = np.argpartition(-bound, n_seed - 1)[:n_seed] if n_seed < n_blocks else np.arange(n_blocks)
    chosen = np.zeros(n_blocks, dtype=bool)
    chosen[seed] = True
    rows, scores, read = _score_blocks(post_doc, weights, pa, entries, reps, blocks, chosen)
    theta = 0.0
    if scores.size >= k:
        theta = float(np.partition(scores, scores.size - k)[scores.size - k])
    # Every other block that could hold a top-k chunk (or a tie with the k-th).
    more = (bound >= theta - slack) & ~chosen
    n_scored = n_seed
    if more.any():
        rows2, scores2, read2 = _score_blocks(post_doc, weights, pa, entries, reps, blocks, more)
        rows, scores = np.concatenate((rows, rows2)), np.concatenate((scores, scores2))
        read += read2
        n_scored += int(more.sum())
    if stats is not None:
        stats.touched = n_entries + read
        stats.pruned = True
        stats.blocks = n_scored
        stats.n_blocks = n_blocks
    return top_k(scores, rows, k)


def _score_blocks(
    post_doc: np.ndarray,
    weights: np.ndarray,
    pa: PruneArrays,
    entries: np.ndarray,
    reps: np.ndarray,
    blocks: np.ndarray,
    chosen: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(chunk numbers, exact scores, postings read) of every matched chunk in the ``chosen`` blocks.

    The chosen entries stay in query order, so ``bincount`` adds each
    chunk's weights term by term in the reference's order.
    """
    pick = np.flatnonzero(chosen[blocks])
    sel = entries[pick]
    pos, lengths = _ranges(pa.entry_start[sel], pa.entry_start[sel + 1])
    docs = post_doc[pos].astype(np.int64)
    w = weights[pos]
    r = reps[pick]
    if np.any(r != 1.0):
        w = w * np.repeat(r, lengths)
    # Number the chosen blocks' chunks compactly: chunk d of chosen block j is j*BLOCK + d % BLOCK.
    rank = np.cumsum(chosen) - 1
    local = rank[docs // BLOCK] * BLOCK + docs % BLOCK
    n_chosen = int(rank[-1]) + 1 if rank.size else 0
    sums = np.bincount(local, weights=w, minlength=n_chosen * BLOCK)
    hit = np.flatnonzero(sums > 0.0)
    first = np.flatnonzero(chosen) * BLOCK
    return first[hit // BLOCK] + hit % BLOCK, sums[hit], int(pos.size)
