"""A publish that fails where a writer makes its generation's directory: what it wrote before stays unpublished."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ragtui.core.fsops import FsOps
from ragtui.core.ingest import publish as publish_mod
from ragtui.core.ingest.sync import IndexWriter


class NoMkdir(FsOps):
    """The publish cannot make its generation's directory (the disk is full)."""

    def mkdir(self, path: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def save_unpublished(w: IndexWriter) -> None:
    """``w.sync()`` with its publish failing: the overlay written before it stays, beside the generation."""
    saved = publish_mod.OS_OPS
    publish_mod.OS_OPS = NoMkdir()
    try:
        with pytest.raises(Exception, match="cannot publish"):
            w.sync()
    finally:
        publish_mod.OS_OPS = saved
