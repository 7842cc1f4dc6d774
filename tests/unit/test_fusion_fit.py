"""Hybrid's defaults from the index's embedder (fusion_fit), and zscore fusion against a plain reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.index.records import IndexMeta
from ragtui.core.ingest.publish import IndexLock, encode_index, publish
from ragtui.core.search import fusion
from ragtui.core.search.explain import explain_search
from ragtui.core.search.fusion_fit import FITTED, UNKNOWN, fill_hybrid, fusion_defaults
from ragtui.core.search.postrank import floor_scores
from ragtui.core.search.retriever import Retriever, SearchTrace
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import make_records, random_vectors

DOCS = {
    "a.md": ["mutations of the gene", "a mutation was found in cats", "running runners run"],
    "b.md": ["studies of cats and dogs", "one study of a dog", "the gene of a cat"],
    "c.md": ["genes mutate", "dogs run after cats", "nothing at all here"],
}
SHIPPED = ["wordllama-l2_supercat-256", "bge-small-en-v1.5-int8@d771a4c250d7"]


def index_of(tmp_path, model: str) -> Retriever:
    records = make_records(DOCS)
    meta = IndexMeta("fit", "2026-01-01T00:00:00Z", len(records), 8, model, "test-tok", 256, 32)
    files = encode_index(meta, records, random_vectors(len(records), 8, 3))
    with IndexLock(tmp_path, "fit"):
        path = publish(tmp_path, "fit", files)
    return Retriever.open(path, embedder=HashEmbedder(dim=8, model=model))


def test_the_shipped_embedders_have_a_fit_for_every_lexical_arm():
    for model in SHIPPED:
        arm, fits = FITTED[model]
        assert set(fits) == {"bm25", "bm25doc", "bm25stem"} and arm in fits
        for fit in fits.values():
            assert fit.evidence and fit.fusion in fusion.FUSIONS
            fusion.resolve(fit.fusion, None if fit.fusion == "rrf" else fit.value,
                           fit.value if fit.fusion == "rrf" else None)


@pytest.mark.parametrize("model", [*SHIPPED, "some-http-model"])
def test_hybrid_without_options_searches_with_the_fit_of_the_index_embedder(tmp_path, model):
    r = index_of(tmp_path, model)
    want_params = fusion_defaults(model)
    arm, _ = FITTED.get(model, UNKNOWN)
    assert want_params["lexical"] == arm
    for query in ("cats gene", "mutation studies", "run"):
        trace = SearchTrace()
        got = r.search(query, mode="hybrid", k=9, trace=trace)
        want = r.search(query, mode="hybrid", k=9, **want_params)
        assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]
        assert trace.arm == arm and trace.fusion is not None and trace.fusion[0] == want_params["fusion"]
        # The explanation names the arm searched, and its parts add up to the fused score.
        explained = explain_search(r, query, mode="hybrid", k=9)
        for e in explained.explanations:
            assert e.arms[0].arm == arm
            assert sum(a.added for a in e.arms) == pytest.approx(e.score, abs=1e-12)


def test_an_unknown_embedder_gets_the_documented_default(tmp_path):
    r = index_of(tmp_path, "some-http-model")
    got = r.search("cats gene", mode="hybrid", k=9)
    want = r.search("cats gene", mode="hybrid", k=9, lexical="bm25stem", fusion="zscore", weight=0.6,
                    chunk_weight=0.5)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]


def test_what_the_caller_sets_wins_over_the_table():
    model = SHIPPED[0]
    table = fusion_defaults(model)
    assert fill_hybrid(model, {}) == table
    assert fill_hybrid(model, {"fusion": None, "weight": None}) == table  # None is not given
    # A weight alone means weighted fusion, as it always did.
    got = fill_hybrid(model, {"weight": 0.8})
    assert got.get("fusion") is None and got["weight"] == 0.8 and "rrf_k" not in got
    assert fusion.resolve(got.get("fusion"), got.get("weight"), got.get("rrf_k"))[:2] == ("weighted", 0.8)
    # The table's method named: its value comes too; another method: that method's module default.
    got = fill_hybrid(model, {"fusion": table["fusion"]})
    key = "rrf_k" if table["fusion"] == "rrf" else "weight"
    assert got[key] == table[key]
    other = "rrf" if table["fusion"] != "rrf" else "weighted"
    got = fill_hybrid(model, {"fusion": other})
    assert "weight" not in got and "rrf_k" not in got
    # The lexical arm named: that arm's fit, chunk_weight only where the arm takes one.
    assert fill_hybrid(model, {"lexical": "bm25"}).get("chunk_weight") is None
    assert fill_hybrid(model, {"lexical": "bm25doc", "chunk_weight": 3.0})["chunk_weight"] == 3.0


def reference_zscore(lexical, vector, weight: float) -> dict[int, float]:
    out: dict[int, float] = {}
    for (rows, scores), share in ((lexical, weight), (vector, 1.0 - weight)):
        s = np.asarray(scores, dtype=np.float64)
        if s.size == 0:
            continue
        sd = s.std()
        z = (s - s.min()) / sd if sd > 0 else np.ones_like(s)
        for r, v in zip(rows.tolist(), z.tolist()):
            out[r] = out.get(r, 0.0) + share * v
    return out


lists = st.lists(st.tuples(st.integers(0, 40), st.floats(-5, 50, allow_nan=False)), min_size=0, max_size=25,
                 unique_by=lambda t: t[0])


@settings(max_examples=60, deadline=None)
@given(lists, lists, st.floats(0, 1))
def test_zscore_fusion_is_the_reference(a, b, weight):
    lexical = (np.array([r for r, _ in a], dtype=np.int64), np.array([s for _, s in a]))
    vector = (np.array([r for r, _ in b], dtype=np.int64), np.array([s for _, s in b]))
    rows, scores = fusion.fuse(lexical, vector, 100, method="zscore", weight=weight)
    want = reference_zscore(lexical, vector, weight)
    assert sorted(rows.tolist()) == sorted(want)
    for r, s in zip(rows.tolist(), scores.tolist()):
        assert s == pytest.approx(want[r], rel=1e-12, abs=1e-12)
    assert all(scores[i] >= scores[i + 1] for i in range(len(scores) - 1))


def test_zscore_weighs_a_peaked_list_above_a_flat_one():
    """min-max gives each list's best a 1; z-scores give the standout of a peaked list more than the best of
    a list whose scores are all alike."""
    peaked = (np.arange(10), np.array([10.0] + [1.0] * 9))
    flat = (np.arange(10, 20), np.linspace(1.0, 0.9, 10))
    rows, _ = fusion.fuse(peaked, flat, 2, method="zscore", weight=0.5)
    assert rows[0] == 0
    _, by_minmax = fusion.fuse(peaked, flat, 20, method="weighted", weight=0.5)
    assert by_minmax[0] == by_minmax[1]  # a tie under min-max


def test_zscore_options_are_checked_like_weighted():
    assert fusion.resolve("zscore", 0.3) == ("zscore", 0.3, fusion.DEFAULT_RRF_K)
    with pytest.raises(Exception, match="rrf_k applies to rrf fusion, not zscore"):
        fusion.resolve("zscore", None, 30)
    assert floor_scores("hybrid", np.array([4.0, 2.0, 0.0]), "zscore").tolist() == [1.0, 0.5, 0.0]


_ROWS = st.lists(st.integers(0, 40), max_size=30, unique=True)


@settings(max_examples=300, deadline=None)
@given(_ROWS, _ROWS, st.sampled_from(["int64", "int32", "uint32"]), st.sampled_from(["weighted", "zscore", "rrf"]))
def test_fusing_takes_the_union_of_both_lists_as_union1d_does(lex, vec, dtype, method):
    """The fused candidates are the sorted distinct rows of both lists (``np.union1d``), as int64;
    the fused scores are those of that union."""
    a, b = np.array(lex, dtype=dtype), np.array(vec, dtype=dtype)
    union = fusion._union(a, b)
    expected = np.union1d(a, b).astype(np.int64)
    assert union.dtype == np.int64 and union.tolist() == expected.tolist()
    lscores = np.linspace(3.0, 1.0, a.size)
    vscores = np.linspace(0.9, 0.2, b.size)
    rows, scores = fusion.fuse((a, lscores), (b, vscores), 50, method=method,
                               weight=None if method == "rrf" else 0.6)
    assert sorted(rows.tolist()) == expected.tolist()
    by_row = dict(zip(rows.tolist(), scores.tolist()))
    for r in expected.tolist():
        want = 0.0
        for lst, sc, share in ((lex, lscores, 0.6), (vec, vscores, 0.4)):
            if r in lst:
                i = lst.index(r)
                want += 1.0 / (60 + i + 1) if method == "rrf" else share * fusion.normalise(sc, method)[i]
        assert by_row[r] == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_fusing_imports_no_masked_arrays():
    from tests.helpers.imports import loaded_by_import

    code = "ragtui.core.search.fusion"
    assert loaded_by_import(code, ["numpy.ma"]) == set()
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import sys, numpy as np\n"
                           "from ragtui.core.search.fusion import fuse\n"
                           "r = fuse((np.array([5, 2]), np.array([2.0, 1.0])), (np.array([2, 9]), np.array([.9, .1])), 3)\n"
                           "print(sorted(r[0].tolist()), 'numpy.ma' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split("]")[0] == "[2, 5, 9" and done.stdout.strip().endswith("False"), done.stderr
