"""core.files: the one bounded reader for files outside the index, and replacing a file whole."""

from __future__ import annotations

import errno
import os

import pytest

from ragtui.core.files import NotRegularError, TooLargeError, open_regular, read_file, replace_file


def test_each_kind_that_is_not_a_regular_file_is_refused_by_name_and_never_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name, words in (("fifo", "is a FIFO"), ("dir", "is a directory"), ("zero", "is a character device")):
        with pytest.raises(NotRegularError, match=words) as e:
            read_file(tmp_path / name, 100)
        assert e.value.filename == str(tmp_path / name)
    with pytest.raises(NotRegularError, match="is a symbolic link"):
        read_file(tmp_path / "zero", 100, follow=False)


def test_the_bound_is_checked_before_reading_and_links_are_followed_only_when_asked(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 10)
    (tmp_path / "link").symlink_to("f")
    assert read_file(tmp_path / "f", 10) == b"x" * 10
    assert read_file(tmp_path / "link", 10) == b"x" * 10
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 40)  # a TiB, never read
    with pytest.raises(TooLargeError, match="is 1,099,511,627,776 bytes, over the 10-byte limit for a test"):
        read_file(tmp_path / "sparse", 10, what="a test")
    with pytest.raises(OSError) as e:
        open_regular(tmp_path / "missing")
    assert e.value.errno == errno.ENOENT


def test_replace_file_never_writes_through_what_is_at_its_temporary_name(tmp_path):
    target = tmp_path / "state"
    os.mkfifo(target)
    os.mkfifo(tmp_path / f".state.{os.getpid()}.tmp")
    replace_file(target, b"new\n")
    assert target.read_bytes() == b"new\n" and sorted(os.listdir(tmp_path)) == ["state"]
    (tmp_path / "elsewhere").write_bytes(b"keep")
    (tmp_path / f".state.{os.getpid()}.tmp").symlink_to("elsewhere")
    replace_file(target, b"newer\n")
    assert target.read_bytes() == b"newer\n" and (tmp_path / "elsewhere").read_bytes() == b"keep"
