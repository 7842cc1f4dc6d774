"""The fast BM25 paths (block-max pruning, one-pass dense sum, term lookup) against the plain reference."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.index import bm25_prune
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.bm25_prune import SearchStats, dense_scores_top_k, term_keys
from ragtui.core.index.bm25_write import build_postings, encode_bm25
from ragtui.core.index.topk import top_k

WORDS = ["a", "b", "c", "the", "of", "zeta", "αβγ", "東京", "longerthaneight", "longerthaneigh", "x1", "x2"]

word = st.sampled_from(WORDS)
# Few distinct documents, repeated: many chunks tie exactly, so the tie rule is exercised.
templates = st.lists(st.lists(word, min_size=0, max_size=12), min_size=1, max_size=6)


@st.composite
def corpora(draw):
    shapes = draw(templates)
    picks = draw(st.lists(st.integers(0, len(shapes) - 1), min_size=1, max_size=150))
    return [shapes[i] for i in picks]


queries = st.lists(st.sampled_from(WORDS + ["missing", "zz"]), min_size=0, max_size=8)


def same(got, want):
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == want[1].tolist()  # bit for bit: the scores are summed in the same order


@pytest.mark.parametrize("block", [1, 2, 16])
# The fixture's patch is the same for every example (set once per parametrized block size).
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=corpora(), query=queries, k=st.integers(1, 25), k1=st.sampled_from([0.0, 1.2, 2.0]),
       b=st.sampled_from([0.0, 0.75, 1.0]))
def test_every_path_equals_the_exhaustive_reference(monkeypatch, block, docs, query, k, k1, b):
    monkeypatch.setattr(bm25_prune, "BLOCK", block)
    monkeypatch.setattr(bm25_prune, "SEED_BLOCKS", 1)  # a weak first theta: the second round must do the rest
    ix = BM25Index.decode(encode_bm25(docs), k1, b)
    text = " ".join(query)
    want = ix.search_exhaustive(text, k)
    found = ix.term_ids(text)
    for how in ("auto", "pruned", "dense"):
        same(ix.search_terms(found, k, how=how), want)
    same(ix.search(text, k), want)
    scores = ix.scores(text)
    matched = np.flatnonzero(scores > 0)
    same(want, top_k(scores[matched], matched, k))


@settings(max_examples=60, deadline=None)
@given(docs=corpora(), query=queries, k=st.integers(1, 10))
def test_the_pruned_path_reads_fewer_postings_or_says_it_did_not_prune(docs, query, k):
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    stats = SearchStats()
    ix.search_terms(ix.term_ids(" ".join(query)), k, stats, how="pruned")
    assert stats.touched >= 0
    if stats.pruned:
        assert 0 < stats.blocks <= stats.n_blocks
    else:
        assert stats.touched == stats.postings


def test_pruning_skips_blocks_whose_bound_is_below_the_kth_score(monkeypatch):
    monkeypatch.setattr(bm25_prune, "BLOCK", 4)
    monkeypatch.setattr(bm25_prune, "SEED_BLOCKS", 1)
    # Chunks 0-3 hold the rare term; every chunk holds the common one.
    docs = [["rare", "common"]] * 4 + [["common", "filler", "filler"]] * 400
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    stats = SearchStats()
    rows, _ = ix.search_terms(ix.term_ids("rare common"), 3, stats, how="pruned")
    assert rows.tolist() == [0, 1, 2]
    assert stats.pruned and stats.blocks <= 2 and stats.n_blocks == 101  # the seed blocks only
    assert stats.touched < stats.postings / 2
    same((rows, _), ix.search_exhaustive("rare common", 3))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab\x00é東", min_size=1, max_size=12), min_size=1, max_size=30, unique=True),
       st.lists(st.text(alphabet="ab\x00é東", min_size=1, max_size=12), max_size=10))
def test_lookup_finds_exactly_the_dictionary_terms(terms, probes):
    # NUL-padded keys collide ("a" and "a\x00"): the lookup must still tell them apart.
    p = build_postings([terms])
    ix = BM25Index.from_postings(p, 1.2, 0.75)
    keys = term_keys(p.term_blob, p.term_starts)
    assert np.all(keys[1:] >= keys[:-1])
    ordered = sorted(terms, key=lambda t: t.encode("utf-8"))
    for probe in terms + probes:
        want = ordered.index(probe) if probe in ordered else -1
        assert ix.lookup(probe) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5, 1e-300]), max_size=80), st.integers(1, 12))
def test_dense_top_k_equals_top_k_of_the_matched(values, k):
    scores = np.array(values, dtype=np.float64)
    matched = np.flatnonzero(scores > 0)
    same(dense_scores_top_k(scores, k), top_k(scores[matched], matched, k))


def test_cached_arrays_round_trip_with_the_term_keys(tmp_path):
    data = encode_bm25([["cat", "dog"], ["dog"], ["longerthaneight", "cat"]])
    first = BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    again = BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    assert np.array_equal(first.term_key, again.term_key)
    for query in ("cat", "dog cat", "longerthaneight", "nothing"):
        same(again.search(query, 5), first.search_exhaustive(query, 5))


def test_remembered_lookups_survive_the_memo_starting_over(monkeypatch):
    from ragtui.core.index import bm25 as bm25_module

    monkeypatch.setattr(bm25_module, "_MEMO_TERMS", 3)
    docs = [["cat", "dog"], ["dog", "emu"], ["fox"], ["cat", "gnu", "hen"]]
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    fresh = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    for query in ["cat dog", "emu fox gnu hen", "cat nope", "dog dog hen", "cat dog", "nope"] * 2:
        assert ix.term_ids(query) == [(fresh.lookup(t), n) for t, n in Counter(query.split()).items()
                                      if fresh.lookup(t) >= 0]
        same(ix.search(query, 3), fresh.search_exhaustive(query, 3))


def test_a_cache_entry_without_term_keys_still_loads(tmp_path):
    data = encode_bm25([["cat", "dog"], ["dog"]])
    BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    (key_file,) = tmp_path.glob("bm25-*/term_key.npy")
    key_file.unlink()
    again = BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    same(again.search("dog cat", 2), BM25Index.decode(data, 1.2, 0.75).search_exhaustive("dog cat", 2))


@pytest.mark.parametrize("damage", ["missing", "short", "two-d", "text", "scalars"])
@pytest.mark.parametrize("name", ["df", "offsets", "post_doc", "weights", "term_starts", "doc_len"])
def test_a_damaged_cache_entry_is_decoded_anew_and_replaced(tmp_path, name, damage):
    """The cache only saves time: an entry that lost an array, or holds one of the wrong shape, is not
    read as an index (it used to end in a KeyError or an IndexError inside a search)."""
    docs = [["cat", "dog"], ["dog"], ["longerthaneight", "cat"], ["emu", "dog", "dog"]]
    data = encode_bm25(docs)
    BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    (entry,) = tmp_path.glob("bm25-*")
    target = entry / f"{name}.npy"
    if damage == "missing":
        target.unlink()
    elif damage == "short":
        np.save(target, np.load(target)[:-1])
    elif damage == "two-d":
        np.save(target, np.load(target).reshape(1, -1))
    elif damage == "text":
        np.save(target, np.array(["x"] * np.load(target).size))
    else:
        np.save(entry / "scalars.npy", np.array([len(docs), 1.0, 1.2, np.nan]))
    again = BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    reference = BM25Index.decode(data, 1.2, 0.75)
    for query in ("cat", "dog cat", "longerthaneight emu", "nothing"):
        same(again.search(query, 5), reference.search_exhaustive(query, 5))
    (entry,) = tmp_path.glob("bm25-*")  # replaced by a sound one
    assert np.array_equal(np.load(entry / f"{name}.npy"), getattr(reference, name))
    assert not (entry / "scalars.npy").exists() or np.isfinite(np.load(entry / "scalars.npy")).all()


def test_a_sound_cache_entry_is_taken_as_it_is(tmp_path, monkeypatch):
    """The soundness check must pass what the cache really holds (post_doc is stored as uint32): else every
    load would decode bm25.idx again and rewrite its entry."""
    data = encode_bm25([["cat", "dog"], ["dog"], ["longerthaneight", "cat"], ["emu", "dog", "dog"]])
    BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    (entry,) = tmp_path.glob("bm25-*")
    mtime = entry.stat().st_mtime_ns
    reference = BM25Index.decode(data, 1.2, 0.75).search("dog", 3)

    def decode(*a, **k):
        raise AssertionError("decoded again")

    monkeypatch.setattr(BM25Index, "decode", classmethod(decode))
    again = BM25Index.load(data, 1.2, 0.75, cache_dir=tmp_path)
    same(again.search("dog", 3), reference)
    assert entry.stat().st_mtime_ns == mtime
    # From a stored decoding too (from_postings), as a writer leaves it for its readers.
    BM25Index.from_postings(build_postings([["a", "b"], ["b"]]), 1.2, 0.75).store(
        encode_bm25([["a", "b"], ["b"]]), tmp_path / "w", "index")
    assert BM25Index.load(encode_bm25([["a", "b"], ["b"]]), 1.2, 0.75, cache_dir=tmp_path / "w").n_docs == 2


def test_a_first_search_scores_whole_and_the_entries_come_once_searches_have_read_as_much(monkeypatch):
    monkeypatch.setattr(bm25_prune, "PRUNE_MIN_POSTINGS", 1)
    monkeypatch.setattr(bm25_prune, "PRUNE_MAX_ENTRIES", 10.0)  # prune whenever the entries are there
    rng = np.random.default_rng(7)
    docs = [list(rng.choice(WORDS, size=8)) for _ in range(400)]
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    total = int(ix.offsets[-1])
    query = "the of zeta a"
    want = ix.search_exhaustive(query, 10)
    per_query = sum(int(ix.offsets[t + 1] - ix.offsets[t]) for t, _ in ix.term_ids(query))

    stats = SearchStats()
    same(ix.search_terms(ix.term_ids(query), 10, stats), want)
    assert not stats.pruned and "_blocks" not in ix.__dict__  # nothing built for one query
    for _ in range((total - 1) // per_query - 1):  # every query so far short of the index's postings
        same(ix.search(query, 10), want)
    assert "_blocks_thread" not in ix.__dict__  # short of the index's postings: still not started
    same(ix.search(query, 10), want)  # this one passes them: the build starts beside it
    ix.wait_blocks()
    assert "_blocks" in ix.__dict__
    stats = SearchStats()
    same(ix.search_terms(ix.term_ids(query), 10, stats), want)
    assert stats.pruned


def test_the_pruned_path_asked_for_builds_the_entries_at_once():
    docs = [["a", "b", "the"], ["the", "of"], ["zeta", "a"]] * 20
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    want = ix.search_exhaustive("a the", 5)
    same(ix.search_terms(ix.term_ids("a the"), 5, how="pruned"), want)
    assert "_blocks" in ix.__dict__ and "_blocks_thread" not in ix.__dict__
