"""The stemmed lexical arm (bm25stem): derived from bm25.idx's postings, equal to BM25 over stemmed terms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.index.analyzer import analyze
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import build_postings
from ragtui.core.search.docaware import DocLexical, doc_groups
from ragtui.core.search.retriever import Retriever
from ragtui.core.search.stemmed import DEFAULT_STEM_CHUNK_WEIGHT, StemLexical, stem_postings, stem_terms
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import build, make_records

DOCS = {
    "a.md": ["Mutations in the gene", "a mutation was running", "the runner runs"],
    "b.md": ["studies of cats", "one study of a cat", "Ÿ café naïve ΣΊΣΥΦΟΣ"],
    "c.md": ["generalization generalizes", "x2y abc_def 42"],
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    art = tmp_path_factory.mktemp("stem") / "art"
    path, _, _ = build(art, "docs", DOCS)
    return art, path


def stemmed_reference(k1: float, b: float) -> BM25Index:
    """BM25 built from scratch over each chunk's analyzer terms, stemmed: what the derivation must equal."""
    terms = [stem_terms(analyze(r.text)) for r in make_records(DOCS)]
    return BM25Index.from_postings(build_postings(terms), k1, b)


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4), (1.5, 0.9)])
def test_derived_postings_equal_bm25_over_stemmed_terms(index, k1, b):
    _, path = index
    r = Retriever.open(path)
    got = StemLexical.build(r.data.bm25, r.doc_lexical().doc_of_row, k1, b).chunks
    want = stemmed_reference(k1, b)
    for name in ("doc_len", "term_blob", "term_starts", "offsets", "post_doc", "post_tf", "weights"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert (got.avgdl, got.k1, got.b) == (want.avgdl, k1, b)
    # "mutations" and "mutation" are one stem; the index's own dictionary keeps both.
    assert got.lookup("mutat") >= 0 and r.data.bm25.lookup("mutations") >= 0 and r.data.bm25.lookup("mutat") < 0


def test_every_stem_analyzes_to_itself():
    words = analyze("mutations running café naïve abc_def x2y studies ΣΊΣΥΦΟΣ Ÿ 42 _ ǅx İstanbul ﬁnally")
    for term, stem in zip(words, stem_terms(words)):
        assert analyze(stem) == [stem], (term, stem)


def test_bm25stem_mode_is_doc_aware_over_stems_and_bm25_is_untouched(index, tmp_path):
    _, path = index
    r = Retriever.open(path, cache_dir=tmp_path / "cache")
    plain_before = r.search("mutation studies", mode="bm25", k=10)
    hits = r.search("mutation studies", mode="bm25stem", k=10)
    stem = r.stem_lexical()
    own = stem.chunks.scores(stem.query_text("mutation studies"))
    docs = stem.docs.docs.scores(stem.query_text("mutation studies"))
    want = np.where(own > 0, docs[stem.docs.doc_of_row] + DEFAULT_STEM_CHUNK_WEIGHT * own, 0.0)
    order = sorted(np.flatnonzero(want > 0).tolist(), key=lambda i: (-want[i], i))
    assert [h.row for h in hits] == order
    assert [h.score for h in hits] == [float(want[i]) for i in order]
    # "mutations" (chunk 0) and "study" (chunk 4) match only through their stems.
    texts = {h.text for h in hits}
    assert {"Mutations in the gene", "one study of a cat"} <= texts
    plain = r.search("mutation studies", mode="bm25", k=10)
    assert [(h.row, h.score) for h in plain] == [(h.row, h.score) for h in plain_before]
    assert "Mutations in the gene" not in {h.text for h in plain}


def test_cached_arm_is_read_back_and_equal(index, tmp_path):
    _, path = index
    cache = tmp_path / "cache"
    first = Retriever.open(path, cache_dir=cache).stem_lexical()
    entries = sorted(p.name for p in cache.iterdir() if p.name.startswith("stem-"))
    assert len(entries) == 1
    again = Retriever.open(path, cache_dir=cache).stem_lexical()
    assert isinstance(again.chunks.weights, np.memmap)  # read from the entry, not rebuilt
    for name in ("term_blob", "offsets", "post_doc", "weights"):
        assert np.array_equal(getattr(first.chunks, name), getattr(again.chunks, name))
        assert np.array_equal(getattr(first.docs.docs, name), getattr(again.docs.docs, name))


def test_damaged_cache_entry_is_derived_again(index, tmp_path):
    _, path = index
    cache = tmp_path / "cache"
    want = Retriever.open(path, cache_dir=cache).search("cats running", mode="bm25stem", k=10)
    entry = next(p for p in cache.iterdir() if p.name.startswith("stem-"))
    (entry / "c_weights.npy").write_bytes((entry / "c_weights.npy").read_bytes()[:-16])
    got = Retriever.open(path, cache_dir=cache).search("cats running", mode="bm25stem", k=10)
    assert [(h.row, h.score) for h in got] == [(h.row, h.score) for h in want]


def test_hybrid_over_the_stemmed_arm(index):
    _, path = index
    r = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    hits = r.search("mutation", mode="hybrid", k=5, lexical="bm25stem", fusion="weighted", weight=1.0)
    stemmed = r.search("mutation", mode="bm25stem", k=5)
    assert [h.row for h in hits][: len(stemmed)] == [h.row for h in stemmed]


words = st.sampled_from(["runs", "running", "runner", "cats", "cat", "study", "studies", "the", "generalize"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(words, min_size=1, max_size=6), min_size=1, max_size=8),
       st.lists(st.integers(0, 3), min_size=1, max_size=8))
def test_derivation_on_random_postings(chunks, sizes):
    """Any postings: the derived stemmed index equals the one built from stemmed terms, at document level too."""
    base = BM25Index.from_postings(build_postings(chunks), 1.2, 0.75)
    doc_ids = [f"d{i}" for i, n in enumerate(sizes) for _ in range(n + 1)][: len(chunks)]
    doc_ids += [doc_ids[-1] if doc_ids else "d0"] * (len(chunks) - len(doc_ids))
    groups = doc_groups(doc_ids)
    got = StemLexical.build(base, groups, 0.9, 0.4)
    want = BM25Index.from_postings(build_postings([stem_terms(c) for c in chunks]), 0.9, 0.4)
    assert np.array_equal(got.chunks.weights, want.weights)
    assert np.array_equal(got.chunks.term_blob, want.term_blob)
    want_docs = DocLexical.build(want, groups)
    assert np.array_equal(got.docs.docs.weights, want_docs.docs.weights)
    assert stem_postings(base).n_docs == len(chunks)
