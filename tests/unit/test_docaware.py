"""Document-aware lexical ranking (bm25doc) and hybrid's fusion depth: against plain references."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import StreamedEntry
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_write import build_postings
from ragtui.core.search.docaware import DOCLEX_KIND, DocLexical, doc_groups
from ragtui.core.search.retriever import Retriever
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import build, make_records
from tests.unit.test_bm25 import reference_search

DOCS = {
    "a.md": ["cats purr and sleep", "the cat chases mice at night", "mice run"],
    "b.md": ["dogs fetch sticks", "dogs guard the house from cats"],
    "c.md": ["birds sing at dawn", "birds and mice"],
    "d.md": ["cats"],
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    art = tmp_path_factory.mktemp("docaware") / "art"
    path, _, _ = build(art, "docs", DOCS)
    return Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))


def reference_doc_scores(docs: dict[str, list[str]], query: str, k1=1.2, b=0.75) -> dict[str, float]:
    """Whole-document BM25 where a document's terms are all its chunks' terms (the spec's formula)."""
    ids = sorted(docs, key=lambda d: d.encode("utf-8"))
    terms = [[t for chunk in docs[d] for t in analyze(chunk)] for d in ids]
    return {ids[i]: s for i, s in reference_search(terms, query, k1, b)}


def test_doc_scores_equal_whole_document_bm25(retriever):
    lex = retriever.doc_lexical()
    for query in ("cats mice", "birds", "dogs cats house", "nothing here", "mice mice"):
        want = reference_doc_scores(DOCS, query)
        got = lex.docs.scores(query)
        ids = sorted(DOCS, key=lambda d: d.encode("utf-8"))
        for i, d in enumerate(ids):
            assert got[i] == pytest.approx(want.get(d, 0.0), abs=1e-9), (query, d)


def test_chunk_scores_are_doc_plus_weighted_own(retriever):
    lex = retriever.doc_lexical()
    bm25 = retriever.data.bm25
    for cw in (0.0, 0.5, 2.0):
        s = lex.chunk_scores(bm25, "cats mice", cw)
        own, doc = bm25.scores("cats mice"), lex.docs.scores("cats mice")
        want = np.where(own > 0, doc[lex.doc_of_row] + cw * own, 0.0)
        assert np.allclose(s, want, atol=1e-12, rtol=0)


def test_bm25doc_mode_ranks_documents_like_whole_document_bm25(retriever):
    hits = retriever.search("cats mice", mode="bm25doc", k=20, chunk_weight=0.0)
    docs_in_order = list(dict.fromkeys(h.doc_id for h in hits))
    want = reference_doc_scores(DOCS, "cats mice")
    assert docs_in_order == sorted(want, key=lambda d: (-want[d], d.encode()))
    # Only chunks holding a query term of their own are hits, and the bm25 mode is untouched.
    assert all(set(analyze(h.text)) & {"cat", "cats", "mice", "mouse"} for h in hits)
    plain = retriever.search("cats mice", mode="bm25", k=20)
    ref = reference_search([analyze(r.text) for r in make_records(DOCS)], "cats mice")
    assert [h.row for h in plain] == [r for r, _ in ref]
    assert [h.score for h in plain] == pytest.approx([s for _, s in ref], abs=1e-9)


def test_doc_groups_number_contiguous_doc_ids():
    assert doc_groups(["a", "a", "b", "c", "c", "c"]).tolist() == [0, 0, 1, 2, 2, 2]
    assert doc_groups([]).tolist() == []


words = st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta"])
chunk = st.lists(words, min_size=1, max_size=6).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(docs=st.dictionaries(st.sampled_from([f"d{i}.md" for i in range(6)]), st.lists(chunk, min_size=1, max_size=4),
                            min_size=1, max_size=6),
       query=st.lists(words, min_size=1, max_size=3).map(" ".join))
def test_doc_level_bm25_agrees_with_reference_on_any_collection(docs, query):
    from ragtui.core.index.bm25 import BM25Index
    from ragtui.core.index.bm25_write import build_postings

    records = make_records(docs)
    postings = build_postings([analyze(r.text) for r in records])
    chunks = BM25Index.from_postings(postings, 1.2, 0.75)
    lex = DocLexical.build(chunks, doc_groups([r.doc_id for r in records]))
    want = reference_doc_scores(docs, query)
    ids = sorted(docs, key=lambda d: d.encode("utf-8"))
    got = lex.docs.scores(query)
    assert all(math.isclose(got[i], want.get(d, 0.0), abs_tol=1e-9) for i, d in enumerate(ids))


def test_hybrid_depth_does_not_depend_on_k(retriever):
    # The top of the ranking is the same whatever k; a larger k only appends.
    for params in ({}, {"fusion": "rrf"}, {"depth": 2}, {"lexical": "bm25", "weight": 0.3}):
        small = retriever.search("cats mice", mode="hybrid", k=2, **params)
        large = retriever.search("cats mice", mode="hybrid", k=9, **params)
        assert [h.row for h in large[:2]] == [h.row for h in small], params
        assert [h.score for h in large[:2]] == [h.score for h in small]
        assert all(a.score >= b.score for a, b in zip(large, large[1:]))
        assert len({h.row for h in large}) == len(large)


@pytest.mark.parametrize("block", [1, 97, 1 << 23])
def test_doc_groups_from_raw_lines_agree_with_parsing(retriever, tmp_path, monkeypatch, block):
    import ragtui.core.search.docaware as docaware
    from ragtui.core.index.docs_file import DocsFile
    from ragtui.core.search.docaware import doc_groups_of

    monkeypatch.setattr(docaware, "GROUP_BLOCK_BYTES", block)  # a block of lines at a time, whatever its size
    records = retriever.data.records
    parsed = doc_groups([records[i].doc_id for i in range(len(records))])
    assert doc_groups_of(records).tolist() == parsed.tolist()
    # Ids holding '#', digits and quotes, written by the encoder, still split where documents do.
    odd = {'a#1",x.md': ["one", "two"], "b#0.md": ["three"], 'c"#2.md': ["four", "five", "six"]}
    path, recs, _ = build(tmp_path / "art", "odd", odd)
    opened = Retriever.open(path)
    assert doc_groups_of(opened.data.records).tolist() == doc_groups([r.doc_id for r in recs]).tolist()
    # A file in another layout (keys in another order) is parsed line by line instead.
    other = b"".join(
        ('{"doc_id":' + json.dumps(r.doc_id) + ',"chunk_id":' + json.dumps(r.chunk_id)
         + ',"source":"file","uri":' + json.dumps(r.uri) + ',"text":' + json.dumps(r.text)
         + f',"n_tokens":{r.n_tokens},"fingerprint":"{r.fingerprint}"' + "}\n").encode()
        for r in recs
    )
    reordered = DocsFile(other, "docs.jsonl", opened.meta)
    assert doc_groups_of(reordered).tolist() == doc_groups([r.doc_id for r in recs]).tolist()


def test_search_is_the_dense_scores_top_k(retriever):
    lex, bm25 = retriever.doc_lexical(), retriever.data.bm25
    for query in ("cats mice", "dogs", "zebra", "mice mice birds"):
        for cw in (0.0, 0.5, 3.0):
            dense = lex.chunk_scores(bm25, query, cw)
            rows, scores = lex.search(bm25, query, 50, cw)
            order = sorted(np.flatnonzero(dense > 0).tolist(), key=lambda r: (-dense[r], r))
            assert rows.tolist() == order and np.allclose(scores, dense[order], atol=1e-12, rtol=0)


def _entry_files(tmp: Path, fill) -> dict[str, bytes]:
    """The files of a document-level BM25 entry, written by ``fill(StreamedEntry)`` and placed."""
    entry = StreamedEntry(tmp, DOCLEX_KIND, "docs")
    fill(entry)
    assert entry.ok and entry.place("k")
    return {p.name: p.read_bytes() for p in sorted((tmp / f"{DOCLEX_KIND}-docs-k").iterdir())}


vocabulary = st.sampled_from(["cats", "cat", "mice", "the", "dogs", "naïve", "ΣΊΣΥΦΟΣ", "x2y", "run", "runs"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(vocabulary, max_size=8), max_size=12), st.lists(st.integers(0, 3), min_size=1, max_size=12),
       st.integers(1, 40))
def test_the_entry_written_in_blocks_is_the_whole_builds_bytes(chunk_terms, sizes, block):
    """One pass of whole terms a block at a time writes the very files of the whole build's arrays saved."""
    doc_ids = [f"d{i}" for i, n in enumerate(sizes) for _ in range(n + 1)][: len(chunk_terms)]
    doc_ids += [doc_ids[-1] if doc_ids else "d0"] * (len(chunk_terms) - len(doc_ids))
    chunks = BM25Index.from_postings(build_postings(chunk_terms), 1.2, 0.75)
    groups = doc_groups(doc_ids)
    with tempfile.TemporaryDirectory() as whole, tempfile.TemporaryDirectory() as blocks:
        arrays = DocLexical.build(chunks, groups).to_arrays()

        def save(entry: StreamedEntry) -> None:
            for name, a in arrays.items():
                entry.add(name, a.dtype, a.size, [a])

        want = _entry_files(Path(whole), save)
        assert _entry_files(Path(blocks), lambda e: DocLexical.build_into(e, chunks, groups, block=block)) == want
