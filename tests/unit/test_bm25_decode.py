"""BM25Index.decode a piece of whole terms at a time, and decode_into a cache entry: the whole file's arrays and
errors, to the bit and to the word, wherever the pieces split."""

from __future__ import annotations

import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.errors import IndexFormatError
from ragtui.core.index import leb128
from ragtui.core.index.arraycache import StreamedEntry, load_entry, store_arrays
from ragtui.core.index.bm25 import BM25Index, _read_head, _weights
from ragtui.core.index.bm25_prune import term_keys
from ragtui.core.index.bm25_write import encode_bm25

K1, B = 1.2, 0.75


def whole_file_decode(data: bytes, k1: float = K1, b: float = B) -> dict[str, np.ndarray]:
    """The plain reference: the header and dictionary as the reader reads them (``_read_head``), then every term's
    postings gathered into one buffer and decoded in one pass, every check over the whole file at once (``to_arrays``
    of the index; ``IndexFormatError`` as ``decode`` raises it)."""
    head = _read_head(data, "bm25.idx")
    bad, n_docs, avgdl, doc_len, df = head.bad, head.n_docs, head.avgdl, head.doc_len, head.df
    lo, hi, n_terms = head.region_lo, head.region_hi, int(df.size)
    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=offsets[1:])
    total = int(offsets[-1])
    docs = tf = np.zeros(0, dtype=np.int64)
    if n_terms:
        lengths = hi - lo
        blob = np.frombuffer(b"".join(data[a:z] for a, z in zip(lo.tolist(), hi.tolist())), dtype=np.uint8)
        try:
            values = leb128.decode(blob)
        except leb128.VarintError as e:
            raise bad(f"bad postings: {e}") from None
        ends = np.flatnonzero((blob & 0x80) == 0)
        per_region = np.diff(np.concatenate(([0], np.searchsorted(ends, np.cumsum(lengths), side="left"))))
        if not np.array_equal(per_region, 2 * df):
            t = int(np.flatnonzero(per_region != 2 * df)[0])
            raise bad(f"postings of term #{t} hold {per_region[t]} varints where df {df[t]} needs {2 * df[t]}"
                      " (they overrun postings_bytes or leave bytes over)")
        if values.size != 2 * total:
            raise bad("postings count disagrees with the df values")
        gaps, tf = values[0::2].astype(np.int64), values[1::2].astype(np.int64)
        if total and tf.min() < 1:
            raise bad("a posting has tf 0")
        firsts = offsets[:-1][df > 0]
        later = np.ones(total, dtype=bool)
        later[firsts] = False
        if np.any(gaps[later] < 1):
            raise bad("postings are not in strictly ascending document order")
        cum = np.cumsum(gaps)
        base = np.zeros(n_terms, dtype=np.int64)
        base[df > 0] = cum[firsts] - gaps[firsts]
        docs = cum - base[np.repeat(np.arange(n_terms), df)]
        if total and int(docs.max()) >= n_docs:
            raise bad(f"a posting names document {int(docs.max())}, but n_docs is {n_docs}")
    counted = np.bincount(docs, weights=tf, minlength=n_docs).astype(np.int64)
    if not np.array_equal(counted, doc_len.astype(np.int64)):
        raise bad("doc_len disagrees with the term counts in the postings")
    starts, blob_terms = head.term_starts, head.term_blob
    return {
        "scalars": np.array([n_docs, avgdl, k1, b], dtype=np.float64),
        "doc_len": doc_len, "term_blob": blob_terms, "term_starts": starts, "df": df, "offsets": offsets,
        "post_doc": docs.astype(np.uint32), "post_tf": tf.astype(np.uint32),
        "weights": _weights(df, offsets, docs, tf, doc_len, avgdl, n_docs, k1, b),
        "term_key": term_keys(blob_terms, starts),
    }


def assert_same_arrays(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        assert got[name].shape == value.shape, name
        assert got[name].tobytes() == value.tobytes(), name


def outcome(decode: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray] | str:
    """The arrays a decode gives, or the problem its ``IndexFormatError`` names."""
    try:
        return decode()
    except IndexFormatError as e:
        return str(e)


words = st.sampled_from(["a", "b", "c", "the", "σοφία", "東京", "x" * 40, "zz"])
corpora = st.lists(st.lists(words, max_size=12), max_size=25)
pieces = st.integers(1, 6)
piece_bytes = st.integers(1, 24)


@settings(max_examples=300, deadline=None)
@given(docs=corpora, piece=pieces, nbytes=piece_bytes, k1=st.floats(0.0, 3.0), b=st.floats(0.0, 1.0))
def test_every_split_into_pieces_decodes_the_whole_files_arrays(docs, piece, nbytes, k1, b):
    data = encode_bm25(docs)
    want = whole_file_decode(data, k1, b)
    assert_same_arrays(BM25Index.decode(data, k1, b, piece=piece, piece_bytes=nbytes).to_arrays(), want)
    assert_same_arrays(BM25Index.decode(data, k1, b).to_arrays(), want)


@pytest.mark.parametrize("piece", [1, 2, 3, 1 << 20])
def test_edge_indexes_decode_to_the_whole_files_arrays(piece):
    frequent = [["the"] + (["rare"] if i % 97 == 0 else []) + [f"t{i // 7:04d}"] * (1 + i % 3) for i in range(3000)]
    for docs in ([], [[]], [[], [], []], [["only"]], [["only"]] * 50, [["only"] * 300, [], ["only"]], frequent):
        data = encode_bm25(docs)
        want = whole_file_decode(data)
        for nbytes in (1, 5, 1 << 22):
            assert_same_arrays(BM25Index.decode(data, K1, B, piece=piece, piece_bytes=nbytes).to_arrays(), want)


def test_a_term_in_every_chunk_is_one_piece_of_its_own():
    docs = [["common", f"w{i % 11}"] for i in range(5000)]
    data = encode_bm25(docs)
    index = BM25Index.decode(data, K1, B, piece=100, piece_bytes=64)
    assert int(index.df[index.lookup("common")]) == 5000
    assert_same_arrays(index.to_arrays(), whole_file_decode(data))


def _mutations():
    """A sound file and byte edits to it (position from the end of the header, new byte)."""
    return st.tuples(corpora, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1,
                                       max_size=4))


@settings(max_examples=500, deadline=None)
@given(case=_mutations(), piece=pieces, nbytes=piece_bytes)
def test_a_damaged_file_fails_the_check_the_whole_file_fails_first(case, piece, nbytes):
    """Several faults in several pieces: the one reported is the one the whole file's checks meet first."""
    docs, edits = case
    data = bytearray(encode_bm25(docs))
    if len(data) <= 24:
        return
    for at, value in edits:
        data[24 + at % (len(data) - 24)] = value
    raw = bytes(data)
    want = outcome(lambda: whole_file_decode(raw))
    got = outcome(lambda: BM25Index.decode(raw, K1, B, piece=piece, piece_bytes=nbytes).to_arrays())
    if isinstance(want, str):
        assert got == want
    else:
        assert not isinstance(got, str), got
        assert_same_arrays(got, want)


def _pair(gap: int, tf: int) -> bytes:
    return leb128.encode_one(gap) + leb128.encode_one(tf)


def _file(n_docs: int, doc_len: list[int], terms: list[tuple[bytes, int, bytes]]) -> bytes:
    """A bm25.idx written field by field: (term, df, postings bytes) per term."""
    avgdl = sum(doc_len) / n_docs if n_docs else 0.0
    out = b"TLBM" + struct.pack("<IIId", 1, n_docs, len(terms), avgdl) + struct.pack(f"<{n_docs}I", *doc_len)
    for term, df, postings in terms:
        out += struct.pack("<H", len(term)) + term + struct.pack("<II", df, len(postings)) + postings
    return out


@pytest.mark.parametrize(("terms", "problem"), [
    # A later term's varint too long beats an earlier term's varint count, as over the whole file.
    ([(b"a", 1, _pair(0, 1) + _pair(1, 1)), (b"b", 1, b"\x80\x80\x80\x80\x80\x00\x01")], "longer than 5 bytes"),
    ([(b"a", 1, _pair(0, 0)), (b"b", 1, b"\xff\xff\xff\xff\x1f\x01")], "does not fit in 32 bits"),
    ([(b"a", 2, _pair(0, 1) + _pair(0, 1)), (b"b", 1, _pair(0, 0))], "tf 0"),
    # Out of range in two pieces: the largest chunk number is named.
    ([(b"a", 1, _pair(7, 1)), (b"b", 1, _pair(1, 1)), (b"c", 1, _pair(9, 1))], "names document 9, but n_docs is 2"),
])
def test_faults_in_several_pieces_report_the_whole_files_first(terms, problem):
    data = _file(2, [1, 1], terms)
    want = outcome(lambda: whole_file_decode(data))
    assert isinstance(want, str) and problem in want
    for piece in (1, 2, 1 << 20):
        assert outcome(lambda p=piece: BM25Index.decode(data, K1, B, piece=p, piece_bytes=1).to_arrays()) == want


def test_a_file_whose_dfs_want_more_postings_than_its_bytes_hold_fails_as_the_whole_file_does(tmp_path):
    """Each term claims every chunk with two bytes of postings: refused by the pieces' checks, with the whole
    file's message, before arrays of the postings claimed are made."""
    n_docs = 1000
    data = _file(n_docs, [3] * n_docs, [(b"t%04d" % i, n_docs, _pair(0, 1)) for i in range(3000)])
    want = outcome(lambda: whole_file_decode(data))
    assert isinstance(want, str) and "varints where df 1000 needs 2000" in want
    for piece in (1, 7, 1 << 20):
        assert outcome(lambda p=piece: BM25Index.decode(data, K1, B, piece=p).to_arrays()) == want
    entry = StreamedEntry(tmp_path, "bm25", "index")
    with pytest.raises(IndexFormatError) as raised:
        BM25Index.decode_into(data, K1, B, entry, piece=5)
    assert str(raised.value) == want
    entry.discard()


# -- into the cache ------------------------------------------------------------------------------------------


def _entry_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@settings(max_examples=100, deadline=None)
@given(docs=corpora, piece=pieces, nbytes=piece_bytes)
def test_decoding_into_an_entry_writes_the_bytes_store_arrays_writes(docs, piece, nbytes):
    data = encode_bm25(docs)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        entry = StreamedEntry(cache, "bm25", "streamed", tag="decoded")
        BM25Index.decode_into(data, K1, B, entry, piece=piece, piece_bytes=nbytes)
        assert entry.place("k")
        assert store_arrays(cache, "bm25", "whole", "k", BM25Index.decode(data, K1, B).to_arrays())
        assert _entry_bytes(cache / "bm25-streamed-k") == _entry_bytes(cache / "bm25-whole-k")


def test_a_reader_without_the_entry_decodes_into_it_and_maps_it(tmp_path):
    data = encode_bm25([["alpha", "beta"], ["beta", "gamma", "gamma"], [], ["delta"]] * 40)
    index, key = BM25Index.load_keyed(data, K1, B, cache_dir=tmp_path)
    assert key == BM25Index.cache_key(data, K1, B)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [f"bm25-index-{key}"]
    assert isinstance(index.post_doc, np.memmap)  # mapped from the entry, not held
    assert_same_arrays(index.to_arrays(), whole_file_decode(data))
    store_arrays(tmp_path, "bm25", "stored", key, whole_file_decode(data))
    stored = _entry_bytes(tmp_path / f"bm25-stored-{key}")
    assert _entry_bytes(tmp_path / f"bm25-index-{key}") == stored
    again, _ = BM25Index.load_keyed(data, K1, B, cache_dir=tmp_path)  # found: nothing decoded or written
    assert_same_arrays(again.to_arrays(), index.to_arrays())


def test_a_damaged_file_places_nothing(tmp_path):
    data = bytearray(encode_bm25([["alpha", "beta"], ["beta", "gamma"]] * 30))
    first, second = struct.unpack_from("<II", data, 24)
    struct.pack_into("<II", data, 24, first + 1, second - 1)  # the same mean: found only once every piece is read
    raw = bytes(data)
    with pytest.raises(IndexFormatError, match="doc_len disagrees with the term counts"):
        BM25Index.load_keyed(raw, K1, B, cache_dir=tmp_path)
    with pytest.raises(IndexFormatError, match="doc_len disagrees with the term counts"):
        BM25Index.load_keyed(raw, K1, B, cache_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_a_damaged_entry_is_decoded_anew(tmp_path):
    data = encode_bm25([["alpha", "beta"], ["beta", "gamma"]] * 30)
    _, key = BM25Index.load_keyed(data, K1, B, cache_dir=tmp_path)
    (tmp_path / f"bm25-index-{key}" / "weights.npy").unlink()
    index, _ = BM25Index.load_keyed(data, K1, B, cache_dir=tmp_path)
    assert (tmp_path / f"bm25-index-{key}" / "weights.npy").is_file()
    assert_same_arrays(index.to_arrays(), whole_file_decode(data))


def test_an_unwritable_cache_decodes_in_memory(tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    data = encode_bm25([["alpha", "beta"], ["beta", "gamma"]])
    index, _ = BM25Index.load_keyed(data, K1, B, cache_dir=blocked)
    assert_same_arrays(index.to_arrays(), whole_file_decode(data))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_readers_decoding_at_once_leave_one_sound_entry(tmp_path):
    data = encode_bm25([[f"w{i % 13}", f"w{i % 7}", "common"] for i in range(2000)])
    want = whole_file_decode(data)
    got: list[dict[str, np.ndarray]] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            got.append(BM25Index.load_keyed(data, K1, B, cache_dir=tmp_path)[0].to_arrays())
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for arrays in got:
        assert_same_arrays(arrays, want)
    key = BM25Index.cache_key(data, K1, B)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [f"bm25-index-{key}"]
    found = load_entry(tmp_path, "bm25", "index", key)
    assert found is not None
    assert_same_arrays({k: np.asarray(v) for k, v in found.items()}, want)


def test_a_reader_and_a_writer_of_one_process_write_apart(tmp_path):
    writer = StreamedEntry(tmp_path, "bm25", "index")
    reader = StreamedEntry(tmp_path, "bm25", "index", tag=f"decoded{threading.get_ident()}")
    writer.add("a", np.int64, 2, [np.arange(2)])
    reader.add("a", np.int64, 3, [np.arange(3)])
    assert writer.ok and reader.ok
    assert writer.place("w") and reader.place("r")
    assert np.load(tmp_path / "bm25-index-w" / "a.npy").tolist() == [0, 1]
    assert np.load(tmp_path / "bm25-index-r" / "a.npy").tolist() == [0, 1, 2]
    assert not any(".tmp" in p.name for p in tmp_path.iterdir())


def plain_varints(data: bytes) -> list[int] | str:
    """Unsigned LEB128 decoded byte by byte: the values, or the problem ``leb128.decode`` names."""
    if data and data[-1] & 0x80:
        return "truncated varint at the end of the data"
    values, lengths, value, shift, length = [], [], 0, 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        length += 1
        if not byte & 0x80:
            values.append(value)
            lengths.append(length)
            value, shift, length = 0, 0, 0
    if any(n > 5 for n in lengths):
        return "varint longer than 5 bytes"
    if any(v >= 1 << 32 for v in values):
        return "varint value does not fit in 32 bits"
    return values


varint_bytes = st.lists(st.one_of(st.integers(0, 255), st.sampled_from([0x80, 0xFF, 0x7F, 0x0F, 0x10, 0x00])),
                        max_size=60)


@settings(max_examples=500, deadline=None)
@given(raw=varint_bytes)
def test_varints_decode_as_read_byte_by_byte(raw):
    """Any bytes, non-minimal varints and every fault included."""
    data = bytes(raw)
    want = plain_varints(data)
    try:
        got: list[int] | str = leb128.decode(data).tolist()
    except leb128.VarintError as e:
        got = str(e)
    assert got == want
