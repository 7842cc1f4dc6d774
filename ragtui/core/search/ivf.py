"""IVF vector retrieval: coarse centroids built at load time, exact scoring inside the probed lists.

The build follows spec/ivf.md (the contract) and spec/pcg32.md (how ragtui implements it)
step by step; what callers may rely on:

- ``build_ivf(vectors, index_id, params)`` is deterministic: the same vectors,
  index_id and resolved parameters give the same centroids and lists, run after
  run. Dot products, k-means++ weights and centroid sums are computed in float64
  (spec/pcg32.md says why), so another conforming reader can disagree only where
  two compared quantities are equal to within ~1e-13, i.e. practically never.
- ``IVFIndex.lists`` hold every row exactly once, each list in ascending row order.
- ``IVFIndex.search`` ranks by descending score, ties by ascending row; its
  scores are ``flat.row_scores`` bits, so with ``nprobe = nlist`` it returns
  exactly what ``flat_search`` returns.
- ``ivf_cache.build_ivf_cached`` returns the same index as ``build_ivf``; the cache
  only saves time, and a missing, stale or damaged cache file means a rebuild.
- The default nprobe is calibrated on short spans of the chunks' own text embedded
  by the index's embedder (``CalibrationText``): a few words, as a typed query is.
  Without an embedder, and no calibration in the cache, on sums of three rows.
- ``ivf_cache.warm_ivf_cache`` builds and stores a generation's entry ahead of any
  reader; a reader of a generation its writer vouched for (``verified.py``) then finds
  it without reading the vectors, and maps the list-ordered vectors from it.

Memory: the index holds the vectors in list order (so a query reads each probed
list contiguously): a memory map of the cache entry when there is one, else a copy;
plus the float64 centroids and the row numbers.

About 600 lines on purpose: the build is spec/ivf.md's steps in their order,
so that it can be read against the contract from top to bottom; the cache is
``ivf_cache``.
"""

from __future__ import annotations

import math
import numbers
import shutil
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.index.arraycache import drop_pages
from ragtui.core.search.flat import as_query, as_vectors, row_scores, top_k, vecdot
from ragtui.core.search.pcg32 import PCG32, fnv1a64, index_rng

if TYPE_CHECKING:
    from ragtui.core.embedders.base import Embedder
    from ragtui.core.index.index_format import IndexData

__all__ = [
    "ALGORITHM_VERSION",
    "BuildStopped",
    "CALIBRATION_K",
    "CALIBRATION_QUERIES",
    "CALIBRATION_SPAN_WORDS",
    "CALIBRATION_TARGET",
    "CalibrationText",
    "IVFIndex",
    "IVFParams",
    "ResolvedIVFParams",
    "build_ivf",
    "calibration_queries",
    "calibration_text",
    "exact_top",
    "nearest_centroid",
    "seed_centroids",
    "span_queries",
    "span_texts",
    "training_rows",
]

#: Bumped whenever a change could alter centroids, lists or the calibrated nprobe; part of the cache keys.
ALGORITHM_VERSION = 2

# Defaults chosen by measurement (spec/pcg32.md, "Defaults"; bench/bench_vectors.py --sweep).
DEFAULT_ITERS = 10
_TRAIN_PER_LIST = 64
_PROBE_FRACTION_DIV = 16  # probe 1/16 of the lists...
_MIN_PROBED_ROWS = 2048  # ...but enough lists to score about this many rows

# Self-calibration of the default nprobe (spec/ivf.md, "Calibrated nprobe").
CALIBRATION_QUERIES = 200
"""Pseudo-queries drawn from the index's own vectors."""
CALIBRATION_TARGET = 0.95
"""The recall@CALIBRATION_K against flat the default nprobe must reach on them."""
CALIBRATION_K = 10
CALIBRATION_SPAN_WORDS = (1, 4)
"""Words per text pseudo-query, fewest and most: a typed query is a few words (spec/ivf.md)."""
_CALIBRATION_STREAM = 55  # sums of rows, without an embedder
_CALIBRATION_MIX = 3  # rows summed per pseudo-query: a real query sits between topics, not on a chunk
_SPAN_STREAM = 56  # spans of chunk text, with the index's embedder
_SPAN_MAX_CHARS = 200  # a "word" of a chunk may be a long token (a hash, a base64 line)

# Rows per block when scoring against all centroids: bounds the float64
# temporaries to a few MiB whatever n is.
_BLOCK_ROWS = 4096
_SCORE_BLOCK = 1 << 23  # float32 scores of the calibration at a time (exact_top)


@dataclass(frozen=True)
class ResolvedIVFParams:
    """Concrete parameters for one n: 1 <= nlist <= n, nlist <= train_cap, 1 <= nprobe <= nlist.

    For n == 0 every field but ``iters`` is 0 (an empty index).
    """

    nlist: int
    train_cap: int
    iters: int
    nprobe: int


@dataclass(frozen=True)
class IVFParams:
    """What a user may set; ``None`` means "derive from n by the default rule".

    Default rule (spec/pcg32.md): nlist = round(sqrt(n)); train_cap = 64 * nlist;
    iters = 10; nprobe = max(ceil(nlist / 16), ceil(2048 * nlist / n)), so a
    query scores about max(n / 16, 2048) rows (an index of at most 2048 rows is
    searched exactly). Clamped: 1 <= nlist <= n, train_cap >= nlist,
    1 <= nprobe <= nlist.
    """

    nlist: int | None = None
    train_cap: int | None = None
    iters: int = DEFAULT_ITERS
    nprobe: int | None = None

    def __post_init__(self) -> None:
        for name, low in (("nlist", 1), ("train_cap", 1), ("nprobe", 1), ("iters", 0)):
            value = getattr(self, name)
            if value is None and name != "iters":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise UsageError(f"IVF {name} must be an integer >= {low}, got {value!r}")
            object.__setattr__(self, name, int(value))  # numpy integers become plain ints

    def resolve(self, n: int) -> ResolvedIVFParams:
        """Fill in defaults for ``n`` rows and clamp: 1 <= nlist <= n, train_cap >= nlist."""
        if n <= 0:
            return ResolvedIVFParams(0, 0, self.iters, 0)
        nlist = self.nlist if self.nlist is not None else round(math.sqrt(n))
        nlist = min(max(nlist, 1), n)
        train_cap = self.train_cap if self.train_cap is not None else _TRAIN_PER_LIST * nlist
        train_cap = max(train_cap, nlist)
        nprobe = self.nprobe
        if nprobe is None:  # integer ceilings: no float rounding in the rule
            nprobe = max(-(-nlist // _PROBE_FRACTION_DIV), -(-_MIN_PROBED_ROWS * nlist // n))
        return ResolvedIVFParams(nlist, train_cap, self.iters, min(nprobe, nlist))


def training_rows(n: int, train_cap: int, rng: PCG32) -> np.ndarray:
    """Return the training rows S (ascending int64): all n rows, or a partial Fisher–Yates draw.

    Consumes ``below`` draws from ``rng`` only when ``n > train_cap``.
    """
    if n <= train_cap:
        return np.arange(n, dtype=np.int64)
    # The permutation of 0..n-1 is kept sparse: only swapped positions are stored.
    perm: dict[int, int] = {}
    for i in range(train_cap):
        j = i + rng.below(n - i)
        vi, vj = perm.get(i, i), perm.get(j, j)
        perm[i], perm[j] = vj, vi
    return np.array(sorted(perm[i] for i in range(train_cap)), dtype=np.int64)


_GATHER_BYTES = 64 << 20
"""Bytes of the vectors a gather spans between two releases of their pages (``gather_ascending``)."""


def gather_ascending(v: np.ndarray, rows: np.ndarray) -> npt.NDArray[np.float32]:
    """``v[rows]`` (float32, contiguous) for ascending ``rows``, read a stretch of ``_GATHER_BYTES`` of ``v`` at a
    time, each stretch's pages let go once its rows are copied: rows drawn all over a mapped file would
    otherwise keep nearly every page of it resident until the end (64k rows of a million touch them all)."""
    out = np.empty((rows.shape[0], v.shape[1]), dtype=np.float32)
    step = max(1, _GATHER_BYTES // max(1, v.shape[1] * 4))
    at = 0
    for lo in range(0, v.shape[0], step):
        hi = min(v.shape[0], lo + step)
        end = int(np.searchsorted(rows, hi, side="left"))
        if end > at:
            out[at:end] = v[rows[at:end]]
        drop_pages(v, hi * v.shape[1], lo * v.shape[1])  # a mapped file: read once here
        at = end
    return out


def _dot_error_bound(dim: int, row_norm: float, centroid_norm: float) -> float:
    """Largest |float32 dot - exact dot| for such norms, the centroid itself rounded to float32.

    gamma_d = d*u/(1 - d*u) bounds any summation order of d float32 products
    (with or without FMA); rounding the float64 centroid to float32 adds u*|x|*|c|.
    """
    u = 2.0**-24
    gamma = dim * u / (1.0 - dim * u)
    return (gamma * (1.0 + u) + u) * row_norm * centroid_norm


def _max_norm(rows: np.ndarray) -> float:
    """An upper bound of the rows' L2 norms (the float32 sum of squares is off by at most gamma_d)."""
    return float(np.sqrt(np.max(vecdot(rows, rows), initial=0.0))) * (1.0 + int(rows.shape[-1]) * 2.0**-23)


def _dot64(rows32: np.ndarray, centroid: np.ndarray) -> np.ndarray:
    """The float64 dot products the build decides on: one ddot per pair, so identical
    inputs give identical bits wherever they sit (ties then resolve by the spec's rule)."""
    return vecdot(np.asarray(rows32, dtype=np.float64), centroid)


def _dot64_rows(rows32: np.ndarray, centroid: np.ndarray, which: np.ndarray | None = None) -> np.ndarray:
    """``_dot64(rows32[which], centroid)`` (``which`` None: every row), ``_BLOCK_ROWS`` rows at a time: the
    same bits (one ddot per pair), but the float64 copy of the rows never exceeds a block (a few MiB)."""
    n = rows32.shape[0] if which is None else which.shape[0]
    out = np.empty(n, dtype=np.float64)
    for lo in range(0, n, _BLOCK_ROWS):
        part = rows32[lo : lo + _BLOCK_ROWS] if which is None else rows32[which[lo : lo + _BLOCK_ROWS]]
        out[lo : lo + part.shape[0]] = _dot64(part, centroid)
    return out


class BuildStopped(Exception):
    """A build's ``should_stop`` said to give up (nobody will read what it was building)."""


def _check(should_stop: Callable[[], bool] | None) -> None:
    if should_stop is not None and should_stop():
        raise BuildStopped


def seed_centroids(train: np.ndarray, nlist: int, rng: PCG32, *,
                   should_stop: Callable[[], bool] | None = None) -> np.ndarray:
    """k-means++ over the float32 rows ``train`` (S's order): return ``nlist`` float64 centroids.

    Each further centroid draws ``uniform()`` first and, only if the total
    weight is 0, ``below(|S|)`` as well (spec/pcg32.md fixes that order).
    Weights are exactly those of a plain float64 pass (``_dot64`` on every row):
    a float32 screen only skips rows it proves cannot get closer. ``should_stop``
    is asked every 64 centroids (``BuildStopped``).
    """
    m, dim = train.shape
    centroids = np.empty((nlist, dim), dtype=np.float64)
    first = rng.below(m)
    centroids[0] = train[first]
    best = _dot64_rows(train, centroids[0])  # max over chosen centroids of x·c, per row of S
    # 2x the bound: a skipped row's exact x·c is then below best by a full bound.
    slack = 2.0 * _dot_error_bound(dim, _max_norm(train), _max_norm(train))
    for c in range(1, nlist):
        weights = np.maximum(2.0 - 2.0 * best, 0.0)
        # np.cumsum is a sequential add in S's order, exactly the spec's running sum.
        running = np.cumsum(weights)
        total = float(running[-1])
        u = rng.uniform() * total
        if total == 0.0:
            chosen = rng.below(m)
        else:
            # side="right": the first running sum strictly greater than u. u < total
            # always holds (uniform() < 1 and total >= 2**-52 when positive).
            chosen = int(np.searchsorted(running, u, side="right"))
        centroids[c] = train[chosen]
        if c + 1 < nlist:
            near = np.flatnonzero(vecdot(train, train[chosen]) >= best - slack)
            best[near] = np.maximum(best[near], _dot64_rows(train, centroids[c], near))
        if c % 64 == 0:
            _check(should_stop)
    return centroids


def nearest_centroid(vectors: np.ndarray, centroids: np.ndarray,
                     should_stop: Callable[[], bool] | None = None) -> np.ndarray:
    """Return, per float32 row, the centroid with the largest x·c (ties: lowest number); ``should_stop`` is asked
    before each block of rows (``BuildStopped``).

    Exactly the labels of a plain float64 pass (``_dot64`` against every
    centroid, first maximum). A float32 matrix product decides a row only when
    its best centroid leads the second by more than twice the proven float32
    error; any closer row is decided in float64.
    """
    n, dim = vectors.shape
    nlist = centroids.shape[0]
    labels = np.zeros(n, dtype=np.int64)
    if nlist == 1:
        return labels
    ct32 = np.ascontiguousarray(centroids.T, dtype=np.float32)
    c_norm = float(np.sqrt(np.max(vecdot(centroids, centroids))))
    for start in range(0, n, _BLOCK_ROWS):
        _check(should_stop)
        block = np.asarray(vectors[start : start + _BLOCK_ROWS], dtype=np.float32)
        margin = 4.0 * _dot_error_bound(dim, _max_norm(block), c_norm)
        scores = block @ ct32
        at = np.arange(block.shape[0])
        first = np.argmax(scores, axis=1)
        lead = scores[at, first].astype(np.float64)
        scores[at, first] = -np.inf
        lead -= scores.max(axis=1)
        labels[start : start + block.shape[0]] = first
        close = np.flatnonzero(~(lead > margin))
        if close.size:
            exact = _dot64(block[close][:, None, :], centroids[None, :, :])
            # argmax returns the first maximum: the lowest centroid on a tie.
            labels[start + close] = np.argmax(exact, axis=1)
        drop_pages(vectors, (start + block.shape[0]) * dim, start * dim)  # a mapped file: read once here
    return labels


def _group(labels: np.ndarray, nlist: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (offsets, rows): CSR of the rows per label, each group in ascending row order."""
    counts = np.bincount(labels, minlength=nlist)
    offsets = np.zeros(nlist + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # A stable sort of the labels keeps rows ascending inside each group.
    return offsets, np.argsort(labels, kind="stable").astype(np.int64)


def _update(train: np.ndarray, labels: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """One Lloyd update: members' L2-normalized float64 sum; no members or a zero sum keeps the old one.

    Each list's members are gathered on their own (the same rows in the same order, so the same sums),
    not the whole training set reordered at once."""
    offsets, order = _group(labels, centroids.shape[0])
    new = centroids.copy()
    total = np.empty(train.shape[1], dtype=np.float64)
    for c in np.flatnonzero(np.diff(offsets)):
        train[order[offsets[c] : offsets[c + 1]]].sum(axis=0, dtype=np.float64, out=total)
        norm = math.sqrt(float(total @ total))
        if norm > 0.0:
            new[c] = total / norm
    return new


def _lloyd(train: np.ndarray, centroids: np.ndarray, iters: int,
           should_stop: Callable[[], bool] | None = None) -> tuple[np.ndarray, int]:
    """Up to ``iters`` Lloyd iterations; return (centroids, updates done)."""
    previous = None
    done = 0
    for _ in range(iters):
        _check(should_stop)
        labels = nearest_centroid(train, centroids, should_stop)
        # Same assignment as last time: the update would reproduce the same centroids.
        if previous is not None and np.array_equal(labels, previous):
            break
        centroids = _update(train, labels, centroids)
        previous = labels
        done += 1
    return centroids, done


class IVFIndex:
    """Centroids and inverted lists over one vectors array; answers ``search``.

    Attributes: ``centroids`` (nlist, dim) float64; ``offsets`` (nlist + 1) and
    ``rows`` (n) int64, the lists in CSR form (list c is
    ``rows[offsets[c]:offsets[c + 1]]``); ``params`` the resolved parameters;
    ``build_seconds`` the wall time of the build (or of the cache load);
    ``iterations`` Lloyd updates run (-1 when loaded from the cache);
    ``from_cache`` whether the lists came from the cache.
    """

    def __init__(self, vectors: np.ndarray, centroids: np.ndarray, offsets: np.ndarray, rows: np.ndarray,
                 params: ResolvedIVFParams, *, build_seconds: float = 0.0, iterations: int = -1,
                 from_cache: bool = False, packed: np.ndarray | None = None, sums: np.ndarray | None = None,
                 entry: Path | None = None) -> None:
        self.centroids, self.offsets, self.rows, self.params = centroids, offsets, rows, params
        self.iterations, self.from_cache = iterations, from_cache
        self.dim = int(vectors.shape[1])
        self._vectors = vectors
        # Rows in list order, so each probed list is one contiguous slice: mapped from a cache
        # entry (``packed``, each list checked against ``sums`` when first probed), else a copy.
        self._packed = packed if packed is not None else np.ascontiguousarray(vectors[rows], dtype=np.float32)
        self._sums = sums
        self._list_state = np.zeros(self.nlist, dtype=np.int8)  # 0 unchecked, 1 sound, -1 damaged
        self._entry = entry
        self.build_seconds = build_seconds
        self.calibration: tuple[int, float] | None = None
        """(nprobe, recall@10 it measured) when the default nprobe was calibrated; None when the
        user set nprobe (or the index is empty)."""
        self.calibration_method: str | None = None
        """What the calibration measured on: "spans" (text spans, the index's embedder) or "sums" (rows summed)."""

    @property
    def default_nprobe(self) -> int:
        """The nprobe a search without one uses: the calibrated one, else ``params.nprobe``."""
        return self.calibration[0] if self.calibration is not None else self.params.nprobe

    def calibrate(self, vectors: np.ndarray, index_id: str, texts: CalibrationText | None = None) -> tuple[int, float]:
        """Set and return the default nprobe: the smallest that reaches ``CALIBRATION_TARGET``
        recall@10 against exact search on the pseudo-queries (``span_queries`` when ``texts`` can
        embed, else ``calibration_queries``), and at least enough lists to score about 2,048 rows
        (so a small index stays exact). Deterministic."""
        if self.nlist == 0:
            self.calibration, self.calibration_method = (0, 1.0), None
            return self.calibration
        if texts is not None and texts.embed is not None:
            queries, method = span_queries(vectors.shape[0], index_id, texts), "spans"
        else:
            queries, method = calibration_queries(vectors, index_id), "sums"
        self.calibration = self._calibrate_on(vectors, queries)
        self.calibration_method = method
        return self.calibration

    def _calibrate_on(self, vectors: np.ndarray, queries: np.ndarray) -> tuple[int, float]:
        n, nlist = int(vectors.shape[0]), self.nlist
        floor = -(-_MIN_PROBED_ROWS * nlist // n)
        if queries.shape[0] == 0:
            return nlist, 1.0  # nothing to measure on: search exactly
        k = min(CALIBRATION_K, n)
        label = np.empty(n, dtype=np.int64)
        label[self.rows] = np.repeat(np.arange(nlist, dtype=np.int64), np.diff(self.offsets))
        hits = np.zeros(nlist + 1, dtype=np.int64)  # true neighbours first reached at each nprobe
        truth = exact_top(vectors, queries, k)[0]
        for i in range(queries.shape[0]):
            order = self.probe(queries[i], nlist)  # lists best first, ties lowest, as search probes them
            rank = np.empty(nlist, dtype=np.int64)
            rank[order] = np.arange(nlist)
            np.add.at(hits, rank[label[truth[i]]] + 1, 1)
        recall = np.cumsum(hits)[1:] / float(k * queries.shape[0])
        reached = int(np.argmax(recall >= CALIBRATION_TARGET - 1e-12)) + 1
        nprobe = min(nlist, max(reached, floor))
        return nprobe, float(recall[nprobe - 1])

    @property
    def nlist(self) -> int:
        """Number of lists (0 for an empty index)."""
        return int(self.centroids.shape[0])

    @property
    def lists(self) -> list[np.ndarray]:
        """The lists as int64 arrays (views into ``rows``), each ascending."""
        return [self.rows[self.offsets[c] : self.offsets[c + 1]] for c in range(self.nlist)]

    def probe(self, query: np.ndarray, nprobe: int) -> np.ndarray:
        """Return the ``nprobe`` best centroid numbers for ``query``, best first, ties lowest."""
        scores = vecdot(self.centroids, np.asarray(query, dtype=np.float64))
        return top_k(scores, None, nprobe)[0]

    def resolve_nprobe(self, nprobe: int | None) -> int:
        """The lists a search probes: ``nprobe``, or ``default_nprobe`` when None (UsageError below 1).

        Every IVF search path (plain, filtered, int8) asks here, so none probes another number of lists.
        """
        if nprobe is None:
            return self.default_nprobe
        if nprobe < 1:
            raise UsageError(f"nprobe must be >= 1, got {nprobe}")
        return nprobe

    def probed_rows(self, query: np.ndarray, nprobe: int) -> np.ndarray:
        """The rows of the ``nprobe`` lists ``probe`` picks, list by list."""
        return np.concatenate([self.rows[self.offsets[c] : self.offsets[c + 1]] for c in self.probe(query, nprobe)])

    def _list_vectors(self, c: int) -> np.ndarray:
        """List ``c``'s vectors: its slice of the list-ordered copy, once that slice is known sound.

        A slice mapped from the cache is checked against its CRC-32 the first time it is probed
        (so a first query reads only the lists it probes); a damaged one is never used: its rows
        are gathered from the index's vectors instead (the row numbers passed the entry's digest),
        and the entry is removed so that the next reader rebuilds it.
        """
        a, b = int(self.offsets[c]), int(self.offsets[c + 1])
        if self._sums is None or self._list_state[c] == 1:
            return self._packed[a:b]
        if self._list_state[c] == 0:
            sound = zlib.crc32(np.ascontiguousarray(self._packed[a:b]).data) == int(self._sums[c])
            self._list_state[c] = 1 if sound else -1
            if not sound and self._entry is not None:
                shutil.rmtree(self._entry, ignore_errors=True)
            if sound:
                return self._packed[a:b]
        return np.asarray(self._vectors[self.rows[a:b]], dtype=np.float32)

    def search(self, query: np.ndarray, k: int, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Return the best ``k`` rows of the ``nprobe`` probed lists as (rows int64, scores float32).

        Descending score, ties ascending row; fewer than k results when the
        probed lists hold fewer rows. ``nprobe`` None uses ``default_nprobe``;
        larger than nlist probes every list. Raises UsageError for k < 0,
        nprobe < 1, or a query of the wrong length or not finite.
        """
        q = as_query(query, self.dim)
        if k < 0:
            raise UsageError(f"k must be >= 0, got {k}")
        nprobe = self.resolve_nprobe(nprobe)
        if self.nlist == 0 or k == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        probed = [int(c) for c in self.probe(q, nprobe)]
        scores = np.concatenate([row_scores(self._list_vectors(c), q) for c in probed])
        rows = np.concatenate([self.rows[self.offsets[c] : self.offsets[c + 1]] for c in probed])
        return top_k(scores, rows, k)


@dataclass(frozen=True)
class CalibrationText:
    """What text pseudo-queries are made of: the chunks' text and the index's own embedder.

    ``chunk_text(i)`` is row i's text; ``embed`` embeds query texts as the index's
    searches do (``embed_query`` where the model has one), None when no embedder is at
    hand (a calibration stored in the cache for the same spans is still found); ``model``
    is the embedder's model, which must be the index's ``embedding_model``.
    """

    chunk_text: Callable[[int], str]
    embed: Callable[[Sequence[str]], np.ndarray] | None
    model: str


def calibration_text(data: IndexData, embedder: Embedder | None) -> CalibrationText:
    """The ``CalibrationText`` of an open index; ``embedder`` must be the index's model (else it is not used)."""
    meta = data.meta
    embed = None
    if embedder is not None and embedder.model == meta.embedding_model and embedder.dim == meta.dim:
        embed = getattr(embedder, "embed_query", None) or embedder.embed
    return CalibrationText(lambda i: data.records[i].text, embed, meta.embedding_model)


def span_texts(n: int, index_id: str, texts: CalibrationText) -> list[str]:
    """The text pseudo-queries: ``CALIBRATION_QUERIES`` (at most n) spans of a few words of chunk text.

    With ``PCG32(fnv1a64(index_id), 56)``, query after query: a row ``below(n)``,
    a length ``w = lo + below(hi - lo + 1)`` words (``CALIBRATION_SPAN_WORDS``), a start
    ``below(max(1, words - w + 1))``; the span is those whitespace-separated words joined by
    one space, cut at 200 characters. A row without a word draws no length and gives no
    query; at most ``4 m`` rows are drawn.
    """
    m = min(CALIBRATION_QUERIES, n)
    lo, hi = CALIBRATION_SPAN_WORDS
    rng = PCG32(fnv1a64(index_id.encode("utf-8")), _SPAN_STREAM)
    out: list[str] = []
    for _ in range(4 * m):
        if len(out) == m:
            break
        words = texts.chunk_text(rng.below(n)).split()
        if not words:
            continue
        w = lo + rng.below(hi - lo + 1)
        start = rng.below(max(1, len(words) - w + 1))
        out.append(" ".join(words[start : start + w])[:_SPAN_MAX_CHARS])
    return out


def span_queries(n: int, index_id: str, texts: CalibrationText, spans: list[str] | None = None
                 ) -> npt.NDArray[np.float32]:
    """``span_texts`` embedded by ``texts.embed`` as unit float32 rows (a zero or non-finite one dropped)."""
    if texts.embed is None:
        raise ValueError("span_queries needs an embedder")
    spans = span_texts(n, index_id, texts) if spans is None else spans
    if not spans:
        return np.zeros((0, 0), dtype=np.float32)
    q = np.asarray(texts.embed(spans), dtype=np.float64)
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(q, axis=1, keepdims=True)
        keep = np.isfinite(norms[:, 0]) & (norms[:, 0] > 0)
        out: npt.NDArray[np.float32] = (q[keep] / norms[keep]).astype(np.float32)
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int
              ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Each query's ``k`` best rows (1 <= k <= n) and their scores, (m, k) each: descending score, ties lowest row.

    The calibration's exact neighbours, in one pass over the rows: a block of rows is scored against
    every query at once and each query keeps its best ``k`` so far (``_keep_best``). The scores are the
    float32 matrix products (sgemm) the calibration has always ranked by, when it scored every row
    against one group of ``max(1, _SCORE_BLOCK // n)`` queries at a time (25 passes over vectors.f32 at
    a million rows), and they have the same bits: sgemm accumulates a query-row product along dim
    alone, however its operands are cut into panels and among threads. What rounds otherwise is
    another path: a matrix-vector product (a group of one query) or OpenBLAS's small-matrix kernel
    (under about 10^6 multiply-adds). So an index that fits in one block (``_SCORE_BLOCK // m`` rows)
    is scored in the one product it always was, larger ones in near-equal blocks of at least half
    that, and a query that was a group of its own (the last group, sometimes, from about 42,000 rows
    on; every query above 2^22 rows) is still scored alone against all rows.
    tests/unit/test_ivf_calibration.py compares both rules on real vectors.

    Memory: at most ``_SCORE_BLOCK`` float32 scores (32 MiB), and one query's candidates at a time.
    """
    v = np.asarray(vectors, dtype=np.float32)
    q = np.asarray(queries, dtype=np.float32)
    n, m = int(v.shape[0]), int(q.shape[0])
    best_r = np.full((m, k), n, dtype=np.int64)
    best_s = np.full((m, k), -np.inf, dtype=np.float32)
    step = max(1, _SCORE_BLOCK // n)
    alone = [lo for lo in range(0, m, step) if min(m, lo + step) - lo == 1]
    for i in alone:  # a matrix-vector product: its rounding is its own, so it is made as it always was
        best_r[i], best_s[i] = top_k((q[i : i + 1] @ v.T)[0], None, k)
    grouped = np.setdiff1d(np.arange(m), np.array(alone, dtype=np.int64))
    if grouped.size == 0:
        return best_r, best_s
    qg = np.ascontiguousarray(q[grouped])
    blocks = -(-n // max(1, _SCORE_BLOCK // grouped.size))  # near-equal blocks: none of a handful of rows
    gr, gs = best_r[grouped], best_s[grouped]
    dim = int(v.shape[1])
    for b in range(blocks):
        lo, hi = b * n // blocks, (b + 1) * n // blocks
        gs, gr = _keep_best(gs, gr, qg @ v[lo:hi].T, lo)
        drop_pages(v, hi * dim, lo * dim)  # a mapped file: read once here
    best_r[grouped], best_s[grouped] = gr, gs
    return best_r, best_s


def _keep_best(best_s: np.ndarray, best_r: np.ndarray, scores: np.ndarray, lo: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Merge the (m, b) ``scores`` of rows ``lo .. lo + b - 1`` into each query's best k so far ((m, k) scores
    and rows, best first, every row below ``lo``; -inf pads a query that has fewer than k yet).

    Returns the best k of both by descending score, ties lowest row: what ``top_k`` gives over all of them.
    A row of the block ranks after an equal score already kept (its row is higher), so only scores above
    the k-th kept one are candidates; a query with more than k of them keeps those at or above the k-th
    best of them, and the candidates are sorted with what is kept.
    """
    m, k = best_s.shape
    floor = best_s[:, -1]
    some = np.flatnonzero(scores.max(axis=1) > floor)  # after the first blocks, few queries have any
    if some.size == 0:
        return best_s, best_r
    picked_q, picked_c = [], []
    for i in some:
        col = np.flatnonzero(scores[i] > floor[i])
        if col.size > k:
            above = scores[i, col]
            col = col[above >= np.partition(above, col.size - k)[col.size - k]]
        picked_q.append(np.full(col.size, i, dtype=np.int64))
        picked_c.append(col)
    qi, col = np.concatenate(picked_q), np.concatenate(picked_c)
    who = np.concatenate([np.repeat(np.arange(m), k), qi])
    s = np.concatenate([best_s.ravel(), scores[qi, col]])
    r = np.concatenate([best_r.ravel(), col.astype(np.int64) + lo])
    order = np.lexsort((r, -s, who))  # by query, then descending score, then ascending row
    first = np.searchsorted(who[order], np.arange(m))  # every query has k kept entries at least
    take = order[(first[:, None] + np.arange(k)).ravel()]
    return s[take].reshape(m, k), r[take].reshape(m, k)


def calibration_queries(vectors: np.ndarray, index_id: str) -> npt.NDArray[np.float32]:
    """The pseudo-queries of the nprobe calibration: ``CALIBRATION_QUERIES`` (at most n) unit
    vectors, each the normalised sum of 3 rows drawn with ``PCG32(fnv1a64(index_id), 55)``'s
    ``below(n)``, query after query, row after row (spec/ivf.md)."""
    n = int(vectors.shape[0])
    m = min(CALIBRATION_QUERIES, n)
    rng = PCG32(fnv1a64(index_id.encode("utf-8")), _CALIBRATION_STREAM)
    draws = np.array([rng.below(n) for _ in range(_CALIBRATION_MIX * m)], dtype=np.int64).reshape(m, _CALIBRATION_MIX)
    q = np.asarray(vectors, dtype=np.float32)[draws].astype(np.float64).sum(axis=1)
    norms = np.linalg.norm(q, axis=1, keepdims=True)
    q = np.where(norms > 0, q / np.where(norms > 0, norms, 1.0), 0.0)
    return q.astype(np.float32)


def build_ivf(vectors: np.ndarray, index_id: str, params: IVFParams | None = None, *,
              texts: CalibrationText | None = None, calibrate: bool = True) -> IVFIndex:
    """Build the IVF index of ``vectors`` (n, dim) float32 unit rows, seeded by ``index_id``.

    Follows spec/pcg32.md: training rows, k-means++ seeding, Lloyd, lists; then,
    unless the user set nprobe (or ``calibrate`` is False), the nprobe calibration on
    ``texts`` (``IVFIndex.calibrate``). ``vectors`` may be a read-only memmap; it must be finite.
    """
    started = time.perf_counter()
    v = as_vectors(vectors)
    p = (params or IVFParams()).resolve(v.shape[0])
    if p.nlist == 0:
        empty = np.empty(0, dtype=np.int64)
        return IVFIndex(v, np.empty((0, v.shape[1])), np.zeros(1, np.int64), empty, p, iterations=0)
    centroids, offsets, rows, iterations = _lists(v, index_id, p)
    index = IVFIndex(v, centroids, offsets, rows, p, iterations=iterations)
    if calibrate and (params is None or params.nprobe is None):
        index.calibrate(v, index_id, texts)
    index.build_seconds = time.perf_counter() - started
    return index


def _lists(v: np.ndarray, index_id: str, p: ResolvedIVFParams, should_stop: Callable[[], bool] | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Sections 3.1-3.4 of spec/ivf.md for n >= 1: (centroids, offsets, rows, Lloyd updates).

    Memory: the training rows (float32, ``train_cap`` of them) and the row labels (8 bytes a row), plus
    blocks of ``_BLOCK_ROWS`` rows; ``should_stop`` is asked between steps (``BuildStopped``)."""
    rng = index_rng(index_id)
    train_rows = training_rows(v.shape[0], p.train_cap, rng)
    train = gather_ascending(v, train_rows)
    centroids = seed_centroids(train, p.nlist, rng, should_stop=should_stop)
    centroids, iterations = _lloyd(train, centroids, p.iters, should_stop)
    del train
    _check(should_stop)
    offsets, rows = _group(nearest_centroid(v, centroids, should_stop), p.nlist)
    return centroids, offsets, rows, iterations
