"""The IVF default nprobe calibrates itself: recall@10 against flat on deterministic pseudo-queries."""

from __future__ import annotations

import numpy as np

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
