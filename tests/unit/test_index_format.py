"""The four files: round trips, hand-made bytes, and every rejection readers must make."""

import json
import os
import shutil
import struct

import numpy as np
import pytest

from ragtui.core.errors import IndexFormatError, IndexMissingError, LockedError
from ragtui.core.index.index_format import read_index
from ragtui.core.index.records import encode_docs, encode_meta, fingerprint
from ragtui.core.ingest.publish import IndexLock, encode_index, publish

from .indexgen import build, make_meta, make_records, random_vectors

DOCS = {
    "docs/b.md": ["beta one", "beta two"],
    "docs/a.md": ["alpha text about cats"],
    "docs/ü/名前#1.md": ["unicode path with a # inside"],
}


def test_round_trip(tmp_path):
    path, records, vectors = build(tmp_path, "docs", DOCS)
    data = read_index(path)
    assert data.meta.n_chunks == 4 and data.meta.dim == 8
    assert [r.chunk_id for r in data.records] == ["docs/a.md#0", "docs/b.md#0", "docs/b.md#1", "docs/ü/名前#1.md#0"]
    assert list(data.records) == records
    assert np.array_equal(data.vectors, vectors)
    assert set(os.listdir(path)) == {"meta.json", "docs.jsonl", "vectors.f32", "bm25.idx"}


def test_same_inputs_same_bytes(tmp_path):
    records = make_records(DOCS)
    vectors = random_vectors(len(records), 8)
    a = encode_index(make_meta("docs", 4, 8), records, vectors)
    b = encode_index(make_meta("docs", 4, 8), records, vectors)
    assert a == b
    c = encode_index(make_meta("docs", 4, 8, created_at="2030-05-05T05:05:05Z"), records, vectors)
    assert {k for k in a if a[k] != c[k]} == {"meta.json"}


def test_hand_made_docs_and_meta_bytes():
    records = make_records({"d/x.txt": ["héllo \"q\"\n"]})
    line = encode_docs(records)
    fp = fingerprint('héllo "q"\n')
    assert line == (
        '{"chunk_id":"d/x.txt#0","doc_id":"d/x.txt","source":"file","uri":"d/x.txt",'
        '"text":"héllo \\"q\\"\\n","n_tokens":2,"fingerprint":"' + fp + '"}\n'
    ).encode("utf-8")
    meta = json.loads(encode_meta(make_meta("d", 1, 4)))
    assert list(meta) == ["index_id", "created_at", "n_chunks", "dim", "embedding_model", "tokenizer", "chunker", "bm25"]
    assert meta["chunker"] == {"max_tokens": 256, "overlap": 32} and meta["bm25"] == {"k1": 1.2, "b": 0.75}
    assert fingerprint("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_vectors_file_is_raw_little_endian_rows(tmp_path):
    path, records, vectors = build(tmp_path, "docs", DOCS, dim=3)
    raw = (path / "vectors.f32").read_bytes()
    assert len(raw) == 4 * 3 * 4
    assert struct.unpack("<3f", raw[:12]) == tuple(float(x) for x in vectors[0])


def test_empty_index(tmp_path):
    files = encode_index(make_meta("e", 0, 4), [], np.zeros((0, 4), np.float32))
    with IndexLock(tmp_path, "e"):
        path = publish(tmp_path, "e", files)
    data = read_index(path)
    assert data.meta.n_chunks == 0 and len(data.records) == 0 and data.vectors.shape == (0, 4)


def test_missing_index(tmp_path):
    with pytest.raises(IndexMissingError, match="ragtui ingest"):
        read_index(tmp_path / "rag" / "nothing")


# -- rejections: each names the file and the problem ----------------------------------


@pytest.fixture()
def index_copy(tmp_path):
    path, _, _ = build(tmp_path, "docs", DOCS)
    plain = tmp_path / "plain" / "docs"
    shutil.copytree(path, plain)
    return plain


def _rewrite(path, name, fn):
    p = path / name
    p.write_bytes(fn(p.read_bytes()))


@pytest.mark.parametrize(
    ("name", "mutate", "match"),
    [
        ("meta.json", lambda b: b[:-5], "meta.json: not valid JSON"),
        # The sizes of vectors.f32 and docs.jsonl are checked before docs.jsonl's lines are counted.
        ("meta.json", lambda b: b.replace(b'"n_chunks": 4', b'"n_chunks": 5'), "vectors.f32: is 128 bytes, but n_chunks 5"),
        ("meta.json", lambda b: b.replace(b'"dim": 8', b'"dim": 9'), "vectors.f32: is 128 bytes"),
        ("meta.json", lambda b: b.replace(b'"index_id": "docs"', b'"index_id": "other"'), "directory name"),
        ("meta.json", lambda b: b.replace(b'"dim": 8', b'"dim": "8"'), "dim has the wrong type"),
        ("docs.jsonl", lambda b: b[:-1], "does not end in a newline"),
        ("docs.jsonl", lambda b: b + b"{}\n", "has 5 lines"),
        ("docs.jsonl", lambda b: b.replace(b'"docs/a.md#0"', b'"docs/a.md#7"'), "should be"),
        ("docs.jsonl", lambda b: b"\n".join(reversed(b.split(b"\n")[:-1])) + b"\n", "out of order"),
        ("docs.jsonl", lambda b: b.replace(b"{", b"[", 1), "line 1 is not valid JSON"),
        ("docs.jsonl", lambda b: b.replace(b'"n_tokens":2', b'"n_tokens":0', 1), "n_tokens"),
        ("vectors.f32", lambda b: b[:-4], "is 124 bytes"),
        ("vectors.f32", lambda b: b[:4] + struct.pack("<f", float("nan")) + b[8:], "row 0 holds a non-finite"),
        ("vectors.f32", lambda b: b[:-4] + struct.pack("<f", float("inf")), "row 3 holds a non-finite"),
        ("bm25.idx", lambda b: b[:10], "bm25.idx: truncated"),
        ("bm25.idx", lambda b: b[:8] + struct.pack("<I", 3) + b[12:], "bm25.idx"),
    ],
)
def test_rejections(index_copy, name, mutate, match):
    _rewrite(index_copy, name, mutate)
    with pytest.raises(IndexFormatError, match=match):
        read_index(index_copy)


def test_missing_one_file(index_copy):
    (index_copy / "bm25.idx").unlink()
    with pytest.raises(IndexFormatError, match="bm25.idx: missing"):
        read_index(index_copy)


def test_bm25_n_docs_must_match_meta(tmp_path, index_copy):
    other, _, _ = build(tmp_path / "o", "docs", {"x.md": ["one"]})
    shutil.copy(other / "bm25.idx", index_copy / "bm25.idx")
    with pytest.raises(IndexFormatError, match="bm25.idx: n_docs is 1"):
        read_index(index_copy)


# -- publishing ---------------------------------------------------------------------


def test_publish_replaces_the_generation_and_cleans_up(tmp_path):
    path, _, _ = build(tmp_path, "docs", DOCS)
    first = read_index(path)
    path2, _, _ = build(tmp_path, "docs", {"docs/z.md": ["zeta"]})
    second = read_index(path2)
    assert path == path2 and first.generation != second.generation
    assert [r.chunk_id for r in second.records] == ["docs/z.md#0"]
    gens = os.listdir(tmp_path / "rag" / ".gen" / "docs")
    assert len(gens) == 1 and not any(g.endswith(".tmp") for g in gens)
    # The old generation's arrays stay readable: its file was mapped before removal.
    assert first.vectors.shape == (4, 8)


def test_second_writer_is_refused(tmp_path):
    with IndexLock(tmp_path, "docs"):
        with pytest.raises(LockedError, match=f"pid {os.getpid()}"):
            IndexLock(tmp_path, "docs").acquire()
    IndexLock(tmp_path, "docs").acquire().release()


def test_publish_adopts_a_plain_directory(tmp_path, index_copy):
    rag = tmp_path / "rag2" / "rag"
    rag.mkdir(parents=True)
    shutil.copytree(index_copy, rag / "docs")
    records = make_records({"n.md": ["new"]})
    files = encode_index(make_meta("docs", 1, 8), records, random_vectors(1, 8))
    with IndexLock(tmp_path / "rag2", "docs"):
        path = publish(tmp_path / "rag2", "docs", files)
    assert path.is_symlink()
    assert [r.chunk_id for r in read_index(path).records] == ["n.md#0"]


def test_lazy_open_checks_lines_when_used(index_copy):
    data = read_index(index_copy, full=False)
    assert data.records[1].chunk_id == "docs/b.md#0"
    raw = (index_copy / "docs.jsonl").read_bytes().split(b"\n")
    raw[2] = b'{"chunk_id": 5}'
    (index_copy / "docs.jsonl").write_bytes(b"\n".join(raw))
    lazy = read_index(index_copy, full=False)
    assert lazy.records[0].chunk_id == "docs/a.md#0"
    with pytest.raises(IndexFormatError, match="line 3 lacks"):
        lazy.records[2]
    with pytest.raises(IndexFormatError, match="line 3 lacks"):
        lazy.records.verify()
    with pytest.raises(IndexFormatError, match="line 3 lacks"):
        read_index(index_copy)


def test_find_chunk_ids(index_copy):
    records = read_index(index_copy, full=False).records
    for row, rec in enumerate(read_index(index_copy).records):
        assert records.find(rec.chunk_id) == row
    for missing in ("docs/a.md#1", "docs/a.md", "docs/zz.md#0", "docs/ü/名前#1.md#01", "#0", ""):
        assert records.find(missing) == -1


def test_bm25_cache_gives_the_same_answers_and_survives_damage(tmp_path):
    path, _, _ = build(tmp_path, "docs", {f"d/{i}.md": [f"alpha beta {i} gamma" * (i % 3 + 1)] for i in range(30)})
    cache = tmp_path / "cache"
    plain = read_index(path)
    first = read_index(path, cache_dir=cache)
    again = read_index(path, cache_dir=cache)
    for q in ("alpha", "beta 7", "gamma gamma 12", "nothing"):
        for d in (first, again):
            r1, s1 = plain.bm25.search(q, 10)
            r2, s2 = d.bm25.search(q, 10)
            assert r1.tolist() == r2.tolist() and s1.tolist() == s2.tolist()
    (entry,) = [p for p in cache.iterdir()]
    for npy in entry.glob("*.npy"):
        npy.write_bytes(b"garbage")
    damaged = read_index(path, cache_dir=cache)
    assert damaged.bm25.search("alpha", 5)[0].tolist() == plain.bm25.search("alpha", 5)[0].tolist()


def test_fingerprint_must_match_text(index_copy):
    raw = (index_copy / "docs.jsonl").read_bytes()
    (index_copy / "docs.jsonl").write_bytes(raw.replace(b"alpha text", b"alpha TEXT", 1))
    with pytest.raises(IndexFormatError, match="line 1: fingerprint"):
        read_index(index_copy)


def _many_docs(n_docs: int) -> dict[str, list[str]]:
    return {f"d/{i:04d}.md": [f"text {i} part {k} " + "x" * (i % 7) for k in range(1 + i % 3)] for i in range(n_docs)}


@pytest.mark.parametrize("block", [1, 64, 300, 1 << 20])
def test_a_full_read_checks_every_line_a_block_at_a_time_and_keeps_no_record(tmp_path, monkeypatch, block):
    import ragtui.core.index.docs_file as docs_file

    docs = _many_docs(60)
    path, records, _ = build(tmp_path, "docs", docs)
    monkeypatch.setattr(docs_file, "VERIFY_BLOCK_BYTES", block)
    data = read_index(path)
    assert data.records._cache == {}  # checked, not held
    assert data.records.doc_ids() == sorted(docs)
    starts = data.records.doc_starts().tolist()
    assert [records[i].k for i in starts] == [0] * len(docs)
    assert [records[i].doc_id for i in starts] == sorted(docs)
    assert list(data.records.stream()) == records


@pytest.mark.parametrize("block", [1, 100, 1 << 20])
@pytest.mark.parametrize("line", [1, 2, 37, 120])
def test_a_bad_line_in_any_block_is_named(tmp_path, monkeypatch, block, line):
    import ragtui.core.index.docs_file as docs_file

    path, records, _ = build(tmp_path, "docs", _many_docs(60))
    plain = tmp_path / "plain" / "docs"
    shutil.copytree(path, plain)
    raw = (plain / "docs.jsonl").read_bytes().split(b"\n")
    raw[line - 1] = raw[line - 1].replace(b" part ", b" PART ", 1)  # its fingerprint no longer matches
    (plain / "docs.jsonl").write_bytes(b"\n".join(raw))
    monkeypatch.setattr(docs_file, "VERIFY_BLOCK_BYTES", block)
    with pytest.raises(IndexFormatError, match=f"line {line}: fingerprint"):
        read_index(plain)
    with pytest.raises(IndexFormatError, match=f"line {line}: fingerprint"):
        read_index(plain, full=False).records.doc_ids()


def test_two_values_on_one_line_are_refused_whatever_the_block(tmp_path, monkeypatch):
    import ragtui.core.index.docs_file as docs_file

    path, _, _ = build(tmp_path, "docs", _many_docs(10))
    plain = tmp_path / "plain" / "docs"
    shutil.copytree(path, plain)
    lines = (plain / "docs.jsonl").read_bytes().split(b"\n")
    lines[4] = lines[4] + b"," + lines[4]
    (plain / "docs.jsonl").write_bytes(b"\n".join(lines))
    for block in (1, 1 << 20):
        monkeypatch.setattr(docs_file, "VERIFY_BLOCK_BYTES", block)
        with pytest.raises(IndexFormatError, match="line 5 is not valid JSON"):
            read_index(plain)


def test_the_records_kept_for_a_second_look_are_bounded(tmp_path, monkeypatch):
    import ragtui.core.index.docs_file as docs_file

    path, records, _ = build(tmp_path, "docs", _many_docs(60))
    monkeypatch.setattr(docs_file, "CACHED_RECORDS", 16)
    data = read_index(path, full=False)
    assert [data.records[i] for i in range(len(records))] == records
    assert 0 < len(data.records._cache) <= 16
    assert data.records[len(records) - 1] is data.records[len(records) - 1]  # a second look is kept
