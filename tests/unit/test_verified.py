"""The writer's verified entries: a reader skips the scan, the norm pass and the hash only for the files stamped."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.index import docs_file, index_format, verified
from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.docs_file import _line_ends, ends_fit
from ragtui.core.index.index_format import FILES, read_index
from ragtui.core.ingest.sync import sync
from tests.reliability.helpers_verified import entry_dir, fingerprint

from .fakes import HashEmbedder


@pytest.fixture(autouse=True)
def writer_waits(monkeypatch):
    """A tiny index saves a reader too little for the writer to wait for a non-racy entry: make it wait."""
    monkeypatch.setattr(verified, "reader_saving_ns", lambda *sizes: 10**9)


def run(folder: Path, art: Path):
    return sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)


def make_docs(folder: Path, n: int = 9, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"d{i}.md").write_text(f"document {i} about cats and dogs {extra} " * (i + 2), encoding="utf-8")


class Counts:
    """How often the three passes an entry replaces ran."""

    def __init__(self, monkeypatch) -> None:
        self.scan = self.norms = self.hash = 0
        real_scan, real_norms, real_key = docs_file._line_ends, index_format.bad_vector_rows, BM25Index.cache_key

        def scan(*a):
            self.scan += 1
            return real_scan(*a)

        def norms(*a):
            self.norms += 1
            return real_norms(*a)

        def key(*a):
            self.hash += 1
            return real_key(*a)

        monkeypatch.setattr(docs_file, "_line_ends", scan)
        monkeypatch.setattr(index_format, "bad_vector_rows", norms)
        monkeypatch.setattr(BM25Index, "cache_key", staticmethod(key))

    def total(self) -> tuple[int, int, int]:
        return self.scan, self.norms, self.hash


@pytest.fixture()
def published(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    make_docs(folder)
    run(folder, art)
    return folder, art / "rag" / "docs", art / "rag" / ".cache"


def test_a_full_publish_records_an_entry_that_spares_the_reader_three_passes(published, monkeypatch):
    _, link, cache = published
    assert entry_dir(link, cache).is_dir()
    counts = Counts(monkeypatch)
    data = read_index(link, full=False, cache_dir=cache)
    assert data.stats["verified_entry"] is True
    assert counts.total() == (0, 0, 0)
    # Without the cache (or with full=True) every pass runs, as before.
    read_index(link, full=False)
    assert counts.total() == (1, 1, 0)
    read_index(link, full=True, cache_dir=cache)
    assert counts.total() == (2, 2, 1)


def test_an_incremental_publish_records_one_too_and_the_data_is_what_full_checks_read(published, monkeypatch):
    folder, link, cache = published
    (folder / "d3.md").write_text("a new text about birds " * 5, encoding="utf-8")
    (folder / "d7.md").unlink()
    (folder / "e.md").write_text("another document, about rivers " * 3, encoding="utf-8")
    assert run(folder, link.parent.parent).incremental
    counts = Counts(monkeypatch)
    fast = read_index(link, full=False, cache_dir=cache)
    assert fast.stats["verified_entry"] is True and counts.total() == (0, 0, 0)
    slow = read_index(link, full=False)
    full = read_index(link, full=True)
    assert slow.stats["verified_entry"] is False and full.stats["verified_entry"] is False
    assert fingerprint(fast) == fingerprint(slow) == fingerprint(full)
    # The stored ends are the file's own.
    raw = (link / "docs.jsonl").read_bytes()
    assert np.array_equal(fast.records.line_ends(0, fast.n_chunks), _line_ends(raw, fast.n_chunks, "docs.jsonl"))


def test_a_touched_file_invalidates_the_entry(published, monkeypatch):
    _, link, cache = published
    for name in FILES:
        os.utime(link / name)  # same bytes; ctime moves on
        counts = Counts(monkeypatch)
        data = read_index(link, full=False, cache_dir=cache)
        assert data.stats["verified_entry"] is False, name
        assert counts.total() == (1, 1, 1), name


def test_a_copied_generation_never_matches(published, tmp_path, monkeypatch):
    _, link, cache = published
    copy = tmp_path / "copy" / "docs"
    shutil.copytree(os.path.realpath(link), copy)  # new inodes (times kept by copy2)
    counts = Counts(monkeypatch)
    data = read_index(copy, full=False, cache_dir=cache)
    assert data.stats["verified_entry"] is False and counts.total() == (1, 1, 1)


def test_an_entry_recorded_too_soon_after_a_write_is_not_recorded(tmp_path, monkeypatch):
    paths = []
    for name in FILES:
        (tmp_path / name).write_bytes(b"{}\n")
        paths.append(tmp_path / name)
    # Just written (the clock reads the files' ctime, however long the test took to get here): within the
    # granularity; without waiting nothing is recorded.
    written = max(os.stat(p).st_ctime_ns for p in paths)
    with monkeypatch.context() as m:
        m.setattr(verified.time, "time_ns", lambda: written)
        assert not verified.record(tmp_path / "cache", "x", paths, ends=np.array([2]), bm25_key=None, max_wait_ns=0)
    assert not (tmp_path / "cache").exists()
    # Waiting (at most one granularity step) records it.
    assert verified.record(tmp_path / "cache", "x", paths, ends=np.array([2]), bm25_key=None, max_wait_ns=10**9)
    stamps = [verified.file_stamp(os.stat(p)) for p in paths]
    found = verified.lookup(tmp_path / "cache", "x", stamps, 1)
    assert found is not None and found.ends.tolist() == [2] and found.unit_rows and found.bm25_key is None


def test_racy_stamps_and_the_granularity_guess():
    now = time.time_ns()
    fine = [(10, now - 5 * 10**9 + 123, now - 5 * 10**9 + 123, 1, 1)] * 4
    assert verified.granularity_ns(fine) == verified.FINE_GRANULARITY_NS
    assert not verified.is_racy(fine, now)
    just = [(10, now - 10**6 + 7, now - 10**6 + 7, 1, 1)] * 4
    assert verified.is_racy(just, now)  # a change 1 ms ago could still be followed by one with the same ctime
    whole_seconds = [(10, (now // 10**9 - 1) * 10**9, (now // 10**9 - 1) * 10**9, 1, 1)] * 4
    assert verified.granularity_ns(whole_seconds) == verified.COARSE_GRANULARITY_NS
    assert verified.is_racy(whole_seconds, now)


def test_the_entry_key_tells_apart_every_field_of_every_file():
    base = [(100, 2, 3, 4, 5)] * 4
    keys = {verified.entry_key(base)}
    for f in range(4):
        for i in range(5):
            s = [list(x) for x in base]
            s[f][i] += 1
            keys.add(verified.entry_key([tuple(x) for x in s]))
    assert len(keys) == 21
    assert verified.entry_key([(1, 2, 3, (1 << 64) - 1, 5)] * 4)  # an inode above 2^63 has a key too


def test_ends_fit_takes_the_true_ends_and_refuses_others():
    raw = b'{"a":1}\n{"b":22}\n{}\n'
    true = _line_ends(raw, 3, "x")
    assert ends_fit(raw, true, 3)
    assert ends_fit(b"", np.zeros(0, dtype=np.int64), 0)
    for bad in ([7, 16, 20], [7, 16], [7, 15, 19], [16, 7, 19], [-1, 16, 19], [7, 7, 19], [7, 16, 1 << 40]):
        assert not ends_fit(raw, np.array(bad, dtype=np.int64), len(bad) if len(bad) != 2 else 3), bad
    assert not ends_fit(raw, true.astype(np.int32), 3)
    assert not ends_fit(b' {"a":1}\n', np.array([8]), 1)  # a line must start with "{"
    assert not ends_fit(b'{"a":1} \n', np.array([8]), 1)  # and end with "}"
    assert not ends_fit(b"", np.array([0]), 1)


@pytest.mark.parametrize("block", [1, 2, 3, 1 << 16])
def test_the_line_length_checks_judge_every_line_whatever_the_block(monkeypatch, block):
    """The lengths are checked a block of ends at a time (no whole array of them): a short or a
    reversed line is found in any block, the first line and the last included."""
    monkeypatch.setattr(docs_file, "_GAPS_BLOCK", block)
    raw = b"".join(b'{"n":%d}\n' % i for i in range(7))
    true = _line_ends(raw, 7, "x")
    assert ends_fit(raw, true, 7)
    for i in range(7):
        for shift in (-true[i] + 1, -3, 1 << 30):  # a line of one byte, an end before the previous, a huge line
            bad = true.copy()
            bad[i] += shift
            assert not ends_fit(raw, bad, 7), (i, shift)
    monkeypatch.setattr(docs_file, "MAX_DOCS_LINE_BYTES", 7)  # every line here has 7 bytes: they fit
    assert ends_fit(raw, true, 7)
    monkeypatch.setattr(docs_file, "MAX_DOCS_LINE_BYTES", 6)
    assert not ends_fit(raw, true, 7)


def test_a_docs_file_finds_each_lines_place_from_the_ends_alone():
    from ragtui.core.index.docs_file import DocsFile
    from ragtui.core.index.records import ChunkRecord, IndexMeta, encode_docs, fingerprint

    texts = [f"text {'x' * i} {i}" for i in range(12)]
    raw = encode_docs(ChunkRecord(f"d/{i:02}.md#0", f"d/{i:02}.md", "file", f"d/{i:02}.md", t, 3, fingerprint(t))
                      for i, t in enumerate(texts))
    meta = IndexMeta("d", "2026-01-01T00:00:00Z", 12, 4, "m", "m", 12, 3, 1.2, 0.75)
    docs = DocsFile(raw, "docs.jsonl", meta)
    lines = raw.split(b"\n")[:-1]
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    assert [a.size for a in vars(docs).values() if isinstance(a, np.ndarray)] == [12]  # the ends, nothing per line else
    for lo in range(12):
        assert docs[lo].text == texts[lo]
        for hi in range(lo + 1, 13):
            assert docs.byte_range(lo, hi) == (starts[lo], starts[hi - 1] + len(lines[hi - 1]) + 1)
            assert bytes(docs.raw_lines(lo, hi)) == b"".join(line + b"\n" for line in lines[lo:hi])
            assert docs.line_ends(lo, hi).tolist() == [starts[k] + len(lines[k]) - starts[lo] for k in range(lo, hi)]
    assert docs.byte_range(3, 3) == (0, 0) and docs.line_ends(3, 3).size == 0
    assert docs.written_fingerprints().tolist() == [fingerprint(t).encode() for t in texts]


@pytest.mark.parametrize("block", [1, 5, 12, 1 << 16])
def test_written_fingerprints_a_block_of_lines_at_a_time(tmp_path, monkeypatch, block):
    import mmap

    from ragtui.core.index.docs_file import DocsFile
    from ragtui.core.index.records import ChunkRecord, IndexMeta, encode_docs, fingerprint

    monkeypatch.setattr(docs_file, "_FP_BLOCK_LINES", block)
    texts = [f"text {'y' * (300 * i)} {i}" for i in range(12)]  # lines over several pages of a map
    raw = encode_docs(ChunkRecord(f"d/{i:02}.md#0", f"d/{i:02}.md", "file", f"d/{i:02}.md", t, 3, fingerprint(t))
                      for i, t in enumerate(texts))
    meta = IndexMeta("d", "2026-01-01T00:00:00Z", 12, 4, "m", "m", 12, 3, 1.2, 0.75)
    (tmp_path / "docs.jsonl").write_bytes(raw)
    with open(tmp_path / "docs.jsonl", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        docs = DocsFile(mm, "docs.jsonl", meta)
        assert docs.written_fingerprints().tolist() == [fingerprint(t).encode() for t in texts]
        assert [docs[i].text for i in range(12)] == texts  # the pages dropped come back when read
    # A line of another layout in any block: no fingerprints (the caller parses the lines instead).
    odd = raw.replace(b',"fingerprint":"' + fingerprint(texts[7]).encode(), b',"fingerprint": "' + fingerprint(texts[7]).encode())
    assert DocsFile(odd, "docs.jsonl", meta).written_fingerprints() is None


def test_ends_not_looked_at_are_caught_when_their_line_is_read(monkeypatch):
    from ragtui.core.index.docs_file import DocsFile
    from ragtui.core.index.records import ChunkRecord, IndexMeta, encode_docs, fingerprint

    monkeypatch.setattr(docs_file, "ENDS_SAMPLE", 3)
    texts = [f"text number {i}" for i in range(9)]
    raw = encode_docs(ChunkRecord(f"d/{i}.md#0", f"d/{i}.md", "file", f"d/{i}.md", t, 3, fingerprint(t))
                      for i, t in enumerate(texts))
    true = _line_ends(raw, 9, "x")
    # Line 2's end moved into line 3: line 2 runs on into it, and line 3 starts in its middle. The lines
    # looked at (the first, the middle and the last) hold, so the ends are taken...
    wrong = true.copy()
    wrong[2] += 50
    assert ends_fit(raw, wrong, 9)
    meta = IndexMeta("d", "2026-01-01T00:00:00Z", 9, 4, "m", "m", 12, 3, 1.2, 0.75)
    docs = DocsFile(raw, "docs.jsonl", meta, wrong)
    assert docs[0].text == texts[0] and docs[8].text == texts[8]
    # ...and the lines they cut are refused when read, never shown as another line's text.
    for i in (2, 3):
        with pytest.raises(index_format.IndexFormatError):
            docs[i]


def test_ends_read_from_the_file_are_judged_as_through_the_map(monkeypatch, tmp_path):
    monkeypatch.setattr(docs_file, "ENDS_SAMPLE", 3)
    raw = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * i) for i in range(9))
    path = tmp_path / "docs.jsonl"
    path.write_bytes(raw)
    true = _line_ends(raw, 9, "x")
    looked_at = [0, 4, 8]  # the spread of 3 among 9 lines
    cases = [true]
    for line in looked_at:
        for shift in (-1, 1):
            bad = true.copy()
            bad[line] += shift
            cases.append(bad)
    fd = os.open(path, os.O_RDONLY)
    try:
        for ends in cases:
            assert ends_fit(raw, ends, 9, fd) == ends_fit(raw, ends, 9), ends
        assert ends_fit(raw, true, 9, fd)
        assert sum(ends_fit(raw, e, 9, fd) for e in cases) == 1  # every moved end looked at is refused
    finally:
        os.close(fd)


def test_a_wrong_bm25_key_or_damaged_arrays_fall_back_to_hashing(published, monkeypatch, tmp_path):
    _, link, cache = published
    raw = (link / "bm25.idx").read_bytes()
    key = BM25Index.cache_key(raw, 1.2, 0.75)
    reference = BM25Index.decode(raw, 1.2, 0.75)
    # Another file's key: its arrays are not this file's (header or doc_len differ), so the file is hashed.
    other = tmp_path / "other"
    make_docs(other, 4, "zebra")
    run(other, tmp_path / "art2")
    other_raw = (tmp_path / "art2" / "rag" / "other" / "bm25.idx").read_bytes()
    other_key = BM25Index.decode(other_raw, 1.2, 0.75).store(other_raw, cache, "docs")
    assert other_key is not None
    for wrong in (other_key, "v1k-" + "0" * 40):
        got = BM25Index.load(raw, 1.2, 0.75, "bm25.idx", cache, "docs", key=wrong)
        assert all(np.array_equal(got.to_arrays()[k], v) for k, v in reference.to_arrays().items())
    # A cached entry of the right key with an array missing or of the wrong kind is decoded again, not served.
    entry = cache / f"bm25-docs-{key}"
    for damage in ("missing", "kind"):
        BM25Index.decode(raw, 1.2, 0.75).store(raw, cache, "docs")
        if damage == "missing":
            (entry / "weights.npy").unlink()
        else:
            np.save(entry / "post_doc.npy", np.zeros(3, dtype=np.float32))
        got = BM25Index.load(raw, 1.2, 0.75, "bm25.idx", cache, "docs")
        assert all(np.array_equal(got.to_arrays()[k], v) for k, v in reference.to_arrays().items()), damage
        shutil.rmtree(entry)


def test_entries_are_evicted_like_the_other_cache_entries(published):
    folder, link, cache = published
    for i in range(4):
        make_docs(folder, 9, f"round{i}")
        run(folder, link.parent.parent)
    entries = sorted(p.name for p in cache.iterdir() if p.name.startswith("verified-docs-"))
    assert len(entries) == 2 and entry_dir(link, cache).name in entries


def test_a_retriever_reloads_through_the_entry(published, monkeypatch):
    from ragtui.core.search.retriever import Retriever

    folder, link, cache = published
    reader = Retriever.open(link, cache_dir=cache)
    (folder / "d2.md").write_text("fresh words about otters " * 4, encoding="utf-8")
    run(folder, link.parent.parent)
    counts = Counts(monkeypatch)
    assert reader.reload()
    assert reader.data.stats["verified_entry"] is True and counts.total() == (0, 0, 0)
    assert reader.search("otters", mode="bm25", k=1)[0].doc_id.endswith("d2.md")


def test_removing_an_index_removes_its_entries_and_no_other_index_s(tmp_path):
    from ragtui.core.ingest.remove import remove_index

    art = tmp_path / "art"
    for name in ("docs", "docs-2"):
        make_docs(tmp_path / name)
        run(tmp_path / name, art)
    cache = art / "rag" / ".cache"
    assert entry_dir(art / "rag" / "docs", cache).is_dir()
    kept = entry_dir(art / "rag" / "docs-2", cache)
    remove_index(art, "docs")
    assert not any(p.name.startswith("verified-docs-") and p != kept for p in cache.iterdir())
    assert kept.is_dir()
