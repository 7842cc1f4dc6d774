"""Several indexes searched as one (core.search.multi): the pooled merge equals one index holding all the chunks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.errors import UsageError
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import build_postings
from ragtui.core.ingest.publish import IndexLock, encode_index, publish
from ragtui.core.search.multi import merge_ranked, pooled_bm25_scores, search_many
from ragtui.core.search.retriever import Hit, Retriever
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import make_meta, make_records

A_DOCS = {
    "a/wing.md": ["lift and drag on a swept wing", "boundary layer separation near the wing tip"],
    "a/shock.md": ["shock waves in supersonic flow", "the boundary layer under a shock wave"],
}
B_DOCS = {
    "b/library.md": ["indexing of library documents", "retrieval of documents by their index terms",
                     "library catalogue and the flow of loans"],
}
QUERIES = ["boundary layer", "flow", "index documents", "wing shock flow library", "nothing matches this"]


def _publish(art, index_id, records, vectors, model="test-hash"):
    meta = make_meta(index_id, len(records), vectors.shape[1])
    meta = type(meta)(**{**meta.__dict__, "embedding_model": model})
    with IndexLock(art, index_id):
        return Retriever.open(publish(art, index_id, encode_index(meta, records, vectors)), embedder=HashEmbedder(16, model))


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """Index a, index b, and u: one index holding a's chunks then b's, with the same vectors."""
    art = tmp_path_factory.mktemp("art")
    emb = HashEmbedder(16)
    ra, rb = make_records(A_DOCS), make_records(B_DOCS)
    va, vb = emb.embed([r.text for r in ra]), emb.embed([r.text for r in rb])
    a = _publish(art, "a", ra, va)
    b = _publish(art, "b", rb, vb)
    u = _publish(art, "u", ra + rb, np.concatenate([va, vb]))
    return a, b, u


@pytest.mark.parametrize("mode", ["bm25", "flat", "hybrid"])
@pytest.mark.parametrize("query", QUERIES)
def test_pooled_ranks_and_scores_as_one_index(three, mode, query):
    a, b, u = three
    n = u.data.n_chunks
    want = [(h.chunk_id, h.score) for h in u.search(query, mode=mode, k=n)]
    got = search_many({"a": a, "b": b}, query, mode=mode, k=n)
    assert [h.chunk_id for h in got.hits] == [c for c, _ in want]
    assert np.allclose([h.score for h in got.hits], [s for _, s in want], rtol=0, atol=1e-9)
    assert [h.index_id for h in got.hits] == ["a" if c.startswith("a/") else "b" for c, _ in want]
    assert [h.rank for h in got.hits] == list(range(1, len(want) + 1))
    for h in got.hits:  # each hit is its own index's chunk, at its own row
        own = {"a": a, "b": b}[h.index_id]
        assert own.data.records[h.hit.row].chunk_id == h.chunk_id
    assert got.notes == []
    if query == "nothing matches this" and mode == "bm25":
        assert got.hits == []


words = st.sampled_from(["wing", "flow", "shock", "layer", "index", "term", "drag", "lift", "loan", "tip"])
texts = st.lists(st.lists(words, min_size=1, max_size=12).map(" ".join), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, texts, st.lists(words, min_size=1, max_size=4).map(" ".join))
def test_pooled_bm25_equals_the_union_of_random_corpora(first, second, query):
    from ragtui.core.index.analyzer import analyze

    terms = [analyze(t) for t in first], [analyze(t) for t in second]
    ia, ib = (BM25Index.from_postings(build_postings(t), 1.2, 0.75) for t in terms)
    iu = BM25Index.from_postings(build_postings(terms[0] + terms[1]), 1.2, 0.75)
    sa, sb = pooled_bm25_scores([ia, ib], query)
    assert np.allclose(np.concatenate([sa, sb]), iu.scores(query), rtol=0, atol=1e-9)


def test_different_embedding_models_merge_vectors_by_rank_and_say_so(tmp_path):
    ra, rb = make_records(A_DOCS), make_records(B_DOCS)
    a = _publish(tmp_path, "a", ra, HashEmbedder(16, "m1").embed([r.text for r in ra]), model="m1")
    b = _publish(tmp_path, "b", rb, HashEmbedder(16, "m2").embed([r.text for r in rb]), model="m2")
    res = search_many({"a": a, "b": b}, "boundary layer", mode="flat", k=4)
    assert len(res.hits) == 4 and "different embedding models" in res.notes[0]
    # By rank: the two top hits are each index's own first hit, the first index's first.
    assert [h.index_id for h in res.hits[:2]] == ["a", "b"]
    assert res.hits[0].chunk_id == a.search("boundary layer", mode="flat", k=1)[0].chunk_id


def _hit(cid, score, row=0):
    return Hit(0, score, cid, cid.split("#")[0], row, "t")


def test_merge_by_rank_and_by_score_and_their_ties():
    ranked = {"x": [_hit("x#0", 9.0), _hit("x#1", 1.0)], "y": [_hit("y#0", 2.0), _hit("y#1", 1.0)]}
    assert [h.chunk_id for h in merge_ranked(ranked, 4, merge="rrf")] == ["x#0", "y#0", "x#1", "y#1"]
    assert [h.chunk_id for h in merge_ranked(ranked, 4, merge="score")] == ["x#0", "y#0", "x#1", "y#1"]
    ranked["y"] = [_hit("y#0", 9.0)]
    assert [h.chunk_id for h in merge_ranked(ranked, 2, merge="score")] == ["x#0", "y#0"]  # tie: x listed first
    assert merge_ranked(ranked, 1, merge="rrf")[0].score == pytest.approx(1 / 61)


@pytest.mark.parametrize("kwargs, message", [
    ({"merge": "mean"}, "unknown merge 'mean'"),
    ({"merge_rrf_k": -1}, "rrf_k must be a number from 0"),
    ({"k": 0}, "k must be a whole number"),
    ({"k": 5, "depth": 2}, "depth must be at least k"),
    ({"mode": "hybrid", "wieght": 0.5}, "wieght"),
])
def test_bad_parameters_are_usage_errors(three, kwargs, message):
    a, b, _ = three
    with pytest.raises(UsageError, match=message):
        search_many({"a": a, "b": b}, "flow", **kwargs)
    with pytest.raises(UsageError, match="no index"):
        search_many({}, "flow")


SYNTAX = ['"boundary layer"', "flow path:a/", "flow -shock", "bound* OR library", "layer ext:md -path:b/",
          'the -"boundary layer" lib*', "wing* shock*"]


@pytest.mark.parametrize("mode", ["bm25", "flat", "hybrid"])
@pytest.mark.parametrize("query", SYNTAX)
def test_pooled_takes_the_query_syntax_as_one_index_would(three, mode, query):
    """Filters and text checks restrict each index's rows; prefixes expand over the pooled dictionaries."""
    a, b, u = three
    n = u.data.n_chunks
    want = u.search(query, mode=mode, k=n)
    got = search_many({"a": a, "b": b}, query, mode=mode, k=n)
    assert [h.chunk_id for h in got.hits] == [h.chunk_id for h in want]
    assert np.allclose([h.score for h in got.hits], [h.score for h in want], rtol=0, atol=1e-9)
    assert got.notes == list(want.notes)


def test_pooled_refuses_a_malformed_query():
    from ragtui.core.errors import QueryError

    with pytest.raises(QueryError, match="query column 6: this quote is never closed"):
        search_many({"x": None}, 'flow "layer', mode="bm25", strict=True)  # type: ignore[dict-item]
