"""The batched postings build and the stepped encoding: equal, array for array and byte for byte, to doing it all at once."""

import itertools
import struct
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import StreamedEntry
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.bm25_write import (
    BATCH,
    PostingsBuilder,
    build_postings,
    build_postings_from_texts,
    encode_bm25,
    encode_pieces,
    encode_postings,
)
from tests.conftest import shared_data
from tests.unit.test_bm25 import hand_made, varint


def all_at_once(doc_terms):
    """The postings built from every chunk's terms held at once: every occurrence numbered, sorted by term, runs counted."""
    n_docs = len(doc_terms)
    doc_len = np.array([len(t) for t in doc_terms], dtype=np.uint32)
    number = defaultdict(itertools.count().__next__)
    term_ids = np.array([number[t] for terms in doc_terms for t in terms], dtype=np.int64)
    terms_by_id = list(number)
    order = sorted(range(len(terms_by_id)), key=terms_by_id.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    occ_term = rank[term_ids] if term_ids.size else np.zeros(0, dtype=np.int64)
    occ_doc = np.repeat(np.arange(n_docs, dtype=np.int64), doc_len.astype(np.int64))
    perm = np.argsort(occ_term, kind="stable")
    occ_term, occ_doc = occ_term[perm], occ_doc[perm]
    new = np.ones(occ_term.size, dtype=bool)
    new[1:] = (occ_term[1:] != occ_term[:-1]) | (occ_doc[1:] != occ_doc[:-1])
    first = np.flatnonzero(new)
    tf = np.diff(np.append(first, occ_term.size))
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(np.bincount(occ_term[first], minlength=len(order)), out=offsets[1:])
    raws = [terms_by_id[t].encode("utf-8") for t in order]
    starts = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raws], out=starts[1:])
    blob = np.frombuffer(b"".join(raws), dtype=np.uint8)
    return Postings(doc_len, blob, starts, offsets, occ_doc[first], tf)


def plain_encode(p: Postings) -> bytes:
    """bm25.idx from postings by a loop over terms and postings, straight from the spec."""
    n = p.n_docs
    avgdl = float(np.mean(p.doc_len)) if n else 0.0
    out = b"TLBM" + struct.pack("<III", 1, n, p.term_starts.size - 1) + struct.pack("<d", avgdl)
    out += b"".join(struct.pack("<I", int(x)) for x in p.doc_len)
    blob = np.asarray(p.term_blob).tobytes()
    for t in range(p.term_starts.size - 1):
        raw = blob[p.term_starts[t] : p.term_starts[t + 1]]
        postings, prev = b"", None
        for j in range(p.offsets[t], p.offsets[t + 1]):
            doc = int(p.post_doc[j])
            postings += varint(doc if prev is None else doc - prev) + varint(int(p.post_tf[j]))
            prev = doc
        out += struct.pack("<H", len(raw)) + raw + struct.pack("<II", p.offsets[t + 1] - p.offsets[t], len(postings))
        out += postings
    return out


def assert_same(got: Postings, want: Postings) -> None:
    for name in ("doc_len", "term_blob", "term_starts", "offsets", "post_doc", "post_tf"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert encode_postings(got) == plain_encode(want)


def real_texts(limit: int) -> list[str]:
    """Paragraphs of the python-docs corpus, in path order: real prose, code and tables."""
    root = shared_data("corpora", "python-docs")
    out: list[str] = []
    for path in sorted(root.rglob("*.txt")):
        out.extend(p for p in path.read_text(encoding="utf-8", errors="replace").split("\n\n"))
        if len(out) >= limit:
            break
    return out[:limit]


@pytest.mark.parametrize("batch", [1, 7, 256, BATCH])
def test_real_corpus_equals_the_build_from_every_chunk_at_once(batch):
    texts = real_texts(3000)
    want = all_at_once([analyze(t) for t in texts])
    assert want.post_doc.size > 40_000  # many postings, many terms shared across batches
    assert_same(build_postings_from_texts(iter(texts), batch=batch), want)
    assert_same(build_postings([analyze(t) for t in texts], batch=batch), want)


@pytest.mark.parametrize("docs", [
    [],
    [[]],
    [[], [], []],
    [["solo"]],
    [["a", "b", "a"]],
    [[], ["x"], [], ["x", "x"], []],
], ids=["none", "one-empty", "all-empty", "one-term", "one-chunk", "empty-between"])
@pytest.mark.parametrize("batch", [1, 2, 3, BATCH])
def test_edge_cases(docs, batch):
    assert_same(build_postings(docs, batch=batch), all_at_once(docs))
    assert encode_postings(build_postings(docs, batch=batch)) == encode_bm25(docs)


def test_terms_shared_across_batches_keep_chunk_order():
    # "common" is in every chunk, "late" only in the last batch, "early" only in the first.
    docs = [["common", "early"]] * 3 + [["common"]] * 3 + [["late", "common", "common"]] * 2
    p = build_postings(docs, batch=3)
    assert_same(p, all_at_once(docs))
    ix = BM25Index.from_postings(p, 1.2, 0.75)
    t = ix.lookup("common")
    assert np.asarray(ix.post_doc)[ix.offsets[t] : ix.offsets[t + 1]].tolist() == list(range(8))
    assert np.asarray(ix.post_tf)[ix.offsets[t] : ix.offsets[t + 1]].tolist() == [1] * 6 + [2, 2]


def test_unicode_terms_in_utf8_byte_order():
    # Code point order is UTF-8 byte order: the last code point before the surrogates, U+FFFF, an astral character, a combining mark.
    docs = [["\uffff", "z"], ["\U0001f600", "é"], ["e\u0301", "\ud7ff"], ["東京", "z", "ß"]]
    p = build_postings(docs, batch=2)
    assert_same(p, all_at_once(docs))
    blob = np.asarray(p.term_blob).tobytes()
    terms = [blob[p.term_starts[i] : p.term_starts[i + 1]] for i in range(p.term_starts.size - 1)]
    assert terms == sorted(terms) and len(terms) == 8


def test_a_tf_past_sixteen_bits_is_kept():
    docs = [["a"] * 70_000 + ["b"], ["a"]]
    p = build_postings(docs, batch=1)
    assert_same(p, all_at_once(docs))
    assert p.post_tf.tolist() == [70_000, 1, 1]


def test_narrow_types():
    p = build_postings_from_texts(["alpha beta beta", "beta gamma"], batch=1)
    assert p.post_doc.dtype == np.uint32 and p.post_tf.dtype == np.uint16 and p.doc_len.dtype == np.uint32


def test_batch_must_be_positive():
    with pytest.raises(ValueError, match="batch"):
        build_postings([["a"]], batch=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "dé", "z", "\U0001f600", "ab"]), max_size=8), max_size=20),
       st.integers(1, 6))
def test_any_chunks_any_batch(docs, batch):
    assert_same(build_postings(docs, batch=batch), all_at_once(docs))


def test_plain_encode_is_the_hand_made_writer():
    docs = [analyze(t) for t in ["The cat sat on the mat.", "Dogs and cats; ΟΔΟΣ", "the the the", "", "İstanbul 東京 cat"]]
    assert plain_encode(all_at_once(docs)) == hand_made(docs)


@pytest.mark.parametrize("step", [1, 2, 5, 1000, 1 << 20])
def test_stepped_encoding_of_a_real_corpus(step):
    p = build_postings_from_texts(real_texts(1500))
    assert encode_postings(p, step=step) == plain_encode(p)


def sparse_postings() -> tuple[Postings, Postings]:
    """Terms without postings (first, between, last), chunk numbers and tfs past one varint byte; and the same
    dictionary without any posting."""
    doc_len = np.arange(300, dtype=np.uint32)
    blob = np.frombuffer(b"abcde", dtype=np.uint8)
    starts = np.arange(6)
    p = Postings(doc_len, blob, starts, np.array([0, 0, 3, 3, 5, 5]), np.array([0, 150, 299, 1, 200], dtype=np.uint32),
                 np.array([2, 200, 1, 70_000, 1], dtype=np.uint32))
    none = Postings(doc_len, blob, starts, np.zeros(6, dtype=np.int64), np.zeros(0, np.uint32), np.zeros(0, np.uint32))
    return p, none


@pytest.mark.parametrize("step", [1, 2, 3, 100])
def test_stepped_encoding_with_terms_that_hold_no_posting(step):
    # Terms without postings (first, between, last), and chunk numbers and tfs past one varint byte.
    p, none = sparse_postings()
    assert encode_postings(p, step=step) == plain_encode(p)
    assert encode_postings(none, step=step) == plain_encode(none)


def test_step_must_be_positive():
    with pytest.raises(ValueError, match="step"):
        encode_postings(build_postings([["a"]]), step=0)


def _spilled(docs, batch: int, folder) -> Postings:
    builder = PostingsBuilder(spill=folder)
    chunks = iter(docs)
    while builder.add(itertools.islice(chunks, batch)) == batch:
        pass
    return builder.finish()


@pytest.mark.parametrize("batch", [1, 7, 256, BATCH])
def test_postings_spilled_to_a_file_lay_out_as_those_held(batch, tmp_path):
    docs = [analyze(t) for t in real_texts(3000)]
    builder = PostingsBuilder(spill=tmp_path)
    builder.add(docs[:batch])
    assert builder.spilled_bytes > 0 and list(tmp_path.iterdir()) == []  # a file without a name
    builder.close()
    assert_same(_spilled(docs, batch, tmp_path), all_at_once(docs))
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "dé", "z", "\U0001f600", "ab"]), max_size=8), max_size=20),
       st.integers(1, 6))
def test_any_chunks_spilled_in_any_batch(tmp_path_factory, docs, batch):
    assert_same(_spilled(docs, batch, tmp_path_factory.mktemp("spill")), all_at_once(docs))


@pytest.mark.parametrize("step", [1, 2, 5, 1000, 1 << 20])
def test_bm25_idx_in_pieces_is_the_whole_file(step):
    p = build_postings_from_texts(real_texts(1500))
    pieces = list(encode_pieces(p, step))
    assert b"".join(pieces) == plain_encode(p)
    if step < 1000:
        assert len(pieces) > 100


@pytest.mark.parametrize("step", [1, 2, 3, 100])
def test_bm25_idx_in_pieces_with_terms_that_hold_no_posting(step):
    p, none = sparse_postings()
    assert b"".join(encode_pieces(p, step)) == plain_encode(p)
    assert b"".join(encode_pieces(none, step)) == plain_encode(none)
    assert b"".join(encode_pieces(build_postings([]), step)) == plain_encode(build_postings([]))


@pytest.mark.parametrize("block", [1, 3, 1000, 1 << 20])
def test_decoded_arrays_written_in_blocks_are_the_entry_of_the_whole(block, tmp_path):
    p = build_postings_from_texts(real_texts(1500))
    data = encode_postings(p)
    key = BM25Index.from_postings(p, 1.4, 0.6).store(data, tmp_path / "whole", "x")
    entry = StreamedEntry(tmp_path / "blocks", "bm25", "x")
    BM25Index.stream_arrays(p, 1.4, 0.6, entry, block)
    assert key is not None and entry.place(key)
    whole, blocks = tmp_path / "whole" / f"bm25-x-{key}", tmp_path / "blocks" / f"bm25-x-{key}"
    names = sorted(f.name for f in whole.iterdir())
    assert names == sorted(f.name for f in blocks.iterdir()) and len(names) == 11
    for name in names:
        assert (whole / name).read_bytes() == (blocks / name).read_bytes(), name
    assert [f.name for f in (tmp_path / "blocks").iterdir()] == [f"bm25-x-{key}"]  # no temporary left
