"""IVF: the fast numpy build against a deliberately plain pure-Python reference of spec/ivf.md."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.errors import UsageError
from ragtui.core.search.flat import flat_search, row_scores
from ragtui.core.search.ivf import (
    IVFIndex,
    IVFParams,
    ResolvedIVFParams,
    _update,
    build_ivf,
    nearest_centroid,
    seed_centroids,
    training_rows,
)
from ragtui.core.search.ivf_cache import build_ivf_cached
from ragtui.core.search.pcg32 import index_rng

# --- the plain reference: lists of Python floats, one step of the spec at a time ---------


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _nearest(x: list[float], centroids: list[list[float]]) -> int:
    scores = [_dot(x, c) for c in centroids]
    return scores.index(max(scores))  # the first maximum: the lowest centroid


def reference_build(
    vectors: np.ndarray, index_id: str, nlist: int, train_cap: int, iters: int
) -> tuple[list[list[float]], list[list[int]]]:
    rng = index_rng(index_id)
    rows = [[float(v) for v in r] for r in vectors]
    n = len(rows)
    # 1. Training rows: a full Fisher-Yates array, the first train_cap positions.
    if n <= train_cap:
        s = list(range(n))
    else:
        perm = list(range(n))
        for i in range(train_cap):
            j = i + rng.below(n - i)
            perm[i], perm[j] = perm[j], perm[i]
        s = sorted(perm[:train_cap])
    train = [rows[i] for i in s]
    # 2. k-means++, the weights recomputed from scratch every time.
    centroids = [train[rng.below(len(train))]]
    while len(centroids) < nlist:
        weights = [max(0.0, 2.0 - 2.0 * max(_dot(x, c) for c in centroids)) for x in train]
        running, total = [], 0.0
        for w in weights:
            total += w
            running.append(total)
        u = rng.uniform() * total
        if total == 0.0:
            centroids.append(train[rng.below(len(train))])
        else:
            centroids.append(train[next(i for i, r in enumerate(running) if r > u)])
    # 3. Lloyd, literally: assign, update, stop when nothing changed.
    previous = None
    for _ in range(iters):
        assign = [_nearest(x, centroids) for x in train]
        updated = []
        for c in range(nlist):
            members = [x for x, a in zip(train, assign, strict=True) if a == c]
            total_vec = [sum(col) for col in zip(*members, strict=True)] if members else []
            norm = math.sqrt(sum(v * v for v in total_vec))
            updated.append([v / norm for v in total_vec] if members and norm > 0 else centroids[c])
        centroids = updated
        if assign == previous:
            break
        previous = assign
    # 4. Lists.
    lists: list[list[int]] = [[] for _ in range(nlist)]
    for r, x in enumerate(rows):
        lists[_nearest(x, centroids)].append(r)
    return centroids, lists


# --- data -----------------------------------------------------------------------------


def clustered(rng: np.random.Generator, n: int, d: int, n_centres: int = 6, noise: float = 0.6) -> np.ndarray:
    centres = rng.standard_normal((n_centres, d))
    x = centres[rng.integers(0, n_centres, n)] + noise * rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def assert_sound(index: IVFIndex, n: int) -> None:
    lists = index.lists
    assert len(lists) == index.params.nlist
    assert sorted(np.concatenate(lists).tolist()) == list(range(n))
    for rows in lists:
        assert rows.dtype == np.int64
        assert (np.diff(rows) > 0).all()


def assert_matches_reference(vectors: np.ndarray, index_id: str, params: IVFParams) -> IVFIndex:
    index = build_ivf(vectors, index_id, params)
    p = index.params
    ref_centroids, ref_lists = reference_build(vectors, index_id, p.nlist, p.train_cap, p.iters)
    np.testing.assert_allclose(index.centroids, np.array(ref_centroids), rtol=0, atol=1e-12)
    assert [r.tolist() for r in index.lists] == ref_lists
    assert_sound(index, len(vectors))
    return index


# --- the build against the reference -----------------------------------------------------


@pytest.mark.parametrize(
    ("index_id", "params"),
    [
        ("docs", IVFParams(nlist=10, train_cap=100, iters=10)),  # sampled training rows
        ("notes", IVFParams(nlist=10, train_cap=500, iters=10)),  # every row trains
        ("docs", IVFParams(nlist=7, train_cap=60, iters=0)),  # seeding only
        ("wiki", IVFParams(nlist=16, train_cap=150, iters=3)),  # stops at the cap
        ("docs", IVFParams(nlist=1, train_cap=50, iters=5)),
        ("döcs", IVFParams()),  # the default rule
    ],
)
def test_fast_build_equals_the_reference(index_id: str, params: IVFParams) -> None:
    vectors = clustered(np.random.default_rng(11), 200, 8)
    assert_matches_reference(vectors, index_id, params)


def test_early_stop_matches_the_reference() -> None:
    vectors = clustered(np.random.default_rng(12), 200, 8, n_centres=4, noise=0.05)
    index = assert_matches_reference(vectors, "docs", IVFParams(nlist=4, train_cap=200, iters=50))
    assert index.iterations < 50


def test_every_row_its_own_list() -> None:
    vectors = clustered(np.random.default_rng(13), 30, 8)
    assert_matches_reference(vectors, "docs", IVFParams(nlist=30, iters=10))


def test_duplicate_rows_give_empty_lists_like_the_reference() -> None:
    rng = np.random.default_rng(14)
    base = clustered(rng, 5, 8)
    vectors = base[rng.integers(0, 5, 60)]
    index = assert_matches_reference(vectors, "docs", IVFParams(nlist=8, iters=10))
    assert any(len(rows) == 0 for rows in index.lists)  # zero-member clusters stay


def test_single_row() -> None:
    vectors = clustered(np.random.default_rng(15), 1, 8)
    index = assert_matches_reference(vectors, "docs", IVFParams())
    assert index.params == ResolvedIVFParams(nlist=1, train_cap=64, iters=10, nprobe=1)
    rows, scores = index.search(vectors[0], 5)
    assert rows.tolist() == [0] and scores.shape == (1,)


def test_builds_are_deterministic() -> None:
    vectors = clustered(np.random.default_rng(16), 3000, 32, n_centres=40)
    params = IVFParams(nlist=50, train_cap=1000)
    a, b = build_ivf(vectors, "docs", params), build_ivf(vectors.copy(), "docs", params)
    assert np.array_equal(a.centroids, b.centroids)
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.rows, b.rows)
    other = build_ivf(vectors, "other", params)
    assert not np.array_equal(a.centroids, other.centroids)  # the seed is the index_id


# --- search ----------------------------------------------------------------------------


def test_nprobe_all_lists_is_flat_exactly() -> None:
    rng = np.random.default_rng(17)
    vectors = clustered(rng, 2000, 64, n_centres=20)
    vectors[1500:1600] = vectors[100:200]  # exact ties: the lower row must win
    index = build_ivf(vectors, "docs", IVFParams(nlist=30))
    for q in np.vstack([clustered(rng, 10, 64, n_centres=20), vectors[150:152]]):
        for k in (1, 10, 100, 2000, 2500):
            rows, scores = index.search(q, k, nprobe=30)
            flat_rows, flat_scores = flat_search(vectors, q, k)
            assert rows.tolist() == flat_rows.tolist()
            assert np.array_equal(scores, flat_scores)


def test_search_ranks_the_probed_lists_exactly() -> None:
    rng = np.random.default_rng(18)
    vectors = clustered(rng, 1000, 16, n_centres=10)
    index = build_ivf(vectors, "docs", IVFParams(nlist=12))
    q = clustered(rng, 1, 16, n_centres=10)[0]
    c_scores = index.centroids @ q.astype(np.float64)
    probed = sorted(range(12), key=lambda c: (-c_scores[c], c))[:3]
    assert index.probe(q, 3).tolist() == probed
    candidates = np.concatenate([index.lists[c] for c in probed])
    scores_of = dict(zip(candidates.tolist(), row_scores(vectors[candidates], q).tolist(), strict=True))
    expected = sorted(candidates.tolist(), key=lambda r: (-scores_of[r], r))
    rows, scores = index.search(q, 1000, nprobe=3)
    assert rows.tolist() == expected
    np.testing.assert_allclose(scores, vectors[rows] @ q, rtol=0, atol=1e-6)


def test_search_edge_cases(tmp_path: Path) -> None:
    rng = np.random.default_rng(19)
    vectors = clustered(rng, 300, 8)
    path = tmp_path / "vectors.f32"
    vectors.tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=(300, 8))
    index = build_ivf(mm, "docs", IVFParams(nlist=10, nprobe=2))
    assert np.array_equal(index.centroids, build_ivf(vectors, "docs", IVFParams(nlist=10)).centroids)
    q = vectors[3]
    rows, _ = index.search(q, 1000)
    assert 0 < len(rows) < 300  # only the two probed lists
    assert index.search(q, 0)[0].shape == (0,)
    for bad in (lambda: index.search(q, -1), lambda: index.search(q, 5, nprobe=0),
                lambda: index.search(q[:5], 5), lambda: index.search(np.full(8, np.inf), 5)):
        with pytest.raises(UsageError):
            bad()
    empty = build_ivf(np.empty((0, 8), np.float32), "docs")
    assert empty.nlist == 0 and empty.search(q, 5)[0].shape == (0,)


# --- the steps on their own ---------------------------------------------------------------


def test_params_resolve_and_clamp() -> None:
    assert IVFParams().resolve(0) == ResolvedIVFParams(0, 0, 10, 0)
    # The default rule of spec/pcg32.md at a few sizes.
    assert IVFParams().resolve(100_000) == ResolvedIVFParams(316, 64 * 316, 10, 20)
    assert IVFParams().resolve(10_000) == ResolvedIVFParams(100, 6400, 10, 21)
    assert IVFParams().resolve(1_000_000) == ResolvedIVFParams(1000, 64_000, 10, 63)
    assert IVFParams().resolve(2048).nprobe == 45 == IVFParams().resolve(2048).nlist  # exact
    assert IVFParams().resolve(1) == ResolvedIVFParams(1, 64, 10, 1)
    # Clamps: nlist <= n, train_cap >= nlist, nprobe <= nlist.
    assert IVFParams(nlist=50).resolve(10) == ResolvedIVFParams(10, 640, 10, 10)
    assert IVFParams(nlist=20, train_cap=5, nprobe=99, iters=3).resolve(1000) == ResolvedIVFParams(20, 20, 3, 20)
    assert IVFParams(nlist=np.int64(7)).resolve(100).nlist == 7
    for bad in ({"nlist": 0}, {"train_cap": -1}, {"nprobe": 0}, {"iters": -1}, {"nlist": 2.5},
                {"iters": None}, {"nprobe": True}):
        with pytest.raises(UsageError):
            IVFParams(**bad)


def test_training_rows() -> None:
    rng, fresh = index_rng("docs"), index_rng("docs")
    assert training_rows(50, 50, rng).tolist() == list(range(50))
    assert rng.next_u32() == fresh.next_u32()  # n <= cap draws nothing
    rows = training_rows(100_000, 500, index_rng("docs"))
    assert len(rows) == 500 and (np.diff(rows) > 0).all() and rows[-1] < 100_000


def test_zero_weight_draws_uniform_then_below() -> None:
    train = np.zeros((6, 4), dtype=np.float32)
    train[:, 0] = 1.0  # every row is e1: x·x = 1 exactly, so every weight is 0
    rng, expected = index_rng("docs"), index_rng("docs")
    centroids = seed_centroids(train, 3, rng)
    expected.below(6)
    for _ in range(2):
        expected.uniform()
        expected.below(6)
    assert rng.next_u32() == expected.next_u32()
    assert (centroids == train[0]).all()


def test_nearest_centroid_equals_plain_float64() -> None:
    rng = np.random.default_rng(20)
    vectors = clustered(rng, 5000, 32, n_centres=30)
    centroids = clustered(rng, 40, 32, n_centres=30).astype(np.float64)
    centroids[25] = centroids[7]  # an exact tie: the lower number wins
    centroids[30] = vectors[0]
    plain = np.argmax(np.vecdot(vectors.astype(np.float64)[:, None, :], centroids[None]), axis=1)
    labels = nearest_centroid(vectors, centroids)
    assert np.array_equal(labels, plain)
    assert 25 not in labels.tolist()


def test_update_keeps_centroids_without_members_or_with_zero_sum() -> None:
    train = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, 0.6, 0.8]], dtype=np.float32)
    centroids = np.eye(3)
    new = _update(train, np.array([0, 0, 1, 1]), centroids)
    assert np.array_equal(new[0], centroids[0])  # members sum to zero
    np.testing.assert_allclose(new[1], np.array([0, 1.6, 0.8]) / math.hypot(1.6, 0.8))
    assert np.array_equal(new[2], centroids[2])  # no members


# --- cache ------------------------------------------------------------------------------


def test_cache_saves_time_never_changes_a_result(tmp_path: Path) -> None:
    rng = np.random.default_rng(21)
    vectors = clustered(rng, 800, 16)
    params = IVFParams(nlist=20)
    built = build_ivf(vectors, "docs", params)

    def cached(v=vectors, index_id="docs", p=params, material="meta-1") -> IVFIndex:
        index = build_ivf_cached(v, index_id, p, tmp_path, material)
        if v is vectors and index_id == "docs" and p == params:
            assert np.array_equal(index.centroids, built.centroids)
            assert np.array_equal(index.rows, built.rows) and np.array_equal(index.offsets, built.offsets)
            assert index.search(v[5], 10)[0].tolist() == built.search(v[5], 10)[0].tolist()
        return index

    assert not cached().from_cache
    assert cached().from_cache
    (entry,) = list(tmp_path.glob("ivf-*"))
    # Damage: bytes flipped in place (still readable), a truncated array, a lost marker.
    target = entry / "rows.npy"
    good = target.read_bytes()
    damages = [
        ("rows.npy", good[:-8] + bytes(8)),
        ("rows.npy", good[: len(good) // 2]),
        ("centroids.npy", (entry / "centroids.npy").read_bytes()[:-1] + b"x"),
    ]
    for name, damaged in damages:
        assert cached().from_cache
        (entry / name).write_bytes(damaged)
        assert not cached().from_cache  # rebuilt, same result (checked in cached)
    assert cached().from_cache  # and the entry was replaced by a sound one
    (entry / "complete").unlink()
    assert not cached().from_cache
    assert cached().from_cache
    # Changed vectors, index_id, params or caller material miss the entry.
    changed = vectors.copy()
    changed[0] = changed[1]
    assert not cached(v=changed).from_cache
    assert not cached(index_id="docs2").from_cache
    assert not cached(p=IVFParams(nlist=21)).from_cache
    assert not cached(material="meta-2").from_cache
    assert len(list(tmp_path.glob("ivf-docs-*"))) == 2  # arraycache keeps the newest two per index_id


def test_cache_off_or_unwritable_still_builds(tmp_path: Path) -> None:
    vectors = clustered(np.random.default_rng(22), 100, 8)
    a = build_ivf_cached(vectors, "docs", IVFParams(nlist=5), None, "")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    b = build_ivf_cached(vectors, "docs", IVFParams(nlist=5), blocker / "cache", "")
    assert np.array_equal(a.rows, b.rows) and not b.from_cache


def test_the_assignment_of_every_row_stops_between_blocks_when_asked():
    """The lists' last step (every row to its nearest centroid: seconds at a million rows) asks ``should_stop``
    before each block, so a build nobody wants any more stops within a block's time."""
    from ragtui.core.search import ivf

    rng = np.random.default_rng(1)
    rows = rng.standard_normal((3 * ivf._BLOCK_ROWS + 5, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    centroids = rows[:16].astype(np.float64)
    asked: list[int] = []

    def never() -> bool:
        asked.append(1)
        return False

    labels = ivf.nearest_centroid(rows, centroids, should_stop=never)
    assert len(asked) == 4 and np.array_equal(labels, ivf.nearest_centroid(rows, centroids))
    asked.clear()

    def after_two() -> bool:
        asked.append(1)
        return len(asked) > 2

    with pytest.raises(ivf.BuildStopped):
        ivf.nearest_centroid(rows, centroids, should_stop=after_two)
    assert len(asked) == 3
