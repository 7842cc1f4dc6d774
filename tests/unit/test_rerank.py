"""The cross-encoder reranker on the real int8 ms-marco-MiniLM-L-12-v2 files of the onnx extra."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ragtui.core.errors import UsageError
from ragtui.core.search.retriever import Hit
from tests.helpers.onnx_models import Reference, folder_from, preset_folder, require_onnx

PASSAGES = [
    "Paris is the capital and largest city of France.",
    "The cat sat on the mat all afternoon.",
    "France's capital, Paris, lies on the Seine.",
    "Berlin is the capital of Germany.",
    "Bread is made of flour, water, yeast and salt.",
    "Lyon is a large city in France, but not its capital.",
    "The Eiffel Tower stands in Paris.",
    "Photosynthesis turns light into chemical energy.",
    "What is the capital of France? Many say Paris.",
    "Madrid is the capital of Spain.",
    "",
    "Paris is the capital and largest city of France.",  # a duplicate text (two chunks can hold the same)
]
QUERY = "what is the capital of france"


@pytest.fixture(scope="module")
def encoder():
    require_onnx()
    from ragtui.core.search.rerank import make_reranker

    return make_reranker({"threads": 2})  # a budget's batches (one pair per thread) are the same on any machine


def hits_for(texts, offset=0):
    return [Hit(i + 1, 10.0 - i, f"d{i + offset}.md#0", f"d{i + offset}.md", i + offset, t) for i, t in enumerate(texts)]


def stepping_clock(step: float):
    """A clock whose every reading is ``step`` seconds after the previous one (no real time)."""
    ticks = iter(range(1_000_000))
    return lambda: next(ticks) * step


def stopper(after: int | None):
    """should_stop that says stop from its ``after + 1``-th call on (never when None)."""
    calls = [0]

    def should_stop() -> bool:
        calls[0] += 1
        return after is not None and calls[0] > after

    return should_stop


def same_candidates(before, after):
    assert len(after) == len(before)
    assert sorted(h.chunk_id for h in after) == sorted(h.chunk_id for h in before)
    assert len({h.chunk_id for h in after}) == len(after)
    assert [h.rank for h in after] == list(range(1, len(after) + 1))


def test_scores_match_the_raw_model_outputs(encoder):
    require_onnx()
    ref = Reference(preset_folder("reranker_en"))
    got = encoder.score(QUERY, PASSAGES[:6])
    want = [ref.pair_score(QUERY, p) for p in PASSAGES[:6]]
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_full_rerank_orders_by_the_cross_encoder(encoder):
    from ragtui.core.search.rerank import rerank

    hits = hits_for(PASSAGES)
    result = rerank(QUERY, hits, encoder, n=len(hits))
    same_candidates(hits, result.hits)
    assert result.complete and result.scored == len(hits) and result.describe() == f"reranked {len(hits)}"
    scores = encoder.score(QUERY, [h.text for h in hits])
    want = sorted(range(len(hits)), key=lambda i: -scores[i])  # stable: ties keep the first-stage order
    assert [h.chunk_id for h in result.hits] == [hits[i].chunk_id for i in want]
    assert [h.score for h in result.hits] == pytest.approx([float(scores[i]) for i in want], abs=1e-6)
    assert result.first_stage_rank == tuple(hits[i].rank for i in want)
    assert "capital" in result.hits[0].text and "France" in result.hits[0].text


def test_only_the_top_n_move(encoder):
    from ragtui.core.search.rerank import rerank

    hits = hits_for(PASSAGES)
    result = rerank(QUERY, hits, encoder, n=4)
    same_candidates(hits, result.hits)
    assert {h.chunk_id for h in result.hits[:4]} == {h.chunk_id for h in hits[:4]}
    assert [h.chunk_id for h in result.hits[4:]] == [h.chunk_id for h in hits[4:]]
    assert [h.score for h in result.hits[4:]] == [h.score for h in hits[4:]]  # first-stage scores kept


def test_random_candidates_budgets_and_cancellations_never_drop_or_duplicate(encoder):
    """Many random cases, with a clock that advances a fixed step per reading (no real time)."""
    from ragtui.core.search.rerank import rerank

    rng = random.Random(7)
    for case in range(40):
        texts = [rng.choice(PASSAGES) for _ in range(rng.randint(0, 14))]
        hits = hits_for(texts, offset=100 * case)
        n = rng.randint(1, 20)
        budget = rng.choice([None, 5, 15, 35, 1000])
        result = rerank(QUERY, hits, encoder, n, budget_ms=budget, should_stop=stopper(rng.choice([None, 0, 1, 2])),
                        clock=stepping_clock(0.010))
        same_candidates(hits, result.hits)
        m = result.scored
        assert m <= result.asked == min(n, len(hits))
        assert {h.chunk_id for h in result.hits[:m]} == {h.chunk_id for h in hits[:m]}
        assert [h.chunk_id for h in result.hits[m:]] == [h.chunk_id for h in hits[m:]]
        assert result.complete == (result.reason == "")


def test_a_spent_budget_merges_what_was_scored_and_says_so(encoder):
    from ragtui.core.search.rerank import rerank

    hits = hits_for(PASSAGES)
    ticks = iter([0.0, 0.010, 0.020, 0.030, 0.040])  # start, then before each batch
    result = rerank(QUERY, hits, encoder, n=10, budget_ms=15, clock=lambda: next(ticks, 1.0))
    assert result.scored == encoder.batch_size and not result.complete and result.reason == "budget"
    assert result.describe() == f"reranked {encoder.batch_size} of 10 (time budget)"
    same_candidates(hits, result.hits)


def test_bad_n_and_bad_folders(tmp_path, encoder):
    from ragtui.core.search.rerank import make_reranker, rerank

    with pytest.raises(UsageError, match="n must be"):
        rerank(QUERY, hits_for(PASSAGES), encoder, 0)
    folder = folder_from(tmp_path / "r", preset_folder("reranker_en"), {"kind": "cross-encoder"},
                         files=("tokenizer.json",))
    with pytest.raises(UsageError, match="model.onnx is missing"):
        make_reranker(model=str(folder))
    emb_folder = folder_from(tmp_path / "e", preset_folder("bge_small_en"), {"pooling": "cls"})
    with pytest.raises(UsageError, match="holds a embedder|not a cross-encoder"):
        make_reranker(model=str(emb_folder))
    with pytest.raises(UsageError, match="unknown preset"):
        make_reranker(model="no-such-reranker")


def test_reranking_retriever_for_eval(tmp_path, encoder):
    """``<mode>+rerank`` returns the reranked top k; other modes pass through."""
    from ragtui.core.embedders import make_embedder
    from ragtui.core.ingest.sync import sync
    from ragtui.core.search.rerank import RerankingRetriever, search_reranked
    from ragtui.core.search.retriever import Retriever

    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(PASSAGES[:10]):
        (docs / f"p{i}.md").write_text(text + "\n", encoding="utf-8")
    emb = make_embedder()
    report = sync(docs, artifacts=tmp_path / "art", embedder=emb, index_id="docs")
    r = Retriever.open(report.index_path, embedder=emb)
    wrapped = RerankingRetriever(r, encoder, n=10)
    got = wrapped.search(QUERY, mode="hybrid+rerank", k=3)
    direct = search_reranked(r, QUERY, encoder, mode="hybrid", k=3, n=10)
    assert [h.chunk_id for h in got] == [h.chunk_id for h in direct.hits]
    assert "capital" in got[0].text
    assert wrapped.search(QUERY, mode="bm25", k=3) == r.search(QUERY, mode="bm25", k=3)
    assert wrapped.data is r.data and wrapped.partial == 0
