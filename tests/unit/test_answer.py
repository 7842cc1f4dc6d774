"""core.answer: labels, the citation check's verdicts, the HyDE cache, rank fusion."""

from __future__ import annotations

import pytest

from ragtui.core.answer.check import check_answer
from ragtui.core.answer.hyde import MAX_ENTRY_BYTES, HydeCache
from ragtui.core.answer.pack import pack
from ragtui.core.answer.run import fuse
from ragtui.core.citations import Resolver, parse_labels
from ragtui.core.embedders.wordllama import WordLlamaEmbedder
from ragtui.core.ingest.publish import index_dir
from ragtui.core.ingest.sync import sync
from ragtui.core.search.retriever import Hit, Retriever

CATS = "# Cats\n\nCats are small domesticated carnivorous mammals.\nThey sleep a lot.\n"
DOGS = "# Dogs\n\nDogs fetch sticks.\n"


def test_parse_labels_forms():
    text = ("A [docs/a.md:L1-3] b [docs/b.md:L4; docs/c.md#2], c [docs/a.md:L5-L9] "
            "not [1], not [a link](x), not [docs#x], not [ref#01] [docs/d.md:L2-4, docs/e.md:L1-1]")
    assert [(x.doc_id, x.start_line, x.end_line, x.chunk_id) for x in parse_labels(text)] == [
        ("docs/a.md", 1, 3, None), ("docs/b.md", 4, 4, None), ("docs/c.md", None, None, "docs/c.md#2"),
        ("docs/a.md", 5, 9, None), ("docs/d.md", 2, 4, None), ("docs/e.md", 1, 1, None)]
    assert parse_labels("[x:L" + "9" * 20 + "]") == []  # a number too long to be a line is not a label
    assert len(parse_labels("[docs/a.md:L1] " * 5000)) == 1000  # bounded


@pytest.fixture
def index(tmp_path):
    emb = WordLlamaEmbedder()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text(CATS, encoding="utf-8")
    (docs / "dogs.md").write_text(DOGS, encoding="utf-8")
    sync(docs, artifacts=tmp_path / "art", embedder=emb)
    data = Retriever.open(index_dir(tmp_path / "art", "docs")).data
    cats = data.records.find("docs/cats.md#0")
    hits = [Hit(1, 1.0, "docs/cats.md#0", "docs/cats.md", cats, data.records[cats].text)]
    packed = pack("cats", hits, data, emb.tokenizer, 500, mode="bm25", resolver=Resolver(data))
    return docs, data, packed


def verdicts(answer, packed, data):
    return [(c.label, c.verdict) for c in check_answer(answer, packed, data)]


def test_every_verdict(index):
    docs, data, packed = index
    assert packed.snippets[0].label == "docs/cats.md:L1-4"
    answer = ("Cats are mammals [docs/cats.md:L1-4] and sleep [docs/cats.md:L4-4] [docs/cats.md#0]. "
              "Dogs fetch [docs/dogs.md:L3-3] [docs/dogs.md#0]. Birds fly [docs/birds.md:L1-2] [docs/cats.md:L50-60] "
              "[docs/cats.md:L1-4].")
    assert verdicts(answer, packed, data) == [
        ("docs/cats.md:L1-4", "verified"), ("docs/cats.md:L4-4", "verified"), ("docs/cats.md#0", "verified"),
        ("docs/dogs.md:L3-3", "not-in-context"), ("docs/dogs.md#0", "not-in-context"),
        ("docs/birds.md:L1-2", "unresolvable"), ("docs/cats.md:L50-60", "unresolvable")]
    assert verdicts("[docs/cats.md:L0-2] [docs/cats.md:L4-2]", packed, data) == [
        ("docs/cats.md:L0-2", "unresolvable"), ("docs/cats.md:L4-2", "unresolvable")]
    # Lines that start inside the snippet but run past it are more than the model was shown (it fails the check).
    assert verdicts("[docs/cats.md:L3-9]", packed, data) == [("docs/cats.md:L3-9", "not-in-context")]


def test_stale_when_the_source_changed_or_moved_after_packing(index):
    docs, data, packed = index
    (docs / "cats.md").write_text("New first line.\n" + CATS, encoding="utf-8")  # same text, lines shifted
    [check] = check_answer("[docs/cats.md:L1-4]", packed, data)
    assert check.verdict == "stale" and "now on lines 2-5" in check.reason
    (docs / "cats.md").write_text(CATS.replace("small", "large"), encoding="utf-8")
    [check] = check_answer("[docs/cats.md#0]", packed, data)
    assert check.verdict == "stale" and "changed" in check.reason
    (docs / "cats.md").unlink()
    [check] = check_answer("[docs/cats.md:L1-4]", packed, data)
    assert check.verdict == "stale" and "missing" in check.reason


def test_hyde_cache_round_trip_and_bad_entries(tmp_path):
    cache = HydeCache(tmp_path / "hyde")
    assert cache.get("http://s", "m", "q") is None
    assert cache.put("http://s", "m", "q", "a passage")
    assert cache.get("http://s", "m", "q") == "a passage"
    assert cache.get("http://s", "other-model", "q") is None and cache.get("http://s", "m", "q2") is None
    path = cache.path(cache.key("http://s", "m", "q"))
    for bad in (b"{not json", b"[]", b'{"key": "wrong", "question": "q", "text": "x"}', b"x" * (MAX_ENTRY_BYTES + 5)):
        path.write_bytes(bad)
        assert cache.get("http://s", "m", "q") is None
    (tmp_path / "ro").write_text("a file where the folder should be")
    assert HydeCache(tmp_path / "ro" / "hyde").put("s", "m", "q", "x") is False  # no error: the cache is optional


def test_fuse_is_reciprocal_rank_fusion():
    a = [Hit(1, 9.0, "d/a#0", "d/a", 0, "a"), Hit(2, 5.0, "d/b#0", "d/b", 1, "b")]
    b = [Hit(1, 0.9, "d/b#0", "d/b", 1, "b"), Hit(2, 0.5, "d/c#0", "d/c", 2, "c")]
    fused = fuse([a, b], 10)
    assert [h.chunk_id for h in fused] == ["d/b#0", "d/a#0", "d/c#0"]
    assert [h.rank for h in fused] == [1, 2, 3]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)


def test_a_fifo_or_a_folder_in_the_hyde_cache_is_a_miss_not_a_hang(tmp_path):
    import os

    cache = HydeCache(tmp_path / "hyde")
    cache.folder.mkdir(parents=True)
    os.mkfifo(cache.path(cache.key("s", "m", "fifo")))  # nobody writes it: a blocking open would wait forever
    os.mkdir(cache.path(cache.key("s", "m", "dir")))
    assert cache.get("s", "m", "fifo") is None and cache.get("s", "m", "dir") is None


def test_the_prompts_example_label_can_never_be_a_verified_or_real_citation(tmp_path):
    from ragtui.core.answer.prompt import EXAMPLE_LABEL, answer_messages

    emb = WordLlamaEmbedder()
    notes = tmp_path / "notes"  # documents named as a fixed example might name them
    notes.mkdir()
    (notes / "tea.md").write_text("Tea is a drink made by steeping leaves in hot water.\nIt is old.\n", encoding="utf-8")
    (notes / "guide.md").write_text("".join(f"line {i} of the guide\n" for i in range(1, 41)), encoding="utf-8")
    sync(notes, artifacts=tmp_path / "art", embedder=emb)
    data = Retriever.open(index_dir(tmp_path / "art", "notes")).data
    row = data.records.find("notes/guide.md#0")
    hits = [Hit(1, 1.0, "notes/guide.md#0", "notes/guide.md", row, data.records[row].text)]
    packed = pack("guide", hits, data, emb.tokenizer, 500, mode="bm25", resolver=Resolver(data))
    messages = answer_messages("What is tea?", packed)
    fixed = "\n".join(m["content"] for m in messages[:3])  # the system message and the worked example
    labels = {x.text for x in parse_labels(fixed)}
    assert labels == {EXAMPLE_LABEL}, labels  # the example teaches the form, with one placeholder only
    assert "placeholder" in messages[0]["content"] and EXAMPLE_LABEL in messages[0]["content"]
    copied = f"Tea is a drink [{EXAMPLE_LABEL}]."  # what a small model copying the example writes
    assert verdicts(copied, packed, data) == [(EXAMPLE_LABEL, "unresolvable")]
