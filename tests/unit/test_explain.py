"""``core.search.explain``: each hit's explanation is exact to the score the search reported, from that search."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ragtui.core.search.explain import bm25_terms, explain_search
from ragtui.core.search.fusion_fit import fill_hybrid
from ragtui.core.search.ivf import IVFParams
from ragtui.core.search.retriever import Retriever
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import build

WORDS = "alpha beta gamma delta cat dog bird the a of chmod file permissions change recursively".split()


def _docs(seed: int, n_files: int = 12) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {f"f{i}.md": [" ".join(rng.choices(WORDS, k=rng.randint(3, 40))) for _ in range(rng.randint(1, 4))]
            for i in range(n_files)}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    path, _, _ = build(tmp_path_factory.mktemp("explain") / "art", "docs", _docs(7))
    return Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"), ivf_params=IVFParams(nlist=4))


@pytest.mark.parametrize("seed", range(20))
def test_bm25_contributions_sum_to_the_score(retriever, seed):
    rng = random.Random(seed)
    query = " ".join(rng.choices(WORDS + ["absent"], k=rng.randint(1, 6)))
    explained = explain_search(retriever, query, "bm25", k=50)
    plain = retriever.search(query, "bm25", k=50)
    assert [(h.chunk_id, h.score) for h in explained.hits] == [(h.chunk_id, h.score) for h in plain]
    for e in explained.explanations:
        total = 0.0
        for part in e.terms:
            total += part.contribution
        assert abs(total - e.hit.score) <= 1e-9
        assert {p.term for p in e.terms} <= set(query.split())
        for p in e.terms:
            if p.tf:  # the contribution is the formula, with the index's own k1, b, avgdl
                bm = retriever.data.bm25
                norm = bm.k1 * (1 - bm.b + bm.b * p.doc_len / bm.avgdl)
                assert p.contribution == pytest.approx(p.query_weight * p.idf * p.tf * (bm.k1 + 1) / (p.tf + norm),
                                                       rel=1e-12)
            else:
                assert p.contribution == 0.0


def test_a_repeated_query_term_counts_as_often_as_it_is_repeated(retriever):
    row = retriever.search("cat", "bm25", k=1)[0].row
    once = {p.term: p for p in bm25_terms(retriever.data.bm25, "cat", row)}["cat"]
    twice = {p.term: p for p in bm25_terms(retriever.data.bm25, "cat cat", row)}["cat"]
    assert twice.query_weight == 2 and twice.contribution == 2 * once.contribution


@pytest.mark.parametrize("fusion", [{}, {"fusion": "rrf"}, {"fusion": "weighted", "weight": 0.3}, {"lexical": "bm25"}])
def test_hybrid_arms_add_up_to_the_fused_score(retriever, fusion):
    explained = explain_search(retriever, "cat chmod file", "hybrid", k=10, **fusion)
    plain = retriever.search("cat chmod file", "hybrid", k=10, **fusion)
    assert [(h.chunk_id, h.score) for h in explained.hits] == [(h.chunk_id, h.score) for h in plain]
    # What the search fills in for the index's embedder (fusion_fit), unless told.
    eff = fill_hybrid(retriever.meta.embedding_model, dict(fusion))
    lex = eff["lexical"]
    cw = {} if lex == "bm25" else {"chunk_weight": eff.get("chunk_weight")}
    bm25_rank = {h.row: h.rank for h in retriever.search("cat chmod file", lex, k=100, **cw)}
    for e in explained.explanations:
        lexical, vector = e.arms
        assert (lexical.arm, vector.arm) == (lex, "flat")
        assert lexical.added + vector.added == pytest.approx(e.score, abs=1e-12)
        assert lexical.rank == bm25_rank.get(e.hit.row)
        assert (lexical.rank is None) == (lexical.score is None)
    assert explained.explanations[0].fusion.startswith(eff.get("fusion") or "weighted")


def test_ivf_names_the_lists_probed_and_each_hits_list(retriever):
    explained = explain_search(retriever, "gamma delta", "ivf", k=5, nprobe=2)
    assert explained.nlist == 4 and len(explained.probed) == 2 and len(set(explained.probed)) == 2
    ivf = retriever.ivf()
    for e in explained.explanations:
        assert e.ivf_list in explained.probed
        c = e.ivf_list
        assert e.hit.row in ivf.rows[ivf.offsets[c] : ivf.offsets[c + 1]].tolist()
        assert e.cosine == e.hit.score
    assert sum(explained.list_sizes) >= len(explained.hits)


def test_flat_explains_the_cosine(retriever):
    explained = explain_search(retriever, "bird", "flat", k=3)
    vec = retriever.query_vector("bird")
    for e in explained.explanations:
        assert e.cosine == pytest.approx(float(np.dot(retriever.data.vectors[e.hit.row], vec)), abs=1e-6)


def test_explaining_uses_the_searched_generation(tmp_path):
    """A reload between the search and the explaining changes nothing: the trace holds the search's snapshot."""
    art = tmp_path / "art"
    path, _, _ = build(art, "docs", _docs(1))
    r = Retriever.open(path)
    real_search = r.search

    def search_then_reload(*args, **kwargs):
        hits = real_search(*args, **kwargs)
        build(art, "docs", _docs(2, n_files=30))  # a new generation, published under the same id
        assert r.reload()
        return hits

    r.search = search_then_reload  # type: ignore[method-assign]
    explained = explain_search(r, "cat dog", "bm25", k=20)
    for e in explained.explanations:
        assert abs(sum(p.contribution for p in e.terms) - e.hit.score) <= 1e-9


def test_bm25doc_splits_the_score_into_the_documents_part_and_the_chunks_own(retriever):
    explained = explain_search(retriever, "cat chmod file", "bm25doc", k=5, chunk_weight=0.5)
    assert explained.hits
    for e in explained.explanations:
        j = e.to_json()
        chunk = sum(p.contribution for p in e.terms)
        assert j["chunk_weight"] == 0.5 and j["chunk_bm25"] == pytest.approx(chunk, abs=1e-9)
        assert j["document_bm25"] + 0.5 * j["chunk_bm25"] == pytest.approx(e.score, abs=1e-9)
        # The chunk's own part is its plain BM25 score.
        assert chunk == pytest.approx(float(retriever.data.bm25.scores("cat chmod file")[e.hit.row]), abs=1e-9)
