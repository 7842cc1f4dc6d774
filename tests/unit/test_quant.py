"""int8 vectors in memory: the per-row-scaled encoding, and an exact search (flat's answers, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.export.writer import encode_vectors
from ragtui.core.search.flat import flat_search
from ragtui.core.search.ivf import IVFParams, build_ivf
from ragtui.core.search.quant import QuantizedVectors, dequantize, ivf_search_i8, quantize_rows
from ragtui.core.search.retriever import Retriever
from tests.unit.indexgen import build


def unit(rng, n, dim):
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def clustered(rng, n, dim, centres=20, noise=0.3):
    c = unit(rng, centres, dim)
    v = c[rng.integers(0, centres, n)] + rng.standard_normal((n, dim)).astype(np.float32) * (noise / np.sqrt(dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def same(a, b):
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))


def test_encoding_is_skvx_i8():
    rng = np.random.default_rng(1)
    v = unit(rng, 50, 24)
    scales, codes = quantize_rows(v)
    assert scales.dtype == np.float32 and codes.dtype == np.int8
    assert np.array_equal(np.abs(codes).max(axis=1), np.full(50, 127))  # the largest value maps to ±127
    assert np.abs(dequantize(scales, codes) - v).max() <= scales.max() / 2 + 1e-7
    raw = encode_vectors(v, "i8")
    assert raw[:4] == b"SKVX" and raw[16 : 16 + 200] == scales.astype("<f4").tobytes()
    assert raw[16 + 200 :] == codes.tobytes()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dim", [8, 64, 257])
def test_flat_answers_equal_on_random_data(seed, dim):
    rng = np.random.default_rng(seed)
    v = clustered(rng, 3000, dim) if seed % 2 else unit(rng, 3000, dim)
    quant = QuantizedVectors.build(v)
    queries = np.vstack([unit(rng, 10, dim), v[:5], clustered(rng, 5, dim)])
    for q in queries:
        for k in (1, 10, 100):
            assert same(quant.search(q, k), flat_search(v, q, k))


def test_ties_and_duplicate_rows_keep_the_tie_rule():
    rng = np.random.default_rng(3)
    base = unit(rng, 40, 16)
    v = np.vstack([base, base, base[:10]])  # every row at least twice: ties at every k
    quant = QuantizedVectors.build(v)
    for q in base[:10]:
        for k in (1, 2, 3, 7, 50):
            assert same(quant.search(q, k), flat_search(v, q, k))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(1, 40), st.integers(1, 30), st.integers(0, 2**31))
def test_property_equal_to_flat(n, dim, k, seed):
    rng = np.random.default_rng(seed)
    v = unit(rng, n, dim)
    q = unit(rng, 1, dim)[0] * np.float32(rng.uniform(0.5, 2.0))  # not only unit queries
    assert same(QuantizedVectors.build(v).search(q, k), flat_search(v, q, k))


def test_ivf_answers_equal():
    rng = np.random.default_rng(5)
    v = clustered(rng, 4000, 32, centres=40)
    ivf = build_ivf(v, "t", IVFParams(nlist=16, nprobe=3))
    quant = QuantizedVectors.build(v)
    for q in np.vstack([clustered(rng, 20, 32, centres=40), unit(rng, 5, 32)]):
        for nprobe in (1, 3, 16):
            assert same(ivf_search_i8(ivf, quant, q, 10, nprobe), ivf.search(q, 10, nprobe))


def test_retriever_with_the_int8_scan_answers_as_f32(tmp_path):
    docs = {f"d/{i:03d}.md": [f"chunk {i} {j} words" for j in range(3)] for i in range(60)}
    path, _, vectors = build(tmp_path / "art", "d", docs, dim=24)
    f32 = Retriever.open(path)
    i8 = Retriever.open(path, vector_scan="i8")
    rng = np.random.default_rng(2)
    for q in np.vstack([unit(rng, 5, 24), vectors[:5]]):
        for mode, params in (("flat", {}), ("ivf", {"nprobe": 2}), ("ivf", {})):
            a, b = f32.search(q, mode, 10, **params), i8.search(q, mode, 10, **params)
            assert [(h.row, h.score) for h in a] == [(h.row, h.score) for h in b]
    with pytest.raises(Exception, match="vector scan"):
        Retriever.open(path, vector_scan="f16")


def test_memory_is_a_quarter():
    v = unit(np.random.default_rng(0), 1000, 256)
    quant = QuantizedVectors.build(v)
    assert quant.nbytes <= v.nbytes / 4 + 8 * len(v)


def test_the_vectors_scan_setting_reaches_the_retriever(tmp_path, monkeypatch):
    from ragtui import app
    from ragtui.config import load_settings
    from ragtui.core.errors import UsageError

    path, _, _ = build(tmp_path / "art", "d", {"d/a.md": ["alpha beta"], "d/b.md": ["gamma"]}, dim=8)
    config = tmp_path / "ragtui.toml"
    config.write_text('[vectors]\nscan = "i8"\n')
    settings = load_settings(config=config)
    assert settings.vector_scan == "i8"
    assert app.open_index(path, settings).vector_scan == "i8"
    config.write_text('[vectors]\nscan = "int4"\n')
    with pytest.raises(UsageError, match=r"\[vectors\] scan"):
        app.open_index(path, load_settings(config=config))
    assert load_settings().vector_scan == "f32"


def test_without_an_nprobe_every_ivf_path_probes_the_calibrated_default():
    """The int8 scan and the filtered (query syntax) IVF path took params.nprobe, the plain path the
    calibrated default_nprobe: without an explicit nprobe they probed other lists than plain IVF."""
    from ragtui.core.search.query_plan import QueryPlan

    rng = np.random.default_rng(6)
    v = clustered(rng, 4000, 32, centres=40)
    ivf = build_ivf(v, "t", IVFParams(nlist=16, nprobe=1))
    ivf.calibrate(v, "t")  # as an index whose lists were calibrated: its default is not params.nprobe
    assert ivf.default_nprobe != ivf.params.nprobe  # the case that was wrong
    quant = QuantizedVectors.build(v)
    plan = QueryPlan.__new__(QueryPlan)
    plan.mask, plan.checks = np.ones(len(v), dtype=bool), []
    plan.mask[::7] = False  # a filter: the planned path, not lists.search
    for q in clustered(rng, 20, 32, centres=40):
        want = ivf.search(q, 10)
        assert same(ivf_search_i8(ivf, quant, q, 10), want)
        rows, _ = plan.ivf(ivf, v, q, 10, None)
        explicit, _ = plan.ivf(ivf, v, q, 10, ivf.default_nprobe)
        assert np.array_equal(rows, explicit)
