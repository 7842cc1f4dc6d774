"""Reading one document from disk: bytes without blocking or leaving the folder, then text.

The walk, the ignore-file reader (``patterns``) and citation checks all read
files the same way, so this sits below all of them.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["decode_document", "read_file"]


def decode_document(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for a UTF-8 document, or (None, reason) for one that is not text.

    A UTF-8 byte order mark is dropped; line endings are kept as they are.
    """
    if b"\0" in data[:8192]:
        return None, "binary (NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte {e.start})"
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\0" in text:
        return None, "binary (NUL bytes)"
    return text, None


def read_file(path: Path, max_bytes: int, inside: str | os.PathLike[str] | None = None) -> bytes:
    """Read a regular file without blocking on FIFOs (O_NONBLOCK) and without following a swap to a device.

    With ``inside`` (a folder's real path), a file that resolves outside it is
    refused with ``OSError`` even if a link was re-pointed after the walk checked
    it: the path is resolved and checked, opened without following a final
    link, and the descriptor's own path is checked again after the open.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    target = os.fspath(path)
    if inside is not None:
        inside = os.path.realpath(inside)
        target = os.path.realpath(path)
        if os.path.commonpath([target, inside]) != inside:
            raise OSError(errno.EXDEV, "resolves outside the folder (not followed)")
        flags |= os.O_NOFOLLOW
    fd = os.open(target, flags)
    try:
        if inside is not None:
            try:
                # A folder on the way may have been swapped for a link after realpath looked.
                opened = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                opened = target  # no /proc: the checks before the open stand
            if os.path.commonpath([opened, inside]) != inside:
                raise OSError(errno.EXDEV, "resolves outside the folder (not followed)")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        chunks = []
        remaining = max_bytes + 1
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 20))
            if not block:
                break
            chunks.append(block)
            remaining -= len(block)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise OSError(0, f"grew past the {max_bytes:,}-byte limit")
        return data
    finally:
        os.close(fd)
