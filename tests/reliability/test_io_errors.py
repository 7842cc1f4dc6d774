"""I/O errors while publishing: the command fails with exit 3 and one clear line; the index stays as it was."""

from __future__ import annotations

import errno

import pytest

from ragtui.core.errors import StorageError
from tests.reliability.cases import CI, params
from tests.reliability.helpers import leftovers, make_folder, run_sync, snapshot
from tests.reliability.helpers_faults import FaultOps, io_matrix_cases, using_ops
from tests.reliability.helpers_io_cli import cli_fault_cases, real_fs_cases


@pytest.mark.parametrize("case", params(io_matrix_cases(CI)))
def test_call_fails(case, tmp_path):
    """Each call of a publish (open, write, fsync, close, mkdir, rename, symlink, unlink, rmdir) fails
    with ENOSPC, EIO and EACCES, at each of its occurrences (``fsync-2-EIO``) and then every time
    (``fsync-every-EIO``)."""
    case(tmp_path)


def test_the_matrix_covers_a_real_publish():
    assert len(io_matrix_cases(CI)) >= 150


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


@pytest.mark.parametrize("case", params(cli_fault_cases(CI)))
def test_cli_exits_3_with_one_line(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(real_fs_cases(CI)))
def test_real_filesystem_fault(case, tmp_path):
    """A full tmpfs, a read-only remount and a folder the user may not write."""
    case(tmp_path)
