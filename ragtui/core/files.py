"""Files ragtui reads and leaves behind outside the index's own four: bounded reads, dead temporaries.

Every file ragtui reads — a document, an ignore file, a ``ragtui.toml``, an
evaluation collection, a report, the state it keeps (``last-index.json``, the
query history, cache entries) — is read through ``read_file`` (or opened
through ``open_regular``, for a file read as a stream), under the rule the
index's own files follow (spec/index-format.md, "Bounds"):

* stat before the open, and a file that is not a regular file (a FIFO, a
  socket, a device such as a link to ``/dev/zero``, a directory) is refused
  by what it is and never opened;
* opened ``O_NONBLOCK`` (a FIFO swapped in after the stat never blocks the
  open) and, where a link makes no sense (state ragtui writes itself),
  ``O_NOFOLLOW``; checked again with ``fstat`` after the open;
* read up to a size bound that fits its purpose, refused when over it (the
  bound is checked from ``fstat`` first and again while reading: the file
  may grow).

Each refusal is an ``OSError`` whose ``strerror`` says what was wrong in words
a person can act on; callers add which file it was and what to do.

``remove_dead_temporaries`` deletes the temporary files and folders that a
killed process left, named with its pid, once that process no longer runs.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from pathlib import Path

__all__ = ["NotRegularError", "TooLargeError", "kind_of", "open_regular", "owner_is_gone", "read_file",
           "remove_dead_temporaries", "replace_file"]


class NotRegularError(OSError):
    """The path is a FIFO, a socket, a device or a directory, not a regular file (never read)."""


class TooLargeError(OSError):
    """The file is over the size bound of what it is read for."""


def kind_of(mode: int) -> str | None:
    """None for a regular file, else what it is ("a FIFO", "a directory", ...)."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return kind
    return "not a regular file"


def _not_regular(mode: int, path: str, when: str) -> NotRegularError | None:
    kind = kind_of(mode)
    if kind is None:
        return None
    return NotRegularError(errno.EINVAL, f"is {kind}, not a regular file (never {when})", path)


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> tuple[int, os.stat_result]:
    """A descriptor open for reading on the regular file ``path``, and its ``fstat``.

    ``follow=False`` refuses a final symbolic link (``O_NOFOLLOW``, an ``OSError`` with ELOOP).
    Raises ``NotRegularError`` for anything else than a regular file, before the open when the
    stat sees it and after it when it was swapped in between; ``OSError`` as the calls raise it.
    """
    target = os.fspath(path)
    st = os.stat(target, follow_symlinks=follow)
    if not follow and stat.S_ISLNK(st.st_mode):
        raise NotRegularError(errno.ELOOP, "is a symbolic link (not followed)", target)
    refusal = _not_regular(st.st_mode, target, "opened")
    if refusal is not None:
        raise refusal
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(target, flags)
    try:
        st = os.fstat(fd)
        refusal = _not_regular(st.st_mode, target, "read")
        if refusal is not None:
            raise refusal
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_file(path: str | os.PathLike[str], max_bytes: int, inside: str | os.PathLike[str] | None = None, *,
              follow: bool = True, what: str = "") -> bytes:
    """The bytes of the regular file ``path``: ``TooLargeError`` when it is over ``max_bytes``.

    ``what`` names the bound in the refusal ("the limit for a configuration file").
    With ``inside`` (a folder's real path), a file that resolves outside it is
    refused with ``OSError`` even if a link was re-pointed after the walk checked
    it: the path is resolved and checked, opened without following a final
    link, and the descriptor's own path is checked again after the open.
    """
    target = os.fspath(path)
    if inside is not None:
        inside = os.path.realpath(inside)
        target = os.path.realpath(path)
        if os.path.commonpath([target, inside]) != inside:
            raise OSError(errno.EXDEV, "resolves outside the folder (not followed)")
        follow = False
    fd, st = open_regular(target, follow=follow)
    try:
        if inside is not None:
            try:
                # A folder on the way may have been swapped for a link after realpath looked.
                opened = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                opened = target  # no /proc: the checks before the open stand
            if os.path.commonpath([opened, inside]) != inside:
                raise OSError(errno.EXDEV, "resolves outside the folder (not followed)")
        bound = f"the {max_bytes:,}-byte limit{' for ' + what if what else ''}"
        if st.st_size > max_bytes:
            raise TooLargeError(errno.EFBIG, f"is {st.st_size:,} bytes, over {bound}", os.fspath(path))
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
            raise TooLargeError(errno.EFBIG, f"grew past {bound} while it was read", os.fspath(path))
        return data
    finally:
        os.close(fd)


def replace_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Put ``data`` at ``path`` whole: written to a new file beside it, then renamed over it.

    The temporary file (``.<name>.<pid>.tmp``) is created anew (``O_EXCL``, ``O_NOFOLLOW``), so a FIFO or
    a link left under its name is never written through; whatever is at ``path`` (a FIFO too) is replaced.
    ``OSError`` as the calls raise it; the temporary file is removed on failure.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# -- what killed processes leave --------------------------------------------------------------------


_TEMPORARY = re.compile(r".*\.tmp(?P<pid>[0-9]+)", re.DOTALL)
"""A cache entry being written: ``<entry>.tmp<pid>``."""


def owner_is_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs (this process, and one of another user's, count as running)."""
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # alive under another user, or no such pid can exist: not ours to judge
    return False


def remove_dead_temporaries(folder: Path, pattern: re.Pattern[str] = _TEMPORARY) -> None:
    """Delete the entries of ``folder`` whose whole name matches ``pattern`` and whose owner no longer runs.

    ``pattern`` names the owner's pid in its group ``pid``. An entry that is a
    symbolic link is left alone (it is not what ragtui makes). Best effort.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or not owner_is_gone(int(match["pid"])):
            continue
        path = Path(folder) / name
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)
            elif stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass
