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
