"""core.answer.pack: the budget, greedy by score per token, merging adjacent chunks, order, fingerprint, freshness."""

from __future__ import annotations

import dataclasses

import pytest

from ragtui.core.answer.pack import MAX_BUDGET, SEPARATOR, pack
from ragtui.core.citations import Resolver
from ragtui.core.embedders.wordllama import WordLlamaEmbedder
from ragtui.core.errors import ModelMismatchError, UsageError
from ragtui.core.ingest.publish import index_dir
from ragtui.core.ingest.sync import sync
from ragtui.core.search.retriever import Hit, Retriever

LONG = "\n".join(f"Line {i}: the lighthouse keeper counts {i} ships passing the northern cape." for i in range(1, 61))
SHORT = "# Notes\n\nA short note about tea.\n"


@pytest.fixture(scope="module")
def embedder():
    return WordLlamaEmbedder()


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder):
    base = tmp_path_factory.mktemp("pack")
    docs = base / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text(LONG + "\n", encoding="utf-8")
    (docs / "short.md").write_text(SHORT, encoding="utf-8")
    art = base / "art"
    sync(docs, artifacts=art, embedder=embedder, max_tokens=40, overlap=8)
    retriever = Retriever.open(index_dir(art, "docs"), embedder=embedder)
    return docs, retriever


def hits_for(data, chunk_ids, scores=None):
    rows = [data.records.find(c) for c in chunk_ids]
    scores = scores or [10.0 - i for i in range(len(rows))]
    return [Hit(i + 1, s, data.records[r].chunk_id, data.records[r].doc_id, r, data.records[r].text)
            for i, (r, s) in enumerate(zip(rows, scores))]


def test_adjacent_chunks_merge_into_one_snippet_with_the_union_lines(built, embedder):
    docs, retriever = built
    data = retriever.data
    hits = hits_for(data, ["docs/long.txt#3", "docs/long.txt#2"])
    result = pack("q", hits, data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data))
    assert len(result.snippets) == 1
    s = result.snippets[0]
    assert s.chunk_ids == ("docs/long.txt#2", "docs/long.txt#3")
    assert s.status == "fresh"
    c2 = Resolver(data).resolve("docs/long.txt#2")
    c3 = Resolver(data).resolve("docs/long.txt#3")
    # The snippet is the source span from chunk 2's start to chunk 3's end: the overlap is not doubled.
    assert s.text == (LONG + "\n")[c2.start_char:c3.end_char]
    assert data.records[c2.row].text in s.text and data.records[c3.row].text in s.text
    assert (s.start_line, s.end_line) == (c2.start_line, c3.end_line)
    assert s.label == f"docs/long.txt:L{c2.start_line}-{c3.end_line}"
    assert s.tokens == embedder.tokenizer.count(s.text)
    assert s.tokens < data.records[c2.row].n_tokens + data.records[c3.row].n_tokens


def test_a_chunk_between_two_snippets_joins_them(built, embedder):
    _, retriever = built
    data = retriever.data
    hits = hits_for(data, ["docs/long.txt#1", "docs/long.txt#3", "docs/long.txt#2"])
    result = pack("q", hits, data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data))
    assert [s.chunk_ids for s in result.snippets] == [("docs/long.txt#1", "docs/long.txt#2", "docs/long.txt#3")]


def test_budget_is_never_exceeded_and_counts_the_separators(built, embedder):
    _, retriever = built
    data = retriever.data
    every = [data.records[r].chunk_id for r in range(len(data.records))]
    for budget in (1, 30, 45, 80, 200, 400):
        result = pack("q", hits_for(data, every), data, embedder.tokenizer, budget, mode="bm25",
                      resolver=Resolver(data))
        tok = embedder.tokenizer
        expected = sum(tok.count(s.text) for s in result.snippets) + max(0, len(result.snippets) - 1) * tok.count(
            SEPARATOR)
        assert result.used == expected <= budget
        assert result.candidates == len(every)


def test_greedy_prefers_score_per_token(built, embedder):
    _, retriever = built
    data = retriever.data
    long0, short0 = data.records[data.records.find("docs/long.txt#0")], data.records[data.records.find("docs/short.md#0")]
    # The long chunk scores higher but the short one scores more per token: with room for one, the short wins.
    hits = hits_for(data, [long0.chunk_id, short0.chunk_id], scores=[2.0, 1.5])
    assert 1.5 / short0.n_tokens > 2.0 / long0.n_tokens
    result = pack("q", hits, data, embedder.tokenizer, long0.n_tokens, mode="bm25", resolver=Resolver(data))
    assert [s.doc_id for s in result.snippets] == ["docs/short.md"]
    assert result.skipped == 1


def test_snippets_are_ordered_by_source_and_line(built, embedder):
    _, retriever = built
    data = retriever.data
    hits = hits_for(data, ["docs/short.md#0", "docs/long.txt#6", "docs/long.txt#0"])
    result = pack("q", hits, data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data))
    assert [s.chunk_ids[0] for s in result.snippets] == ["docs/long.txt#0", "docs/long.txt#6", "docs/short.md#0"]
    assert "[docs/long.txt:L" in result.markdown()


def test_fingerprint_is_stable_and_names_what_was_packed(built, embedder):
    _, retriever = built
    data = retriever.data
    hits = hits_for(data, ["docs/long.txt#4", "docs/short.md#0"])
    a = pack("q", hits, data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data))
    b = pack("another query", list(reversed(hits)), data, embedder.tokenizer, 10_000, mode="bm25",
             resolver=Resolver(data))
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 64
    c = pack("q", hits, data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data), separator="\n---\n")
    assert c.fingerprint != a.fingerprint
    d = pack("q", hits[:1], data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data))
    assert d.fingerprint != a.fingerprint


def test_a_changed_source_is_packed_from_the_index_without_merging(tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text(LONG + "\n", encoding="utf-8")
    sync(docs, artifacts=tmp_path / "art", embedder=embedder, max_tokens=40, overlap=8)
    data = Retriever.open(index_dir(tmp_path / "art", "docs")).data
    (docs / "long.txt").write_text(LONG.replace("ships", "boats") + "\n", encoding="utf-8")
    hits = hits_for(data, ["docs/long.txt#2", "docs/long.txt#3"])
    result = pack("q", hits, data, embedder.tokenizer, 10_000, mode="bm25", resolver=Resolver(data))
    assert [s.chunk_ids for s in result.snippets] == [("docs/long.txt#2",), ("docs/long.txt#3",)]
    assert all(s.status == "changed" and s.start_line is None for s in result.snippets)
    assert [s.text for s in result.snippets] == [h.text for h in hits]
    assert result.snippets[0].label == "docs/long.txt#2"


def test_without_sources_the_indexed_text_is_packed(built, embedder):
    _, retriever = built
    data = retriever.data
    result = pack("q", hits_for(data, ["docs/short.md#0"]), data, embedder.tokenizer, 100, mode="bm25")
    assert result.snippets[0].status == "unread" and result.snippets[0].text == SHORT.strip()


def test_bad_budget_and_foreign_tokenizer_are_refused(built, embedder):
    _, retriever = built
    data = retriever.data
    for budget in (0, -5, MAX_BUDGET + 1, 2.5, True):
        with pytest.raises(UsageError):
            pack("q", [], data, embedder.tokenizer, budget, mode="bm25")

    other = dataclasses.make_dataclass("Other", [("name", str)])("someone-elses-tokenizer")
    with pytest.raises(ModelMismatchError, match="someone-elses-tokenizer"):
        pack("q", [], data, other, 100, mode="bm25")


def test_nothing_fits_gives_an_empty_pack(built, embedder):
    _, retriever = built
    data = retriever.data
    result = pack("q", hits_for(data, ["docs/long.txt#0"]), data, embedder.tokenizer, 3, mode="bm25")
    assert result.snippets == () and result.used == 0 and result.skipped == 1
