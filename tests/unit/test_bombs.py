"""Files that would block or exhaust a reader, in and beside an index; queries and BM25 parameters out of bounds.

A reader that regressed would block forever on a FIFO (opened for reading,
it waits for a writer) or read /dev/zero until memory runs out. Neither may
take the test run down with it: pytest-timeout interrupts a blocked test,
``fifo_guard`` opens the write end of every FIFO a test made (freeing a
reader blocked elsewhere), and every test that plants such a file runs with a
capped address space.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import warnings
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.errors import IndexFormatError, QueryError, StorageError, UsageError
from ragtui.core.index import docs_file, index_format
from ragtui.core.index.arraycache import cached_arrays
from ragtui.core.index.bm25 import B_RANGE, K1_RANGE, BM25Index, bm25_params_problem, check_bm25_params
from ragtui.core.index.bm25_write import build_postings
from ragtui.core.index.index_format import FILES, MAX_META_BYTES, read_index
from ragtui.core.ingest import state_store as state_module
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.publish import IndexLock
from ragtui.core.ingest.sync import load_state, sync
from ragtui.core.search.retriever import MAX_QUERY_CHARS, MODES, Retriever, check_query
from tests.unit.fakes import HashEmbedder

from .indexgen import build

pytestmark = pytest.mark.timeout(60)

DOCS = {"docs/a.md": ["alpha text about cats"], "docs/b.md": ["beta one", "beta two"]}
KINDS = ("fifo", "socket", "directory", "device")


def plant(path: Path, kind: str, mkfifo=os.mkfifo) -> None:
    path.unlink()
    if kind == "fifo":
        mkfifo(path)
    elif kind == "socket":
        os.mknod(path, stat.S_IFSOCK | 0o600)
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_bytes(b"x")
    elif kind == "device":
        path.symlink_to("/dev/zero")


def gen_dir(index: Path) -> Path:
    return Path(os.path.realpath(index))


# -- the reader: only regular files, opened without blocking ---------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", FILES)
def test_reader_refuses_what_is_not_a_regular_file(tmp_path, fifo_guard, name, kind):
    path, _, _ = build(tmp_path, "docs", DOCS)
    plant(gen_dir(path) / name, kind, fifo_guard)
    for full in (True, False):
        with pytest.raises(IndexFormatError, match="not a regular file") as e:
            read_index(path, full=full)
        assert e.value.path == str(path / name)
        assert e.value.exit_code == 3


@pytest.mark.parametrize("kind", ("fifo", "device", "file"))
def test_a_link_to_something_else_than_a_directory_is_named(tmp_path, fifo_guard, kind):
    path, _, _ = build(tmp_path, "docs", DOCS)
    target = tmp_path / "elsewhere"
    if kind == "fifo":
        fifo_guard(target)
    elif kind == "file":
        target.write_bytes(b"not an index")
    else:
        target = Path("/dev/zero")
    path.unlink()
    path.symlink_to(target)
    with pytest.raises(IndexFormatError, match="not an index directory") as e:
        read_index(path)
    assert e.value.path == str(path)


# -- the reader: bounded by what the format allows --------------------------------------------


def test_meta_json_is_read_only_up_to_its_bound(tmp_path, bounded_memory):
    path, _, _ = build(tmp_path, "docs", DOCS)
    meta = gen_dir(path) / "meta.json"
    raw = meta.read_bytes()
    meta.write_bytes(raw + b" " * (MAX_META_BYTES - len(raw)))  # exactly at the bound: still meta.json
    assert read_index(path).meta.n_chunks == 3
    meta.write_bytes(raw + b" " * (MAX_META_BYTES - len(raw) + 1))
    with pytest.raises(IndexFormatError, match="at most 1,048,576"):
        read_index(path)
    with open(meta, "r+b") as f:
        f.truncate(8 << 30)  # sparse: 8 GiB of nothing, never read
    with pytest.raises(IndexFormatError, match="8,589,934,592 bytes"):
        read_index(path)


def test_a_docs_line_is_bounded(tmp_path, monkeypatch):
    path, _, _ = build(tmp_path, "docs", DOCS)
    longest = max(len(line) for line in (gen_dir(path) / "docs.jsonl").read_bytes().split(b"\n"))
    monkeypatch.setattr(docs_file, "MAX_DOCS_LINE_BYTES", longest)
    assert len(read_index(path).records) == 3
    monkeypatch.setattr(docs_file, "MAX_DOCS_LINE_BYTES", longest - 1)
    with pytest.raises(IndexFormatError, match=r"docs.jsonl: (line \d is longer|is \d+ bytes, more than 3 lines)"):
        read_index(path)


def test_a_long_line_is_refused_without_reading_the_rest(tmp_path, monkeypatch):
    """The count stops at the first line over the bound, even in a file whose total size is allowed."""
    path, _, _ = build(tmp_path, "docs", DOCS)
    monkeypatch.setattr(docs_file, "MAX_DOCS_LINE_BYTES", 1000)
    monkeypatch.setattr(docs_file, "_COUNT_BLOCK", 64)
    docs = gen_dir(path) / "docs.jsonl"
    lines = docs.read_bytes().split(b"\n")[:-1]
    docs.write_bytes(lines[0] + b" " * 1500 + b"\n" + b"\n".join(lines[1:]) + b"\n")
    with pytest.raises(IndexFormatError, match="line 1 is longer than the 1,000 bytes"):
        read_index(path, full=False)


def test_more_lines_than_n_chunks_keep_no_more_offsets(tmp_path):
    path, _, _ = build(tmp_path, "docs", DOCS)
    raw = (gen_dir(path) / "docs.jsonl").read_bytes() + b"\n" * 1000
    with pytest.raises(IndexFormatError, match="has 1003 lines, but meta.json says n_chunks 3"):
        docs_file._line_ends(raw, 3, "docs.jsonl")


@pytest.mark.parametrize(("name", "match"), [
    ("docs.jsonl", "more than 3 lines"),
    ("vectors.f32", "but n_chunks 3 x dim 8 x 4 needs 96"),
    ("bm25.idx", "more than 3 chunks and"),
])
def test_huge_files_are_refused_before_they_are_read(tmp_path, monkeypatch, bounded_memory, name, match):
    path, _, _ = build(tmp_path, "docs", DOCS)
    with open(gen_dir(path) / name, "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.truncate(8 << 30)  # the real content, then a sparse hole
    monkeypatch.setattr(BM25Index, "load", lambda *a, **k: pytest.fail("bm25.idx decoded before its size was checked"))
    with pytest.raises(IndexFormatError, match=match) as e:
        read_index(path, full=False)
    assert e.value.path.endswith(name)


def test_bm25_header_is_checked_against_meta_before_decoding(tmp_path, monkeypatch):
    path, _, _ = build(tmp_path, "docs", DOCS)
    bm25 = gen_dir(path) / "bm25.idx"
    raw = bytearray(bm25.read_bytes())
    raw[8:12] = (1000).to_bytes(4, "little")
    bm25.write_bytes(bytes(raw))
    monkeypatch.setattr(BM25Index, "load", lambda *a, **k: pytest.fail("decoded before n_docs was checked"))
    with pytest.raises(IndexFormatError, match="n_docs is 1000, but meta.json says n_chunks 3"):
        read_index(path)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("dim", 65537, "beyond what the format allows"),
    ("n_chunks", 2**32, "beyond what the format allows"),
    ("bm25", {"k1": -1, "b": 0.75}, "BM25 k1 must be from 0 to 100"),
    ("bm25", {"k1": 1.2, "b": 1.5}, "BM25 b must be from 0 to 1"),
])
def test_meta_json_values_beyond_the_format(tmp_path, field, value, match):
    path, _, _ = build(tmp_path, "docs", DOCS)
    meta_path = gen_dir(path) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta[field] = value
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match=match):
        read_index(path)


# -- caches, writer state, journal, lock: never block, bounded, discarded when bad -------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_cached_array_that_is_not_a_file_is_recomputed(tmp_path, fifo_guard, kind):
    cache = tmp_path / "cache"
    arrays, _ = cached_arrays(cache, "t", "x", "k", lambda: {"a": np.arange(3)})
    entry = next(cache.iterdir())
    plant(entry / "a.npy", kind, fifo_guard)
    calls = []
    arrays, from_cache = cached_arrays(cache, "t", "x", "k", lambda: calls.append(1) or {"a": np.arange(3)})
    assert not from_cache and calls == [1] and arrays["a"].tolist() == [0, 1, 2]
    assert cached_arrays(cache, "t", "x", "k", lambda: pytest.fail("not cached again"))[1]


def _ingested(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(("cats purr softly", "dogs fetch sticks", "birds sing at dawn")):
        (folder / f"d{i}.md").write_text(text + "\n")
    art = tmp_path / "art"
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    return folder, art


@pytest.mark.parametrize("kind", (*KINDS, "huge"))
def test_a_bad_writer_state_is_discarded_and_rewritten(tmp_path, fifo_guard, monkeypatch, kind):
    folder, art = _ingested(tmp_path)
    state = art / "rag" / ".state" / "docs" / "state.bin"
    if kind == "huge":
        monkeypatch.setattr(state_module, "MAX_STATE_BYTES", state.stat().st_size - 1)
    else:
        plant(state, kind, fifo_guard)
    assert load_state(art, "docs") == {}
    monkeypatch.undo()
    (folder / "d0.md").write_text("cats purr loudly\n")
    report = sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    assert report.published
    assert stat.S_ISREG(os.lstat(state).st_mode) and load_state(art, "docs")["files"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_journal_is_ignored_and_replaced(tmp_path, fifo_guard, kind):
    journal = EmbedJournal(tmp_path, "docs", "m", 4)
    journal.path.parent.mkdir(parents=True)
    journal.path.write_bytes(b"")
    plant(journal.path, kind, fifo_guard)
    assert journal.load() == {}
    fp = "ab" * 32
    journal.append([fp], np.ones((1, 4), dtype=np.float32) / 2)
    if kind != "directory":  # a directory is left alone: the journal only saves embedding calls
        assert list(journal.load()) == [fp]


def test_the_journal_keeps_only_what_is_wanted_and_reads_a_bounded_prefix(tmp_path, monkeypatch):
    journal = EmbedJournal(tmp_path, "docs", "m", 4)
    fps = [f"{i:02x}" * 32 for i in range(10)]
    journal.append(fps, np.ones((10, 4), dtype=np.float32) / 2)
    assert set(journal.load()) == set(fps)
    assert set(journal.load(wanted={fps[3], "ff" * 32})) == {fps[3]}
    monkeypatch.setattr(EmbedJournal, "MAX_BYTES", len(journal._header) + 4 * journal._size)
    assert set(journal.load()) == set(fps[:4])


@pytest.mark.parametrize("kind", ("fifo", "device", "directory"))
def test_a_lock_that_is_not_a_regular_file_is_refused_by_name(tmp_path, fifo_guard, kind):
    lock = IndexLock(tmp_path, "docs")
    lock.path.parent.mkdir(parents=True)
    lock.path.write_bytes(b"")
    plant(lock.path, kind, fifo_guard)
    with pytest.raises(StorageError, match="writer lock") as e:
        lock.acquire()
    assert str(lock.path) in str(e.value) and e.value.exit_code == 3


@pytest.mark.parametrize("name", FILES)
def test_sync_rebuilds_a_damaged_generation_even_when_no_document_changed(tmp_path, fifo_guard, name):
    folder, art = _ingested(tmp_path)
    link = art / "rag" / "docs"
    plant(gen_dir(link) / name, "fifo", fifo_guard)
    report = sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    assert report.published and "could not be read" in (report.rebuilt or "")
    assert name in report.rebuilt and "FIFO" in report.rebuilt
    assert read_index(link).n_chunks == 3
    again = sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    assert not again.published and again.rebuilt is None


# -- BM25 parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize(("k1", "b"), [(-1.0, 0.75), (1e308, 0.75), (float("nan"), 0.75), (float("inf"), 0.75),
                                       (100.5, 0.75), (1.2, -0.01), (1.2, 1.01), (True, 0.75), ("1.2", 0.75),
                                       (None, 0.75)])
def test_bm25_parameters_out_of_range_are_refused(tmp_path, k1, b):
    assert bm25_params_problem(k1, b)
    postings = build_postings([["cats", "purr"], ["cats"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's divide/overflow warnings were the old symptom
        for call in (lambda: check_bm25_params(k1, b), lambda: BM25Index.from_postings(postings, k1, b),
                     lambda: sync(tmp_path, artifacts=tmp_path / "art", embedder=HashEmbedder(), k1=k1, b=b)):
            with pytest.raises(UsageError, match="BM25"):
                call()
    assert not (tmp_path / "art").exists()


def test_bm25_parameter_bounds_are_inclusive_and_give_finite_scores():
    postings = build_postings([["cats", "purr"], ["cats"], ["dogs"] * 40])
    for k1 in (K1_RANGE[0], 1.2, K1_RANGE[1]):
        for b in (B_RANGE[0], 0.5, B_RANGE[1]):
            assert bm25_params_problem(k1, b) is None
            scores = BM25Index.from_postings(postings, k1, b).scores("cats dogs purr")
            assert np.isfinite(scores).all() and (scores > 0).all()


# -- queries -----------------------------------------------------------------------------------


def test_check_query():
    assert check_query("cats") == "cats"
    assert check_query("x" * MAX_QUERY_CHARS) == "x" * MAX_QUERY_CHARS
    assert check_query("nul\0 and \x1b[2J escapes") == "nul\0 and \x1b[2J escapes"
    with pytest.raises(QueryError, match="8,193 characters long; a query may have at most 8,192"):
        check_query("x" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(QueryError, match=r"not UTF-8 text \(the byte 0xe9 at character 4\)"):
        check_query(b"caf\xe9".decode("utf-8", "surrogateescape"))
    with pytest.raises(QueryError, match=r"lone surrogate U\+D800"):
        check_query("\ud800")
    error = QueryError("x")
    assert isinstance(error, ValueError) and isinstance(error, UsageError) and error.exit_code == 2


@pytest.mark.parametrize("mode", MODES)
def test_search_refuses_a_bad_query_before_embedding_it(tmp_path, mode):
    folder, art = _ingested(tmp_path)
    embedder = HashEmbedder()
    retriever = Retriever.open(art / "rag" / "docs", embedder=embedder)
    for query in ("cats " * 200_000, "caf\udce9"):
        with pytest.raises(QueryError):
            retriever.search(query, mode=mode)
        with pytest.raises(QueryError):
            retriever.query_vector(query)
    assert embedder.embedded == []
    assert retriever.search("cats\0purr", mode=mode)


def test_cli_maps_memory_error_to_one_line_exit_3(tmp_path, monkeypatch, capsys):
    from ragtui import cli

    _ingested(tmp_path)

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(index_format, "read_index", exhausted)
    code = cli.main(["info", "--artifacts", str(tmp_path / "art"), "--index", "docs"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("ragtui: error: out of memory") and err.count("\n") == 1 and "internal error" not in err


def test_errno_of_a_refused_cache_file_is_not_a_crash(tmp_path):
    """A cache entry that is a link to /dev/zero is refused by O_NOFOLLOW (ELOOP), and recomputed."""
    cache = tmp_path / "cache"
    cached_arrays(cache, "t", "x", "k", lambda: {"a": np.arange(3)})
    npy = next(cache.iterdir()) / "a.npy"
    npy.unlink()
    npy.symlink_to("/dev/zero")
    with pytest.raises(OSError) as e:
        os.open(npy, os.O_RDONLY | os.O_NOFOLLOW)
    assert e.value.errno == errno.ELOOP
    assert cached_arrays(cache, "t", "x", "k", lambda: {"a": np.arange(3)})[0]["a"].tolist() == [0, 1, 2]
