"""Which files of a folder are documents, and how each one is read.

The walk never follows a symbolic link to a directory, takes a linked file
only when its target lies inside the folder, never opens anything that is
not a regular file (FIFOs and devices would block or never end), and reports
every file it passes over with the reason.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "DEFAULT_MAX_BYTES",
    "Candidate",
    "WalkRules",
    "decode_document",
    "doc_id_for",
    "unreadable_now",
    "walk_folder",
]

DEFAULT_INCLUDE = tuple(
    f"*{ext}"
    for ext in (
        ".md", ".markdown", ".mdx", ".rst", ".txt", ".text", ".adoc", ".asciidoc", ".org", ".tex", ".d2",
        ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".csv", ".tsv", ".xml", ".html", ".htm",
        ".py", ".pyi", ".go", ".rs", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".c", ".h",
        ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".zsh", ".fish",
        ".sql", ".lua", ".r", ".jl", ".ex", ".exs", ".erl", ".hs", ".ml", ".css", ".scss", ".vue", ".svelte",
        ".proto", ".graphql", ".tf", ".nix", ".dockerfile", ".mk", ".cmake",
    )
) + ("README", "LICENSE", "Makefile", "Dockerfile", "*.rst.txt")
"""Text-like files by name; anything else is left out unless an include glob names it."""

DEFAULT_EXCLUDE = (
    ".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache",
    # Editor swap, backup and temporary files never become documents.
    "*.swp", "*.swo", "*.swx", "*~", "4913", ".goutputstream-*", "*.tmp", "*.temp", "#*#", ".#*",
)
"""Folder or file names (globs) that are never walked into or indexed; hidden files and folders are skipped too."""

DEFAULT_MAX_BYTES = 16 * 1024 * 1024

_NOT_NOW = frozenset({
    errno.EACCES, errno.EPERM, errno.EIO, errno.EAGAIN, errno.EBUSY, errno.ETXTBSY, errno.EINTR, errno.ENOMEM,
    errno.EMFILE, errno.ENFILE, errno.ESTALE, errno.ETIMEDOUT, errno.ENOLCK, errno.EDEADLK,
})


def unreadable_now(e: OSError) -> bool:
    """Whether ``e`` says a path exists but cannot be read at the moment (permissions, I/O, resources).

    As opposed to: it is gone, it is not a document (not a regular file, too
    large, a link leading out), which end its life as a document.
    """
    return e.errno in _NOT_NOW


def line_break_in(name: str) -> bool:
    """Whether a file or folder name holds CR or LF: its doc_id, hence its chunk references, could not be
    written on one line or typed back (references refuse them), so such files are never documents."""
    return "\n" in name or "\r" in name


LINE_BREAK_REASON = "file name holds a line break (CR or LF): its chunks could not be referenced (rename it)"


@dataclass(frozen=True)
class WalkRules:
    include: Sequence[str] = DEFAULT_INCLUDE
    exclude: Sequence[str] = DEFAULT_EXCLUDE
    max_bytes: int = DEFAULT_MAX_BYTES
    skip_under: Sequence[Path] = ()
    """Absolute folders never walked (the artifacts root when it lies inside the folder)."""

    def wants(self, name: str) -> bool:
        """Whether a file of this name is a document (not hidden, include matches, exclude does not)."""
        if name.startswith("."):
            return False
        if any(fnmatch.fnmatchcase(name, pat) for pat in self.exclude):
            return False
        return any(fnmatch.fnmatchcase(name, pat) for pat in self.include)

    def walks_into(self, name: str) -> bool:
        if name.startswith("."):
            return False
        return not any(fnmatch.fnmatchcase(name, pat) for pat in self.exclude)


@dataclass(frozen=True)
class Candidate:
    """A file that may be a document: its path, doc_id and the stat that identifies its content."""

    path: Path
    doc_id: str
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int


def doc_id_for(folder: Path, path: Path) -> str | None:
    """``path`` relative to the folder's parent with ``/`` separators, or None if not UTF-8."""
    rel = os.path.relpath(path, folder.parent)
    doc_id = rel.replace(os.sep, "/")
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return doc_id


def walk_folder(
    folder: Path, rules: WalkRules, skipped: list[tuple[str, str]], start: Path | None = None,
    unreadable: list[Path] | None = None,
) -> list[Candidate]:
    """Every document candidate under ``folder`` (absolute), sorted by doc_id bytes.

    ``start`` (a folder inside ``folder``) limits the walk to that subtree;
    doc_ids and the "inside the folder" rule for links stay those of
    ``folder``. Files passed over are appended to ``skipped`` as (path, reason);
    files and folders that exist but cannot be examined now (``unreadable_now``)
    are also appended to ``unreadable``, so a writer can keep what it had of them.
    """
    out: list[Candidate] = []
    skip_under = {os.path.realpath(p) for p in rules.skip_under}
    real_folder = os.path.realpath(folder)
    stack = [str(start or folder)]
    while stack:
        current = stack.pop()
        if os.path.realpath(current) in skip_under:
            continue
        try:
            entries = list(os.scandir(current))
        except OSError as e:
            skipped.append((current, f"cannot list folder: {e.strerror}"))
            if unreadable is not None and unreadable_now(e):
                unreadable.append(Path(current))
            continue
        for entry in entries:
            try:
                is_link = entry.is_symlink()
                if entry.is_dir(follow_symlinks=False):
                    if rules.walks_into(entry.name):
                        if line_break_in(entry.name):
                            skipped.append((entry.path, LINE_BREAK_REASON.replace("file name", "folder name")))
                        else:
                            stack.append(entry.path)
                    continue
            except OSError as e:
                skipped.append((entry.path, f"cannot stat: {e.strerror}"))
                if unreadable is not None and unreadable_now(e):
                    unreadable.append(Path(entry.path))
                continue
            if not rules.wants(entry.name):
                continue
            cand = candidate(folder, Path(entry.path), rules, skipped, real_folder, is_link, unreadable=unreadable)
            if cand is not None:
                out.append(cand)
    out.sort(key=lambda c: c.doc_id.encode("utf-8"))
    return out


def candidate(
    folder: Path, path: Path, rules: WalkRules, skipped: list[tuple[str, str]], real_folder: str | None = None,
    is_link: bool | None = None, *, unreadable: list[Path] | None = None,
) -> Candidate | None:
    """Stat one path as a document candidate, or record why it is passed over.

    A path that is gone is recorded as "vanished"; one that exists but cannot
    be examined now is also appended to ``unreadable`` (see ``walk_folder``).
    """
    real_folder = real_folder or os.path.realpath(folder)
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(path)
            if os.path.commonpath([target, real_folder]) != real_folder:
                skipped.append((str(path), "symbolic link pointing outside the folder (not followed)"))
                return None
            st = os.stat(path)
    except OSError as e:
        if isinstance(e, (FileNotFoundError, NotADirectoryError)):
            skipped.append((str(path), "vanished"))
        elif e.errno == errno.ELOOP:
            skipped.append((str(path), "symbolic link loop (not followed)"))
        else:
            skipped.append((str(path), f"cannot stat: {e.strerror}"))
            if unreadable is not None and unreadable_now(e):
                unreadable.append(path)
        return None
    if not stat.S_ISREG(st.st_mode):
        skipped.append((str(path), "not a regular file (never opened)"))
        return None
    if st.st_size > rules.max_bytes:
        skipped.append((str(path), f"larger than the {rules.max_bytes:,}-byte limit"))
        return None
    doc_id = doc_id_for(folder, path)
    if doc_id is None:
        skipped.append((os.fsencode(path).decode("utf-8", "replace"), "file name is not valid UTF-8"))
        return None
    if line_break_in(doc_id):
        skipped.append((str(path), LINE_BREAK_REASON))
        return None
    return Candidate(path, doc_id, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


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


def read_file(path: Path, max_bytes: int, inside: str | os.PathLike | None = None) -> bytes:
    """Read a regular file without blocking on FIFOs (O_NONBLOCK) and without following a swap to a device.

    With ``inside`` (a folder's real path), a file that resolves outside it is
    refused with ``OSError`` even if a link was re-pointed after the walk checked
    it: the path is resolved and checked, opened without following a final
    link, and the descriptor's own path is checked again after the open.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    target = path
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


def filter_paths(paths: Iterable[Path], folder: Path) -> list[Path]:
    """The given paths that lie inside ``folder`` (absolute)."""
    real_folder = os.path.abspath(folder)
    out = []
    for p in paths:
        ap = os.path.abspath(p)
        if os.path.commonpath([ap, real_folder]) == real_folder:
            out.append(Path(ap))
    return out
