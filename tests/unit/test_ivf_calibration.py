"""The IVF default nprobe calibrates itself: recall@10 against flat on deterministic pseudo-queries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.search.flat import flat_search
from ragtui.core.search.ivf import (
    CALIBRATION_K,
    CALIBRATION_TARGET,
    IVFParams,
    build_ivf,
    calibration_queries,
)
from ragtui.core.search.ivf_cache import build_ivf_cached


def clustered(n: int, dim: int, centres: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim))
    v = c[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, dim))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


def measured_recall(index, vectors, queries, nprobe: int) -> float:
    """The plain reference: IVF search against flat search, query by query."""
    found = 0
    for q in queries:
        exact = set(flat_search(vectors, q, CALIBRATION_K)[0].tolist())
        found += len(exact & set(index.search(q, CALIBRATION_K, nprobe=nprobe)[0].tolist()))
    return found / (CALIBRATION_K * len(queries))


def test_calibrated_nprobe_is_the_smallest_that_reaches_the_target():
    v = clustered(6000, 16, 40)
    index = build_ivf(v, "calib-test")
    nprobe, recall = index.calibration
    queries = calibration_queries(v, "calib-test")
    assert index.default_nprobe == nprobe and 1 <= nprobe <= index.nlist
    assert recall >= CALIBRATION_TARGET
    assert abs(measured_recall(index, v, queries, nprobe) - recall) < 1e-9  # agrees with real searches
    floor = -(-2048 * index.nlist // v.shape[0])
    if nprobe > floor:
        assert measured_recall(index, v, queries, nprobe - 1) < CALIBRATION_TARGET
    # A search without nprobe uses it.
    q = queries[0]
    assert index.search(q, 10)[0].tolist() == index.search(q, 10, nprobe=nprobe)[0].tolist()


def test_calibration_is_deterministic_and_seeded_by_the_index_id(tmp_path):
    v = clustered(3000, 8, 20, seed=1)
    a, b = build_ivf(v, "same-id"), build_ivf(v, "same-id")
    assert a.calibration == b.calibration
    assert np.array_equal(calibration_queries(v, "same-id"), calibration_queries(v, "same-id"))
    assert not np.array_equal(calibration_queries(v, "same-id"), calibration_queries(v, "other-id"))
    cached = build_ivf_cached(v, "same-id", None, tmp_path)
    again = build_ivf_cached(v, "same-id", None, tmp_path)
    assert again.from_cache and again.calibration == cached.calibration == a.calibration


def test_a_user_nprobe_is_not_calibrated_and_a_small_index_stays_exact():
    v = clustered(3000, 8, 20, seed=2)
    fixed = build_ivf(v, "fixed", IVFParams(nprobe=3))
    assert fixed.calibration is None and fixed.default_nprobe == 3
    small = build_ivf(clustered(1500, 8, 10), "small")
    assert small.default_nprobe == small.nlist  # at most 2,048 rows: every list, as before


# --- text spans: the pseudo-queries of an index with its embedder ---------------------------------


def tldr_collection():
    """Every 4th tldr page cut in 30-word chunks, and its description line: a real query, written by a person."""
    from tests.conftest import shared_data

    root = shared_data("corpora", "tldr-pages")
    chunks, queries = [], []
    for path in sorted(root.rglob("*.md"))[::4]:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        desc = next((ln[2:] for ln in lines if ln.startswith("> ") and not ln.startswith("> More")), None)
        if desc:
            queries.append(desc)
        words = " ".join(lines).split()
        chunks += [" ".join(words[i : i + 30]) for i in range(0, len(words), 30)]
    return chunks, queries[::3]


def unit(rows) -> np.ndarray:
    v = np.asarray(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_spans_calibrate_so_that_real_queries_reach_the_target():
    from ragtui.core.embedders import make_embedder
    from ragtui.core.search.ivf import CalibrationText, span_texts

    chunks, queries = tldr_collection()
    embedder = make_embedder("wordllama")  # the default embedder, offline
    v, q = unit(embedder.embed(chunks)), unit(embedder.embed(queries))
    texts = CalibrationText(lambda i: chunks[i], embedder.embed, embedder.model)
    index = build_ivf(v, "tldr", texts=texts)
    assert index.calibration_method == "spans" and index.calibration[1] >= CALIBRATION_TARGET
    nprobe = index.default_nprobe
    assert nprobe < index.nlist  # not searched exactly: the recall below is IVF's own
    assert measured_recall(index, v, q, nprobe) >= CALIBRATION_TARGET
    # Deterministic, seeded by the index_id: the same spans and nprobe again, other spans for another id.
    spans = span_texts(v.shape[0], "tldr", texts)
    assert spans == span_texts(v.shape[0], "tldr", texts) != span_texts(v.shape[0], "other", texts)
    assert all(1 <= len(s.split()) <= 4 and any(s in c for c in chunks) for s in spans[:20])
    assert build_ivf(v, "tldr", texts=texts).calibration == index.calibration


def test_span_texts_follow_the_draws():
    from ragtui.core.search.ivf import CALIBRATION_SPAN_WORDS, CalibrationText, span_texts
    from ragtui.core.search.pcg32 import PCG32, fnv1a64

    chunks = ["", "alpha beta gamma delta epsilon", "one", "   ", "w " * 500]
    texts = CalibrationText(lambda i: chunks[i], None, "none")
    got = span_texts(len(chunks), "spans", texts)
    # The plain reference of spec/ivf.md: row, then (for a row with words) length and start.
    rng, want, lo, hi = PCG32(fnv1a64(b"spans"), 56), [], *CALIBRATION_SPAN_WORDS
    for _ in range(4 * len(chunks)):
        if len(want) == len(chunks):
            break
        words = chunks[rng.below(len(chunks))].split()
        if not words:
            continue
        w = lo + rng.below(hi - lo + 1)
        start = rng.below(max(1, len(words) - w + 1))
        want.append(" ".join(words[start : start + w])[:200])
    assert got == want and len(got) == len(chunks)
    assert all(any(s in c for c in chunks) and 1 <= len(s.split()) <= hi for s in got)


# --- the calibration's exact neighbours: one pass over the rows, the bits of the per-group products ---------


def per_group_neighbours(vectors, queries, k):
    """The rule before the one pass: every row scored against one group of ``max(1, _SCORE_BLOCK // n)``
    queries at a time (a pass over all rows per group), each query's best k taken from its row in float64."""
    from ragtui.core.search import ivf
    from ragtui.core.search.flat import top_k

    n = vectors.shape[0]
    step = max(1, ivf._SCORE_BLOCK // n)
    rows, scores = [], []
    for lo in range(0, queries.shape[0], step):
        exact = queries[lo : lo + step] @ np.asarray(vectors, dtype=np.float32).T
        for i in range(exact.shape[0]):
            r, s = top_k(exact[i].astype(np.float64), None, k)
            rows.append(r)
            scores.append(s.astype(np.float32))
    return np.array(rows, dtype=np.int64), np.array(scores, dtype=np.float32)


def per_group_calibration(index, vectors, queries):
    """``IVFIndex._calibrate_on`` as it was: the per-group neighbours, then the recall at every nprobe."""
    from ragtui.core.search.ivf import _MIN_PROBED_ROWS

    n, nlist = vectors.shape[0], index.nlist
    k = min(CALIBRATION_K, n)
    label = np.empty(n, dtype=np.int64)
    label[index.rows] = np.repeat(np.arange(nlist), np.diff(index.offsets))
    hits = np.zeros(nlist + 1, dtype=np.int64)
    truth = per_group_neighbours(vectors, queries, k)[0]
    for i in range(queries.shape[0]):
        rank = np.empty(nlist, dtype=np.int64)
        rank[index.probe(queries[i], nlist)] = np.arange(nlist)
        np.add.at(hits, rank[label[truth[i]]] + 1, 1)
    recall = np.cumsum(hits)[1:] / float(k * queries.shape[0])
    reached = int(np.argmax(recall >= CALIBRATION_TARGET - 1e-12)) + 1
    nprobe = min(nlist, max(reached, -(-_MIN_PROBED_ROWS * nlist // n)))
    return nprobe, float(recall[nprobe - 1])


_TLDR: dict[str, object] = {}


def tldr_spans():
    """Real vectors and real pseudo-queries: tldr chunks and their spans, embedded by the default embedder."""
    if not _TLDR:
        from ragtui.core.embedders import make_embedder
        from ragtui.core.search.ivf import CalibrationText, span_queries

        chunks, _queries = tldr_collection()
        embedder = make_embedder("wordllama")
        v = unit(embedder.embed(chunks))
        texts = CalibrationText(lambda i: chunks[i], embedder.embed, embedder.model)
        _TLDR.update(v=v, q=span_queries(v.shape[0], "tldr", texts), index=build_ivf(v, "tldr", calibrate=False))
    return _TLDR["v"], _TLDR["q"], _TLDR["index"]


@pytest.mark.parametrize(
    ("groups", "queries"),
    [
        (None, 200),  # the index fits in one block: the one product it always was
        (8, 200),  # groups of 8 queries as at a million rows: many blocks of rows against all of them
        (8, 193),  # the last group holds one query, scored alone
        (83, 200),  # groups of 83 as at 100k rows, the last of 34
        (1, 37),  # every query alone, as above 2^22 rows
    ],
)
def test_one_pass_neighbours_equal_the_per_group_products_on_real_vectors(monkeypatch, groups, queries):
    from ragtui.core.search import ivf

    v, q, index = tldr_spans()
    q = q[:queries]
    n = v.shape[0]
    if groups is not None:  # the group size the rule gives at other sizes: _SCORE_BLOCK // n == groups
        monkeypatch.setattr(ivf, "_SCORE_BLOCK", groups * n)
    want_rows, want_scores = per_group_neighbours(v, q, CALIBRATION_K)
    rows, scores = ivf.exact_top(v, q, CALIBRATION_K)
    assert rows.dtype == np.int64 and scores.dtype == np.float32 and rows.shape == (q.shape[0], CALIBRATION_K)
    assert np.array_equal(rows, want_rows)
    assert np.array_equal(scores.view(np.uint32), want_scores.view(np.uint32))  # the same bits
    assert index._calibrate_on(v, q) == per_group_calibration(index, v, q)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 40),
    st.integers(1, 8),
    st.lists(st.integers(1, 12), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
)
def test_keeping_the_best_block_by_block_equals_top_k_over_all_rows(m, width, k, cuts, rnd):
    """Scores from a few values (many ties, +0.0 and -0.0 among them), rows cut into blocks anyhow."""
    from ragtui.core.search.flat import top_k
    from ragtui.core.search.ivf import _keep_best

    n = width
    k = min(k, n)
    values = np.array([-1.5, -0.0, 0.0, 0.25, 1.0, 3.0], dtype=np.float32)
    scores = values[np.array([[rnd.randrange(len(values)) for _ in range(n)] for _ in range(m)])]
    best_s = np.full((m, k), -np.inf, dtype=np.float32)
    best_r = np.full((m, k), n, dtype=np.int64)
    lo = 0
    for cut in cuts + [n]:
        hi = min(n, lo + cut)
        if hi > lo:
            best_s, best_r = _keep_best(best_s, best_r, scores[:, lo:hi], lo)
        lo = hi
    for i in range(m):
        want_rows, want_scores = top_k(scores[i], None, k)
        assert best_r[i].tolist() == want_rows.tolist()
        assert best_s[i].tolist() == want_scores.tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 60),
    st.integers(1, 30),
    st.integers(1, 6),
    st.integers(1, 400),
    st.randoms(use_true_random=False),
)
def test_exact_neighbours_are_every_rows_best_whatever_the_groups_and_blocks(n, m, dim, score_block, rnd):
    """Small integer coordinates: every product is exact in float32, so any BLAS path gives the true scores
    and the neighbours must be the plain top k of every row, ties to the lowest row."""
    from ragtui.core.search import ivf
    from ragtui.core.search.flat import top_k

    v = np.array([[rnd.randrange(-2, 3) for _ in range(dim)] for _ in range(n)], dtype=np.float32)
    q = np.array([[rnd.randrange(-2, 3) for _ in range(dim)] for _ in range(m)], dtype=np.float32)
    k = min(CALIBRATION_K, n)
    saved = ivf._SCORE_BLOCK
    ivf._SCORE_BLOCK = score_block  # groups of 1 to all queries, blocks of a few rows to all of them
    try:
        rows, scores = ivf.exact_top(v, q, k)
    finally:
        ivf._SCORE_BLOCK = saved
    exact = q.astype(np.float64) @ v.astype(np.float64).T
    for i in range(m):
        want_rows, want_scores = top_k(exact[i], None, k)
        assert rows[i].tolist() == want_rows.tolist()
        assert scores[i].astype(np.float64).tolist() == want_scores.tolist()
