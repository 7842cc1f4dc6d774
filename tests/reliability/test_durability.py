"""Durability order: every new file and directory is flushed before it is published, and rag/ after."""

from __future__ import annotations

import errno
import os

import pytest

from ragtui.core.errors import StorageError
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.publish import IndexLock, encode_index, publish
from tests.reliability.cases import CI, params
from tests.reliability.helpers import make_folder, run_sync
from tests.reliability.helpers_faults import RecordingOps, durability_cases, durability_problems, using_ops
from tests.unit.indexgen import make_meta, make_records, random_vectors


def _files(index_id: str, docs: dict):
    records = make_records(docs)
    return encode_index(make_meta(index_id, len(records), 8), records, random_vectors(len(records), 8))


def test_first_publish_flushes_files_then_folders_then_the_link(tmp_path):
    rec = RecordingOps()
    with IndexLock(tmp_path, "docs"):
        publish(tmp_path, "docs", _files("docs", {"a.md": ["alpha"], "b.md": ["beta", "gamma"]}), ops=rec)
    assert durability_problems(rec.calls, tmp_path / "rag") == []
    # The folders a first publish creates are flushed in their parents too.
    made = [p for op, p in rec.calls if op == "mkdir"]
    assert str(tmp_path / "rag" / ".gen" / "docs") in made


def test_update_by_sync_records_the_promised_order(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    make_folder(folder, 1)
    run_sync(folder, art)
    make_folder(folder, 2)
    with using_ops(RecordingOps(write_max=512)) as rec:
        assert run_sync(folder, art).published
    assert durability_problems(rec.calls, art / "rag") == []
    ops = [op for op, _ in rec.calls]
    # Old generations go only after the new link is on disk.
    assert ops.index("unlink") > ops.index("symlink")


def test_the_checker_catches_a_missing_flush(tmp_path):
    """The order check itself: drop one file's fsync or the final rag/ fsync and it complains."""
    rec = RecordingOps()
    with IndexLock(tmp_path, "docs"):
        publish(tmp_path, "docs", _files("docs", {"a.md": ["alpha"]}), ops=rec)
    root = tmp_path / "rag"
    no_file_sync = [c for c in rec.calls if not (c[0] == "fsync" and c[1].endswith("docs.jsonl"))]
    assert any("docs.jsonl" in p for p in durability_problems(no_file_sync, root))
    no_root_sync = [c for c in rec.calls if c != ("fsync", str(root))]
    assert any("rag/ is not flushed" in p for p in durability_problems(no_root_sync, root))
    late_rename = [c for c in rec.calls if c[0] != "rename" or "link.tmp" not in c[1]] + [
        c for c in rec.calls if c[0] == "rename" and "link.tmp" in c[1]]
    assert durability_problems(late_rename, root) != []


def _plain_index(tmp_path):
    """An index another tool wrote: a plain directory at rag/docs, not a link to a generation."""
    plain = tmp_path / "rag" / "docs"
    with IndexLock(tmp_path, "docs"):
        publish(tmp_path, "docs", _files("docs", {"a.md": ["alpha"]}))
    real = os.path.realpath(plain)
    os.unlink(plain)
    os.rename(real, plain)
    return plain


def test_adopting_a_plain_directory_swaps_atomically(tmp_path):
    rec = RecordingOps()
    plain = _plain_index(tmp_path)
    with IndexLock(tmp_path, "docs"):
        publish(tmp_path, "docs", _files("docs", {"b.md": ["beta"]}), ops=rec)
    assert plain.is_symlink()
    ops = [op for op, _ in rec.calls]
    assert "exchange" in ops and durability_problems(rec.calls, tmp_path / "rag") == []


def test_adopting_without_an_atomic_swap_keeps_the_old_index_if_the_link_cannot_be_placed(tmp_path):
    """On a filesystem without RENAME_EXCHANGE the fallback is two renames; if the second fails,
    the old directory goes back under its name."""

    class NoExchange(RecordingOps):
        def exchange(self, a, b):
            self._call("exchange", f"{a} <-> {b}")
            raise OSError(errno.EINVAL, "not supported here")

        def rename(self, src, dst):
            if str(src).endswith(".link.tmp"):
                self._call("rename", f"{src} -> {dst}")
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return super().rename(src, dst)

    plain = _plain_index(tmp_path)
    with IndexLock(tmp_path, "docs"):
        with pytest.raises(StorageError, match="previous index is unchanged"):
            publish(tmp_path, "docs", _files("docs", {"b.md": ["beta"]}), ops=NoExchange())
    assert plain.is_dir() and not plain.is_symlink()
    assert [r.chunk_id for r in read_index(plain).records] == ["a.md#0"]


@pytest.mark.parametrize("case", params(durability_cases(CI)))
def test_publish_order_with_short_writes(case, tmp_path):
    """A first publish, an update and an adoption, with writes of 7, 512, 4096 bytes or any size."""
    case(tmp_path)
