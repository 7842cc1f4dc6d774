"""publish() writes each file from pieces: buffers, and ranges of open files copied in the kernel."""

from __future__ import annotations

import errno
import os

import pytest

from ragtui.core.index.index_format import BM25, DOCS, META, VECTORS
from ragtui.core.ingest.publish import FileRange, FsOps, IndexLock, file_size, publish


def _publish_from_pieces(tmp_path, ops=None):
    src = tmp_path / "source.bin"
    src.write_bytes(bytes(range(256)) * 64)  # 16 KiB
    fd = os.open(src, os.O_RDONLY)
    try:
        docs = [b"head-", FileRange(fd, 100, 5000), memoryview(b"-middle-"), FileRange(fd, 0, 7), b""]
        files = {META: b"{}", DOCS: docs, VECTORS: [FileRange(fd, 16000, 384)], BM25: b"TLBM"}
        with IndexLock(tmp_path / "art", "x"):
            path = publish(tmp_path / "art", "x", files, ops=ops)
    finally:
        os.close(fd)
    raw = src.read_bytes()
    assert (path / DOCS).read_bytes() == b"head-" + raw[100:5100] + b"-middle-" + raw[:7]
    assert (path / VECTORS).read_bytes() == raw[16000:16384]
    assert file_size(docs) == 5 + 5000 + 8 + 7
    return path


def test_ranges_are_copied_in_order(tmp_path):
    _publish_from_pieces(tmp_path)


@pytest.mark.parametrize("err", [errno.EXDEV, errno.ENOSYS, errno.EINVAL])
def test_where_the_kernel_cannot_copy_the_bytes_are_read_and_written(tmp_path, monkeypatch, err):
    def refuse(*args, **kwargs):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "copy_file_range", refuse)
    _publish_from_pieces(tmp_path)


def test_a_source_shorter_than_its_range_fails_the_publish_and_keeps_the_old_index(tmp_path):
    from ragtui.core.errors import StorageError

    src = tmp_path / "short.bin"
    src.write_bytes(b"0123456789")
    fd = os.open(src, os.O_RDONLY)
    try:
        files = {META: b"{}", DOCS: [FileRange(fd, 5, 100)], VECTORS: b"", BM25: b"TLBM"}
        with IndexLock(tmp_path / "art", "x"), pytest.raises(StorageError, match="shorter than expected"):
            publish(tmp_path / "art", "x", files, ops=FsOps())
    finally:
        os.close(fd)
    assert not (tmp_path / "art" / "rag" / "x").exists()


def _first_generation(tmp_path):
    files = {META: b"{}", DOCS: b"old docs\n", VECTORS: b"", BM25: b"TLBM-old"}
    with IndexLock(tmp_path / "art", "x"):
        return publish(tmp_path / "art", "x", files)


def test_written_behind_then_committed_is_the_same_publish(tmp_path):
    from ragtui.core.ingest.publish import NewGeneration

    _first_generation(tmp_path)
    with IndexLock(tmp_path / "art", "x"), NewGeneration(tmp_path / "art", "x") as new:
        new.write_behind({META: b'{"n": 2}', DOCS: [b"new ", b"docs\n"], VECTORS: b"\0" * 8})
        new.write({BM25: b"TLBM-new"})
        path = new.commit()
    assert [(path / n).read_bytes() for n in (META, DOCS, VECTORS, BM25)] == [b'{"n": 2}', b"new docs\n", b"\0" * 8,
                                                                              b"TLBM-new"]
    assert len(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x")) == 1  # the old generation is tidied away


def test_an_error_while_the_thread_writes_leaves_the_previous_index_and_nothing_else(tmp_path):
    from ragtui.core.ingest.publish import NewGeneration

    old = _first_generation(tmp_path)
    gens = sorted(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x"))
    with IndexLock(tmp_path / "art", "x"), pytest.raises(RuntimeError, match="the BM25 work failed"):
        with NewGeneration(tmp_path / "art", "x") as new:
            new.write_behind({META: b"{}", DOCS: b"x" * (1 << 20), VECTORS: b""})
            raise RuntimeError("the BM25 work failed")
    assert sorted(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x")) == gens
    assert (old / BM25).read_bytes() == b"TLBM-old"


def test_a_failure_in_the_thread_is_the_next_calls_storage_error(tmp_path):
    from ragtui.core.errors import StorageError
    from ragtui.core.ingest.publish import NewGeneration

    class NoSpace(FsOps):
        def fsync(self, fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    old = _first_generation(tmp_path)
    gens = sorted(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x"))
    with IndexLock(tmp_path / "art", "x"), NewGeneration(tmp_path / "art", "x", ops=NoSpace()) as new:
        new.write_behind({META: b"{}", DOCS: b"docs\n", VECTORS: b""})
        with pytest.raises(StorageError, match=r"flushing .*meta.json to disk failed: No space left.*previous index is unchanged"):
            new.write({BM25: b"TLBM-new"})
    assert sorted(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x")) == gens
    assert (old / BM25).read_bytes() == b"TLBM-old"


def test_a_streamed_file_is_written_piece_by_piece_and_committed_once_closed(tmp_path):
    from ragtui.core.ingest.publish import NewGeneration

    _first_generation(tmp_path)
    src = tmp_path / "source.bin"
    src.write_bytes(b"0123456789")
    fd = os.open(src, os.O_RDONLY)
    try:
        with IndexLock(tmp_path / "art", "x"), NewGeneration(tmp_path / "art", "x") as new:
            docs = new.stream(DOCS)
            docs.write([FileRange(fd, 2, 3)])
            docs.write(b"-more\n")
            with pytest.raises(ValueError, match="four index files"):
                new.commit()  # docs.jsonl is still open
            assert docs.size == 9
            docs.close()
            new.write({META: b"{}", VECTORS: b"", BM25: b"TLBM-new"})
            path = new.commit()
    finally:
        os.close(fd)
    assert (path / DOCS).read_bytes() == b"234-more\n" and (path / BM25).read_bytes() == b"TLBM-new"


@pytest.mark.parametrize("fails", ["write", "fsync"])
def test_a_streamed_file_that_cannot_be_written_fails_the_publish_and_keeps_the_old_index(tmp_path, fails):
    from ragtui.core.errors import StorageError
    from ragtui.core.ingest.publish import NewGeneration

    class NoSpace(FsOps):
        def write(self, fd, data):
            if fails == "write":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return super().write(fd, data)

        def fsync(self, fd):
            if fails == "fsync":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            super().fsync(fd)

    old = _first_generation(tmp_path)
    gens = sorted(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x"))
    what = "writing" if fails == "write" else "flushing"
    with IndexLock(tmp_path / "art", "x"), NewGeneration(tmp_path / "art", "x", ops=NoSpace()) as new:
        vectors = new.stream(VECTORS)
        with pytest.raises(StorageError, match=rf"{what} .*vectors.f32.* failed: No space left.*previous index is unchanged"):
            vectors.write(b"\0" * 16)
            vectors.close()
    assert sorted(os.listdir(tmp_path / "art" / "rag" / ".gen" / "x")) == gens
    assert (old / BM25).read_bytes() == b"TLBM-old"
