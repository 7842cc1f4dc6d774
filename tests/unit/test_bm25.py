"""bm25.idx: hand-made bytes, round trips, and scoring against a plain reference."""

import math
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.errors import IndexFormatError
from ragtui.core.index import leb128
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.bm25_splice import (
    _carry_and_insert,
    _dropped_postings,
    _insert_points,
    encode_spliced,
    splice_postings,
)
from ragtui.core.index.bm25_write import encode_bm25, encode_postings


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def hand_made(docs_terms):
    """A deliberately plain writer, straight from the spec, to check the real one byte for byte."""
    n = len(docs_terms)
    vocab = sorted({t for d in docs_terms for t in d}, key=lambda t: t.encode("utf-8"))
    doc_len = [len(d) for d in docs_terms]
    avgdl = sum(doc_len) / n if n else 0.0
    out = b"TLBM" + struct.pack("<III", 1, n, len(vocab)) + struct.pack("<d", avgdl)
    out += b"".join(struct.pack("<I", x) for x in doc_len)
    for term in vocab:
        postings = b""
        prev = None
        df = 0
        for i, d in enumerate(docs_terms):
            tf = d.count(term)
            if tf:
                postings += varint(i if prev is None else i - prev) + varint(tf)
                prev = i
                df += 1
        raw = term.encode("utf-8")
        out += struct.pack("<H", len(raw)) + raw + struct.pack("<II", df, len(postings)) + postings
    return out


def reference_search(docs_terms, query, k1=1.2, b=0.75):
    """Plain BM25 from the spec's formula: a loop over query terms, repetitions counted each time."""
    n = len(docs_terms)
    avgdl = sum(len(d) for d in docs_terms) / n if n else 0.0
    results = []
    for i, d in enumerate(docs_terms):
        score = 0.0
        hit = False
        for q in analyze(query):
            tf = d.count(q)
            if not tf:
                continue
            hit = True
            df = sum(1 for x in docs_terms if q in x)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
        if hit:
            results.append((i, score))
    results.sort(key=lambda r: (-r[1], r[0]))
    return results


def test_encoding_matches_hand_made_bytes():
    texts = ["The cat sat on the mat.", "Dogs and cats; ΟΔΟΣ", "the the the", "", "İstanbul 東京 cat"]
    docs_terms = [analyze(t) for t in texts]
    assert encode_bm25(docs_terms) == hand_made(docs_terms)


def test_exact_layout_of_a_tiny_index():
    data = encode_bm25([["b", "a"], ["b"]])
    expected = (
        b"TLBM" + struct.pack("<IIId", 1, 2, 2, 1.5) + struct.pack("<II", 2, 1)
        + b"\x01\x00a" + struct.pack("<II", 1, 2) + b"\x00\x01"
        + b"\x01\x00b" + struct.pack("<II", 2, 4) + b"\x00\x01\x01\x01"
    )
    assert data == expected


def test_empty_index_round_trip():
    data = encode_bm25([])
    assert data == b"TLBM" + struct.pack("<IIId", 1, 0, 0, 0.0)
    ix = BM25Index.decode(data, 1.2, 0.75)
    assert ix.n_docs == 0 and ix.n_terms == 0
    rows, scores = ix.search("anything", 10)
    assert rows.size == 0 and scores.size == 0


def test_large_gaps_and_tf_need_multibyte_varints():
    docs = [[] for _ in range(300)]
    docs[0] = ["x"] * 200
    docs[299] = ["x"]
    data = encode_bm25(docs)
    assert data == hand_made(docs)
    ix = BM25Index.decode(data, 1.2, 0.75)
    assert ix.post_doc.tolist() == [0, 299]
    assert ix.post_tf.tolist() == [200, 1]


words = st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "σοφία", "東京", "x1"])


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(st.lists(words, min_size=0, max_size=60), min_size=0, max_size=25),
    query=st.lists(st.one_of(words, st.just("missing")), min_size=1, max_size=6),
    k=st.integers(1, 30),
    k1=st.sampled_from([1.2, 0.9, 2.0]),
    b=st.sampled_from([0.75, 0.4, 0.0, 1.0]),
)
def test_scores_agree_with_reference(docs, query, k, k1, b):
    texts = [" ".join(d) for d in docs]
    docs_terms = [analyze(t) for t in texts]
    ix = BM25Index.decode(encode_bm25(docs_terms), k1, b)
    q = " ".join(query)
    every = reference_search(docs_terms, q, k1, b)
    expected = every[:k]
    rows, scores = ix.search(q, k)
    assert rows.tolist() == [r for r, _ in expected] or _same_up_to_ties(rows, scores, expected, dict(every))
    for got, (_, want) in zip(scores.tolist(), expected):
        assert abs(got - want) <= 1e-9


def _same_up_to_ties(rows, scores, expected, reference):
    # The two compute each weight with other roundings (a precomputed length norm against the formula as
    # written), so chunks whose scores are equal in exact arithmetic may differ by an ulp and swap, or
    # another of them make the cut at k. Accept only that: every row returned is a match whose reference
    # score is its own to 1e-12 and reaches the k-th best to 1e-12.
    if len(rows) != len(expected):
        return False
    kth = expected[-1][1] if expected else 0.0
    return all(
        r in reference and abs(reference[r] - s) <= 1e-12 and reference[r] >= kth - 1e-12
        for r, s in zip(rows.tolist(), scores.tolist())
    )


def test_edge_corpora():
    # One chunk; a term in every chunk; very long and very short chunks.
    one = [analyze("solo text here")]
    ix = BM25Index.decode(encode_bm25(one), 1.2, 0.75)
    assert ix.search("text", 5)[0].tolist() == [0]
    every = [analyze(f"common word{i}") for i in range(50)]
    ix = BM25Index.decode(encode_bm25(every), 1.2, 0.75)
    rows, scores = ix.search("common", 100)
    assert rows.tolist() == list(range(50))  # all tie; ascending chunk number
    assert np.all(scores > 0)
    mixed = [analyze("needle " * 5000), analyze("needle")]
    ix = BM25Index.decode(encode_bm25(mixed), 1.2, 0.75)
    rows, _ = ix.search("needle", 2)
    exp = reference_search(mixed, "needle")
    assert rows.tolist() == [r for r, _ in exp]


def test_repeated_query_terms_count_each_time():
    docs = [analyze("apple banana"), analyze("banana banana cherry"), analyze("apple")]
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    _, once = ix.search("apple", 3)
    _, twice = ix.search("apple apple", 3)
    assert np.allclose(twice, 2 * once, rtol=0, atol=1e-12)


def test_chunks_without_query_terms_are_not_results():
    docs = [analyze("a b"), analyze("c d"), analyze("a")]
    ix = BM25Index.decode(encode_bm25(docs), 1.2, 0.75)
    rows, _ = ix.search("a", 10)
    assert sorted(rows.tolist()) == [0, 2]
    assert ix.search("zzz", 10)[0].size == 0


# -- readers must reject ---------------------------------------------------------


def _good():
    return encode_bm25([analyze("alpha beta"), analyze("beta gamma gamma"), analyze("delta")])


def _reject(data, match):
    with pytest.raises(IndexFormatError, match=match):
        BM25Index.decode(data, 1.2, 0.75, path="bm25.idx")


def test_rejects_bad_magic_and_version():
    data = _good()
    _reject(b"XXXX" + data[4:], "magic")
    _reject(data[:4] + struct.pack("<I", 2) + data[8:], "version")


def test_rejects_every_truncation():
    data = _good()
    for cut in range(len(data)):
        with pytest.raises(IndexFormatError):
            BM25Index.decode(data[:cut], 1.2, 0.75)


def test_rejects_trailing_bytes():
    _reject(_good() + b"\x00", "unexpected bytes")


def test_rejects_terms_out_of_order():
    docs = [["b"], ["a"]]
    data = bytearray(hand_made(docs))
    # Swap the two one-letter terms in place: "a" entry then "b" entry become "b", "a".
    i = data.index(b"\x01\x00a")
    j = data.index(b"\x01\x00b")
    data[i + 2], data[j + 2] = ord("b"), ord("a")
    _reject(bytes(data), "out of order")


def test_rejects_postings_overrun_and_leftover_bytes():
    header = b"TLBM" + struct.pack("<IIId", 1, 2, 1, 1.0) + struct.pack("<II", 1, 1)
    entry = b"\x01\x00a"
    # df 2 but postings_bytes holds only one pair, then the next bytes would be needed.
    _reject(header + entry + struct.pack("<II", 2, 2) + b"\x00\x01", "varints")
    # df 1 but postings_bytes holds two pairs: bytes left over.
    _reject(header + entry + struct.pack("<II", 1, 4) + b"\x00\x01\x01\x01", "varints")
    # A varint cut by postings_bytes.
    _reject(header + entry + struct.pack("<II", 1, 1) + b"\x80", "truncated")


def test_rejects_bad_varints():
    header = b"TLBM" + struct.pack("<IIId", 1, 1, 1, 1.0) + struct.pack("<I", 1)
    entry = b"\x01\x00a"
    too_long = b"\x80\x80\x80\x80\x80\x00"
    _reject(header + entry + struct.pack("<II", 1, len(too_long) + 1) + too_long + b"\x01", "longer than 5")
    too_big = b"\xff\xff\xff\xff\x1f"
    _reject(header + entry + struct.pack("<II", 1, len(too_big) + 1) + too_big + b"\x01", "32 bits")


def test_rejects_inconsistent_counts():
    data = bytearray(_good())
    struct.pack_into("<I", data, 8, 4)  # n_docs 4 with 3 doc_len entries follows into term bytes
    with pytest.raises(IndexFormatError):
        BM25Index.decode(bytes(data), 1.2, 0.75)
    data = bytearray(_good())
    struct.pack_into("<I", data, 24, 7)  # doc_len[0] wrong
    with pytest.raises(IndexFormatError):
        BM25Index.decode(bytes(data), 1.2, 0.75)


def test_rejects_zero_later_gap_and_doc_out_of_range():
    header = b"TLBM" + struct.pack("<IIId", 1, 2, 1, 1.0) + struct.pack("<II", 1, 1)
    entry = b"\x01\x00a"
    _reject(header + entry + struct.pack("<II", 2, 4) + b"\x00\x01\x00\x01", "ascending")
    _reject(header + entry + struct.pack("<II", 1, 2) + b"\x05\x01", "n_docs")


@given(st.lists(st.integers(0, 2**32 - 1), max_size=200))
def test_leb128_round_trip(values):
    data = leb128.encode(np.array(values, dtype=np.uint64))
    assert data == b"".join(varint(v) for v in values)
    assert leb128.decode(data).tolist() == values


# Terms sharing their first 8 bytes too ("internat..."), which the dictionary's 8-byte keys do not tell apart.
splice_words = st.sampled_from(["alpha", "beta", "gamma", "σοφία", "東京", "x1", "zz", "a", "internationale",
                                "internationalisation", "internat"])
new_words = st.sampled_from(["alpha", "beta", "new1", "new2", "ünï", "zz", "0", "internationally", "internati",
                             "internat", "internationale"])


@settings(max_examples=300, deadline=None)
@given(
    old=st.lists(st.lists(splice_words, max_size=12), max_size=40),
    keep=st.lists(st.booleans(), min_size=40, max_size=40),
    inserts=st.lists(st.tuples(st.integers(0, 60), st.lists(new_words, max_size=10)), max_size=6),
)
def test_splicing_equals_building_from_scratch(old, keep, inserts):
    """Postings carried over from an old index plus new chunks: the same bytes as a full build."""
    old_data = encode_bm25(old)
    old_ix = BM25Index.decode(old_data, 1.2, 0.75)
    rows = [("old", i, terms) for i, terms in enumerate(old) if keep[i]]
    for at, terms in inserts:
        rows.insert(min(at, len(rows)), ("new", -1, terms))
    row_map = np.full(len(old), -1, dtype=np.int64)
    new_rows, new_terms = [], []
    for n, (kind, i, terms) in enumerate(rows):
        if kind == "old":
            row_map[i] = n
        else:
            new_rows.append(n)
            new_terms.append(terms)
    spliced = splice_postings(old_ix, row_map, len(rows), new_rows, new_terms)
    want = encode_bm25([terms for _, _, terms in rows])
    assert encode_postings(spliced) == want
    assert encode_spliced(old_data, old_ix, spliced) == want
    for limit in (0, 1_000_000):  # byte masks, stretch by stretch
        assert encode_spliced(old_data, old_ix, spliced, stretch_limit=limit) == want
    decoded = BM25Index.decode(want, 1.2, 0.75).to_arrays()
    for key, value in BM25Index.from_postings(spliced, 1.2, 0.75).to_arrays().items():
        assert np.array_equal(value, decoded[key]), key


dictionary_words = st.text(st.sampled_from("abcé東\x01"), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(dictionary_words, max_size=30, unique=True), asked=st.lists(dictionary_words, max_size=30))
def test_locate_many_agrees_with_a_sorted_list(terms, asked):
    """Each asked term's number (or -1) and how many dictionary terms sort before it, as bisect on the list says."""
    import bisect

    index = BM25Index.decode(encode_bm25([[t] for t in terms]), 1.2, 0.75)
    listed = sorted(t.encode("utf-8") for t in terms)
    raws = [a.encode("utf-8") for a in asked]
    found, before = index.locate_many(raws)
    for raw, f, b in zip(raws, found.tolist(), before.tolist()):
        at = bisect.bisect_left(listed, raw)
        assert b == at
        assert f == (at if at < len(listed) and listed[at] == raw else -1)
    assert index.lookup_many(raws) == found.tolist()


@given(runs=st.lists(st.lists(st.integers(0, 50), max_size=8), max_size=10),
       asked=st.lists(st.tuples(st.integers(0, 9), st.integers(-1, 52)), max_size=30))
def test_insert_points_equal_searchsorted_in_each_run(runs, asked):
    runs = [sorted(r) for r in runs] or [[]]
    flat = np.array([v for r in runs for v in r], dtype=np.int32)
    bounds = np.cumsum([0] + [len(r) for r in runs])
    which = [min(w, len(runs) - 1) for w, _ in asked]
    lo = bounds[which] if which else np.zeros(0, dtype=np.int64)
    hi = bounds[[w + 1 for w in which]] if which else np.zeros(0, dtype=np.int64)
    values = np.array([v for _, v in asked], dtype=np.int64)
    got = _insert_points(flat, lo, hi, values)
    want = [lo_ + np.searchsorted(flat[lo_:hi_], v) for lo_, hi_, v in zip(lo, hi, values)]
    assert got.tolist() == [int(w) for w in want]


@settings(max_examples=200, deadline=None)
@given(keep=st.lists(st.booleans(), min_size=1, max_size=12), postings=st.lists(st.integers(0, 11), max_size=40),
       inserts=st.lists(st.tuples(st.integers(0, 45), st.integers(100, 200)), max_size=8), step=st.integers(1, 50))
def test_carrying_postings_in_steps_equals_renumbering_and_inserting_whole(keep, postings, inserts, step):
    """The old postings renumbered, the dropped ones left out and new ones put in, a step at a time: the same
    arrays as one take, one mask and ``np.insert``."""
    row_map = np.where(keep, np.cumsum(keep) - 1, -1).astype(np.int32)
    post_doc = np.array([p % len(keep) for p in postings], dtype=np.uint32)
    post_tf = np.arange(1, post_doc.size + 1, dtype=np.uint32)
    old = BM25Index.from_postings(Postings(np.ones(len(keep), dtype=np.uint32), np.zeros(0, dtype=np.uint8),
                                           np.zeros(1, dtype=np.int64), np.array([0, post_doc.size], dtype=np.int64),
                                           post_doc, post_tf), 1.2, 0.75)
    mapped = row_map[post_doc.astype(np.int64)]
    dropped = _dropped_postings(row_map, post_doc, step)
    assert dropped.tolist() == np.flatnonzero(mapped < 0).tolist()
    n_kept = int((mapped >= 0).sum())
    at = np.array(sorted(min(a, n_kept) for a, _ in inserts), dtype=np.int64)
    add = np.array([v for _, v in inserts], dtype=np.int64)
    doc, tf = _carry_and_insert(old, row_map, dropped, at, add, add + 1, step)
    assert doc.tolist() == np.insert(mapped[mapped >= 0], at, add).tolist()
    assert tf.tolist() == np.insert(post_tf[mapped >= 0], at, add + 1).tolist()
    assert doc.dtype == np.int32 and tf.dtype == np.uint32


def test_varint_sizes_match_the_encoding():
    values = np.array([0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**32 - 1], dtype=np.uint64)
    assert [len(leb128.encode(np.array([v]))) for v in values] == leb128.sizes(values).tolist()
    assert leb128.decode(leb128.encode(values)).tolist() == values.tolist()
    with pytest.raises(ValueError):
        leb128.encode(np.array([2**32], dtype=np.uint64))


@pytest.mark.parametrize("seed", range(4))
def test_weights_equal_the_plain_formula_to_the_bit(seed):
    """``_weights`` (per-chunk norms, a tf table, in-place operations, a block at a time) is the reference formula,
    value for value."""
    from ragtui.core.index.bm25 import _weights, _weights_reference

    rng = np.random.default_rng(seed)
    n_docs, n_terms = 300, 120
    df = rng.integers(0, 40, n_terms)
    offsets = np.concatenate(([0], np.cumsum(df)))
    post_doc = np.concatenate([np.sort(rng.choice(n_docs, d, replace=False)) for d in df]).astype(np.int64)
    big = seed == 3  # a tf beyond the table
    post_tf = rng.integers(1, 70000 if big else 9, post_doc.size).astype(np.int64)
    doc_len = np.bincount(post_doc, weights=post_tf, minlength=n_docs).astype(np.uint32)
    avgdl = float(doc_len.mean()) if seed else 0.0
    for k1, b in ((1.2, 0.75), (0.0, 0.0), (2.7, 1.0), (0.9, 0.3)):
        args = (df, offsets, post_doc, post_tf, doc_len, avgdl, n_docs, k1, b)
        want = _weights_reference(*args)
        assert np.array_equal(_weights(*args), want)
        assert np.array_equal(_weights(*args[:3], post_tf.astype(np.uint32), *args[4:]), want)
        for block in (1, 7, 64):  # blocks that cut terms, and empty terms, anywhere
            assert np.array_equal(_weights(*args, block=block), want)


@pytest.mark.parametrize("seed", range(6))
def test_chained_splices_of_a_larger_index_equal_full_builds(seed):
    """Splice after splice, each from the file the last one wrote: multi-byte gaps (hundreds of chunks between a
    term's postings), chunk counts that shift every later chunk, terms born and gone; every file equal to a
    full build, by masks and stretch by stretch."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(600)] + ["ünï", "東京", "σοφία"]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()

    def chunk() -> list[str]:
        return list(rng.choice(vocab, size=int(rng.integers(1, 40)), p=weights))

    chunks = [chunk() for _ in range(3000)]
    data = encode_bm25(chunks)
    index = BM25Index.decode(data, 1.2, 0.75)
    for _ in range(4):
        # Drop a few runs of chunks, put new ones in at a few places (some with words never seen).
        keep = np.ones(len(chunks), dtype=bool)
        for lo in rng.integers(0, len(chunks), size=3):
            keep[lo : lo + int(rng.integers(1, 5))] = False
        rows: list[tuple[int, list[str]]] = [(i, terms) for i, terms in enumerate(chunks) if keep[i]]
        for at in sorted(rng.integers(0, len(rows), size=3), reverse=True):
            for _ in range(int(rng.integers(0, 4))):
                extra = [f"fresh{int(rng.integers(0, 10_000))}"] if rng.random() < 0.5 else []
                rows.insert(int(at), (-1, chunk() + extra))
        row_map = np.full(len(chunks), -1, dtype=np.int64)
        new_rows, new_terms = [], []
        for n, (i, terms) in enumerate(rows):
            if i >= 0:
                row_map[i] = n
            else:
                new_rows.append(n)
                new_terms.append(terms)
        chunks = [terms for _, terms in rows]
        want = encode_bm25(chunks)
        spliced = splice_postings(index, row_map, len(chunks), new_rows, new_terms)
        for limit in (0, 1_000_000):
            assert encode_spliced(data, index, spliced, stretch_limit=limit) == want
        data = encode_spliced(data, index, spliced)
        assert data == want
        index = BM25Index.from_postings(spliced, 1.2, 0.75)
        decoded = BM25Index.decode(want, 1.2, 0.75).to_arrays()
        for key, value in index.to_arrays().items():
            assert np.array_equal(value, decoded[key]), key


@given(a=st.lists(st.integers(0, 3), max_size=40), a_gone=st.sets(st.integers(0, 39), max_size=8),
       extra=st.integers(0, 8), step=st.integers(1, 50), data=st.data())
def test_differing_equals_comparing_the_two_arrays_without_their_gone_elements(a, a_gone, extra, step, data):
    from ragtui.core.index.bm25_splice import _differing

    a_gone = sorted(g for g in a_gone if g < len(a))
    b_len = len(a) - len(a_gone) + extra
    b_gone = sorted(data.draw(st.sets(st.integers(0, max(b_len - 1, 0)), min_size=extra, max_size=extra))) if b_len else []
    b = data.draw(st.lists(st.integers(0, 3), min_size=b_len, max_size=b_len))
    a_arr, b_arr = np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)
    ga, gb = np.array(a_gone, dtype=np.int64), np.array(b_gone, dtype=np.int64)
    want = np.flatnonzero(np.delete(a_arr, ga) != np.delete(b_arr, gb))
    got = _differing(lambda lo, hi: a_arr[lo:hi], a_arr.size, ga, lambda lo, hi: b_arr[lo:hi], b_arr.size, gb, step)
    assert got.tolist() == want.tolist()


@given(n=st.integers(0, 13_000), seed=st.integers(0, 2**32 - 1), step=st.integers(1, 9_000),
       asked=st.integers(0, 200))
def test_offsets_at_the_positions_asked_equal_one_cumulative_sum(n, seed, step, asked):
    from ragtui.core.index.bm25_splice import _OffsetsAt

    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 11, size=n).astype(np.uint8)  # two varints: 2 to 10 bytes
    want = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    at = np.concatenate(([0, n], rng.integers(0, n + 1, size=asked)))  # repeats, unsorted
    got = _OffsetsAt(lambda lo, hi: sizes[lo:hi], n, at, step)
    assert np.array_equal(got[at], want[at])
    assert got.values.nbytes <= 8 * at.size  # nothing kept per size
    others = np.setdiff1d(np.arange(n + 1), at)
    if others.size:
        with pytest.raises(ValueError):
            got[others[:1]]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 300), seed=st.integers(0, 2**32 - 1), n_go=st.integers(0, 20), n_put=st.integers(0, 20),
       window=st.integers(1, 64))
def test_placing_window_by_window_equals_deleting_then_inserting(n, seed, n_go, n_put, window):
    """The new body: the old bytes less the spans that go, with each piece put in before the surviving byte
    numbered ``at`` (np.insert's rule), whatever the window."""
    from ragtui.core.index.bm25_splice import _place_masked, _spans

    rng = np.random.default_rng(seed)
    body = rng.integers(0, 256, size=n).astype(np.uint8)
    cuts = np.unique(rng.integers(0, n + 1, size=2 * n_go)) if n else np.zeros(0, dtype=np.int64)
    go_at, go_len = cuts[0::2][: cuts.size // 2], np.diff(cuts)[0::2][: cuts.size // 2]
    keep = go_len > 0
    go_at, go_len = go_at[keep].astype(np.int64), go_len[keep].astype(np.int64)
    survivors = np.delete(body, _spans(go_at, go_len)) if go_at.size else body
    at = np.sort(rng.integers(0, survivors.size + 1, size=n_put)).astype(np.int64)
    length = rng.integers(1, 6, size=n_put).astype(np.int64)
    pieces = rng.integers(0, 256, size=int(length.sum())).astype(np.uint8)
    src = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.int64) if n_put else np.zeros(0, dtype=np.int64)
    want = survivors.copy()
    for j in reversed(range(n_put)):  # the last piece first: earlier ones keep their places
        want = np.insert(want, at[j], pieces[src[j] : src[j] + length[j]])
    shuffle = rng.permutation(go_at.size)  # the spans that go come in any order
    out = np.zeros(want.size, dtype=np.uint8)
    _place_masked(out, body, go_at[shuffle], go_len[shuffle], pieces, at, length, src, window)
    assert out.tolist() == want.tolist()


def _resident_kib(path) -> int:
    """The resident KiB of this process's maps of the file ``path`` (/proc/self/smaps)."""
    total, mine = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                mine = len(head) >= 6 and head[5] == str(path)
            elif mine and line.startswith("Rss:"):
                total += int(head[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="reads the process's maps from /proc")
def test_a_splice_from_mapped_files_leaves_none_of_their_pages_resident(tmp_path):
    """The previous generation's postings and bm25.idx, mapped as a long-running writer maps them, are read a
    stretch at a time and let go: after the splice and the encoding (byte for byte a full build's), none of their
    pages is resident in the process, only in the page cache."""
    import mmap

    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(3000)]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    chunks = [list(rng.choice(vocab, size=int(rng.integers(10, 60)), p=weights)) for _ in range(12_000)]
    data = encode_bm25(chunks)
    (tmp_path / "bm25.idx").write_bytes(data)
    for name, array in BM25Index.decode(data, 1.2, 0.75).to_arrays().items():
        np.save(tmp_path / f"{name}.npy", np.asarray(array))
    arrays = {p.stem: np.load(p, mmap_mode="r") for p in tmp_path.glob("*.npy")}
    index = BM25Index.from_arrays(arrays)
    with open(tmp_path / "bm25.idx", "rb") as f:
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    big = [tmp_path / "post_doc.npy", tmp_path / "post_tf.npy", tmp_path / "bm25.idx"]
    assert all(p.stat().st_size > 512 * 1024 for p in big)
    for a in (index.post_doc, index.post_tf):
        int(np.asarray(a).sum())  # every page read in: resident until let go
    assert all(_resident_kib(p) > 256 for p in big[:2])

    # One chunk's terms changed in the middle; two chunks dropped; one put in at the end.
    keep = np.ones(len(chunks), dtype=bool)
    keep[[5000, 5001]] = False
    rows = [terms for i, terms in enumerate(chunks) if keep[i]]
    row_map = np.full(len(chunks), -1, dtype=np.int64)
    row_map[keep] = np.arange(len(rows))
    rows[100] = [*rows[100], "w1", "fresh"]
    row_map[np.flatnonzero(keep)[100]] = -1
    new_rows, new_terms = [100, len(rows)], [rows[100], ["w2", "w3", "other"]]
    rows.append(new_terms[1])
    spliced = splice_postings(index, row_map, len(rows), new_rows, new_terms)
    assert bytes(encode_spliced(raw, index, spliced, stretch_limit=0)) == encode_bm25(rows)
    assert bytes(encode_spliced(raw, index, spliced)) == encode_bm25(rows)
    # What stays is what the kernel maps around the last page read (64 KiB by default), not the files.
    assert all(_resident_kib(p) <= 64 for p in big), [_resident_kib(p) for p in big]
