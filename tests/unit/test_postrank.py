"""After the ranking: MMR (vectors and the lexical fallback), merging neighbours, the score floor."""

from __future__ import annotations

import numpy as np
import pytest

from ragtui.core.search.postrank import floor_scores, merge_text, mmr
from ragtui.core.search.retriever import Retriever
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import build


def test_mmr_lambda_one_is_the_ranking_and_lower_lambda_skips_near_duplicates():
    rows = np.array([0, 1, 2], dtype=np.int64)
    scores = np.array([1.0, 0.99, 0.5])
    v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # rows 0 and 1 are the same passage
    assert mmr(rows, scores, 3, 1.0, vectors=v)[0].tolist() == [0, 1, 2]
    picked, kept = mmr(rows, scores, 3, 0.5, vectors=v)
    assert picked.tolist() == [0, 2, 1] and kept.tolist() == [1.0, 0.5, 0.99]  # original scores travel along


def test_mmr_without_vectors_uses_term_overlap():
    texts = {0: {"cat", "purr"}, 1: {"cat", "purr"}, 2: {"dog", "bark"}}
    rows = np.array([0, 1, 2], dtype=np.int64)
    picked, _ = mmr(rows, np.array([3.0, 2.9, 1.0]), 2, 0.5, terms=texts.__getitem__)
    assert picked.tolist() == [0, 2]


def test_mmr_ties_go_to_the_lower_chunk_number():
    rows = np.array([7, 3, 5], dtype=np.int64)
    v = np.eye(3)
    assert mmr(rows, np.array([1.0, 1.0, 1.0]), 3, 0.7, vectors=np.eye(8)[:, :3] @ v)[0].tolist() == [3, 5, 7]


def test_merge_text_joins_at_the_overlap():
    assert merge_text(["alpha beta gamma delta", "gamma delta epsilon"]) == "alpha beta gamma delta epsilon"
    assert merge_text(["one two", "three four"]) == "one two\nthree four"  # touching, no overlap
    assert merge_text(["a b c d", "b c"]) == "a b c d"  # the next lies inside
    assert merge_text(["solo"]) == "solo"


def test_floor_scores_normalise_rrf_only():
    s = np.array([2 / 61, 1 / 61])
    assert floor_scores("hybrid", s, "rrf", 60).tolist() == pytest.approx([1.0, 0.5])
    assert floor_scores("hybrid", s, "weighted").tolist() == s.tolist()
    assert floor_scores("bm25", s).tolist() == s.tolist()


def test_merge_joins_neighbouring_chunks_of_one_document(tmp_path):
    docs = {"a.md": ["cats purr loudly", "purr loudly at night cats", "cats sleep"], "b.md": ["cats bark"]}
    path, _, _ = build(tmp_path / "art", "docs", docs)
    r = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    plain = r.search("cats purr", mode="bm25", k=10)
    merged = r.search("cats purr", mode="bm25", k=10, merge=True)
    assert len(merged) < len(plain)
    top = merged[0]
    assert top.rows == (0, 1, 2) and top.text == "cats purr loudly at night cats\ncats sleep"
    assert [h.rank for h in merged] == list(range(1, len(merged) + 1))
    assert {h.doc_id for h in merged} == {"a.md", "b.md"}
