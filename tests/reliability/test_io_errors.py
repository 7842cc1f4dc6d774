"""I/O errors while publishing: the command fails with exit 3 and one clear line; the index stays as it was."""

from __future__ import annotations

import errno

import pytest

from ragtui.core.errors import StorageError
from tests.reliability.helpers import leftovers, make_folder, run_sync, snapshot
from tests.reliability.helpers_child import ForkServer
from tests.reliability.helpers_faults import FaultOps, run_io_matrix, using_ops
from tests.reliability.helpers_io_cli import run_cli_faults, run_real_fs_faults


@pytest.fixture(scope="module")
def server():
    with ForkServer() as s:
        yield s


def test_every_call_failing_once_and_persistently(tmp_path):
    """Each call of a publish (open, write, fsync, close, mkdir, rename, symlink, unlink, rmdir) fails
    with ENOSPC, EIO and EACCES, at each of its occurrences and then every time."""
    tally = run_io_matrix(tmp_path)
    assert tally.failures == []
    assert tally.tried >= 150


def test_a_failed_fsync_is_not_retried(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    make_folder(folder, 1)
    run_sync(folder, art)
    old = snapshot(art / "rag" / "docs")
    make_folder(folder, 2)
    with using_ops(FaultOps("fsync", errno.EIO, nth=2)) as ops:
        with pytest.raises(StorageError, match="flushing .*docs.jsonl to disk failed: Input/output error"):
            run_sync(folder, art)
    after = ops.calls[ops.failed_at + 1 :]
    assert [op for op, _ in after if op not in ("close", "unlink", "rmdir")] == []
    tmp_gen = ops.calls[ops.failed_at][1].rsplit("/", 1)[0]
    assert ("rmdir", tmp_gen) in after  # the unflushed generation is thrown away, not flushed again
    assert snapshot(art / "rag" / "docs") == old
    assert leftovers(art) == [".state/docs/embedded.bin"]  # the vectors are kept for the next run


def test_cli_exits_3_with_one_line(tmp_path, server):
    tally = run_cli_faults(tmp_path, server)
    assert tally.failures == []
    assert tally.tried == 21


def test_real_filesystem_faults(server):
    """A full tmpfs, a read-only remount and a folder the user may not write, with the installed command."""
    tally, skipped = run_real_fs_faults(server)
    assert tally.failures == []
    if skipped:
        pytest.skip("; ".join(skipped))
