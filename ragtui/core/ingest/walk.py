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
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ragtui.core.documents.registry import KINDS, reader_versions
from ragtui.core.ingest.patterns import IGNORE_FILES, Chain, PathFilter

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "DEFAULT_MAX_BYTES",
    "Candidate",
    "Listing",
    "WalkRules",
    "doc_id_for",
    "unreadable_now",
    "walk_folder",
    "walk_listing",
]

DEFAULT_INCLUDE = tuple(p for kind in KINDS for p in kind.patterns)
"""The files of every kind ragtui reads, by name (spec/documents.md); anything else is left out unless an
``--include`` pattern names it."""

DEFAULT_EXCLUDE = (
    ".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache",
    # Editor swap, backup and temporary files never become documents.
    "*.swp", "*.swo", "*.swx", "*~", "4913", ".goutputstream-*", "*.tmp", "*.temp", "#*#", ".#*",
)
"""Folder or file names (globs) that are never walked into or indexed, whatever the patterns say;
hidden files and folders are skipped too."""

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


def _names_regex(globs: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(g) for g in globs))


_DEFAULT_INCLUDE_RE = _names_regex(DEFAULT_INCLUDE)
_ALWAYS_SKIPPED_RE = _names_regex(DEFAULT_EXCLUDE)
# Both at once for a file: not hidden, not always skipped, a text-like name (one match per file of a walk).
_DEFAULT_DOC_NAME_RE = re.compile(
    rf"(?!\.)(?!{_ALWAYS_SKIPPED_RE.pattern})(?:{_DEFAULT_INCLUDE_RE.pattern})"
)


@dataclass(frozen=True)
class WalkRules:
    """Which files of a folder are documents (spec/patterns.md).

    ``include`` and ``exclude`` are gitignore-style patterns relative to the
    folder (``docs/drafts``, ``*.md``, ``/build``, ``**/tmp/``): ``include``
    replaces the default text-like names, ``exclude`` adds to the names
    always skipped (``DEFAULT_EXCLUDE``, hidden ones). With ``ignore_files``
    the folder's ``.gitignore`` and ``.ignore`` files apply too.
    """

    include: Sequence[str] = DEFAULT_INCLUDE
    exclude: Sequence[str] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    skip_under: Sequence[Path] = ()
    """Absolute folders never walked (the artifacts root when it lies inside the folder)."""
    ignore_files: bool = True

    @property
    def default_include(self) -> bool:
        return tuple(self.include) == DEFAULT_INCLUDE

    @staticmethod
    def skips_name(name: str) -> bool:
        """Whether a file or folder of this name is always left out (hidden, ``DEFAULT_EXCLUDE``)."""
        return name.startswith(".") or _ALWAYS_SKIPPED_RE.match(name) is not None

    @staticmethod
    def wants_name(name: str) -> bool:
        """Whether the default include set takes a file of this name."""
        return _DEFAULT_INCLUDE_RE.match(name) is not None

    @staticmethod
    def doc_name_test() -> Callable[[str], object]:
        """A test that is true for the name of a file the default include set takes and nothing skips
        (``wants_name`` and not ``skips_name``, as one regular expression)."""
        return _DEFAULT_DOC_NAME_RE.match

    def describe(self) -> dict[str, object]:
        """The rules as the writer's state records them (a change makes the next sync walk everything)."""
        return {
            "include": None if self.default_include else list(self.include),
            "exclude": list(self.exclude),
            "ignore_files": self.ignore_files,
            "max_bytes": self.max_bytes,
            "readers": reader_versions(),
        }

    def path_filter(
        self, folder: str | os.PathLike[str], skipped: list[tuple[str, str]] | None = None, *, track: bool = False
    ) -> PathFilter:
        """These rules for paths under ``folder`` (``UsageError`` for a pattern that is not one)."""
        return PathFilter(folder, self, skipped, track=track)


class Candidate(NamedTuple):
    """A file that may be a document: its path, doc_id and the stat that identifies its content.

    A named tuple rather than a frozen dataclass: a walk makes one per file, and a tuple is built
    several times faster (a no-op sync of 100k files makes 100k of them).
    """

    where: str
    """The file's path (``path`` as a ``Path``, made on use: a no-op sync of 100k files needs none)."""
    doc_id: str
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int

    @property
    def path(self) -> Path:
        return Path(self.where)


def doc_id_for(folder: Path, path: Path) -> str | None:
    """``path`` relative to the folder's parent with ``/`` separators, or None if not UTF-8."""
    rel = os.path.relpath(path, folder.parent)
    doc_id = rel.replace(os.sep, "/")
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return doc_id


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Listing:
    """What a walk found, as columns in walk order (not sorted): no object per file.

    ``stamps[i]`` is the plain tuple (size, mtime_ns, ctime_ns, ino) of
    ``doc_ids[i]``, which compares equal to its ``Stamp``: a no-op sync
    compares them with the state's without building anything per file. A
    file's path is the walked folder joined with its doc_id less the
    folder's own name (made on use).
    """

    __slots__ = ("_cut", "_root", "doc_ids", "stamps")

    def __init__(self, root: str, prefix: str) -> None:
        self._root, self._cut = os.path.join(root, ""), len(prefix)
        self.doc_ids: list[str] = []
        self.stamps: list[tuple[int, int, int, int]] = []

    def __len__(self) -> int:
        return len(self.doc_ids)

    def add(self, cand: Candidate) -> None:
        self.doc_ids.append(cand.doc_id)
        self.stamps.append((cand.size, cand.mtime_ns, cand.ctime_ns, cand.ino))

    def candidate(self, i: int) -> Candidate:
        doc_id = self.doc_ids[i]
        return Candidate(self._root + doc_id[self._cut :], doc_id, *self.stamps[i])

    def without(self, skips: Mapping[str, tuple[tuple[int, int, int, int], str]]) -> tuple[Listing, dict[str, tuple[tuple[int, int, int, int], str]]]:
        """This listing less the files of ``skips`` whose stamp is the one recorded, and those entries."""
        keep = Listing.__new__(Listing)
        keep._root, keep._cut = self._root, self._cut
        keep.doc_ids, keep.stamps = [], []
        taken = {}
        for doc_id, stamp in zip(self.doc_ids, self.stamps):
            old = skips.get(doc_id)
            if old is not None and old[0] == stamp:
                taken[doc_id] = old
            else:
                keep.doc_ids.append(doc_id)
                keep.stamps.append(stamp)
        return keep, taken

    def candidates(self) -> list[Candidate]:
        """Every candidate, sorted by doc_id bytes (doc_ids are valid UTF-8, whose byte order is code point order)."""
        order = sorted(range(len(self.doc_ids)), key=self.doc_ids.__getitem__)
        return [self.candidate(i) for i in order]


def walk_folder(
    folder: Path, rules: WalkRules, skipped: list[tuple[str, str]], start: Path | None = None,
    warnings: list[str] | None = None, path_filter: PathFilter | None = None,
    unreadable: list[Path] | None = None,
) -> list[Candidate]:
    """Every document candidate under ``folder`` (absolute), sorted by doc_id bytes.

    ``start`` (a folder inside ``folder``) limits the walk to that subtree;
    doc_ids, patterns and the "inside the folder" rule for links stay those
    of ``folder``. Files passed over are appended to ``skipped`` as (path,
    reason); files and folders that exist but cannot be examined now
    (``unreadable_now``) are also appended to ``unreadable``, so a writer can
    keep what it had of them. ``warnings`` (a whole walk only) receives one
    line per ``--include``/``--exclude`` pattern that matched nothing. Raises
    ``UsageError`` for a pattern that is not one.
    """
    return walk_listing(folder, rules, skipped, start, warnings, path_filter, unreadable).candidates()


def walk_listing(
    folder: Path, rules: WalkRules, skipped: list[tuple[str, str]], start: Path | None = None,
    warnings: list[str] | None = None, path_filter: PathFilter | None = None,
    unreadable: list[Path] | None = None,
) -> Listing:
    """``walk_folder``'s candidates as columns, in walk order (a no-op sync of 100k files needs no more)."""
    skip_under = {os.path.realpath(p) for p in rules.skip_under}
    real_folder = os.path.realpath(folder)
    track = warnings is not None and start is None
    filt = rules.path_filter(folder, skipped, track=True) if track else path_filter or rules.path_filter(folder, skipped)
    start_rel = "" if start is None else os.path.relpath(start, folder).replace(os.sep, "/")
    if start_rel == ".":
        start_rel = ""
    # doc_ids are relative to the folder's parent: the folder's own name, then the path below it.
    top = doc_id_for(folder, folder)
    prefix = "" if top in (None, ".") else f"{top}/"
    out = Listing(str(folder), prefix)
    start_chain = filt.chain(start_rel)
    if start_chain is None:
        return out
    max_bytes = rules.max_bytes
    doc_ids, stamps = out.doc_ids, out.stamps
    is_reg = stat.S_ISREG
    join = os.path.join
    stack: list[tuple[str, str, Chain, bool]] = [(str(start or folder), start_rel, start_chain, False)]
    while stack:
        current, rel_dir, chain, load = stack.pop()
        if os.path.realpath(current) in skip_under:
            continue
        try:
            entries = _list_folder(current, not load)
        except OSError as e:
            skipped.append((current, f"cannot list folder: {e.strerror}"))
            if unreadable is not None and unreadable_now(e):
                unreadable.append(Path(current))
            continue
        try:
            if load:  # this folder's own ignore files, as its listing shows them
                chain = filt.enter(rel_dir, chain, [e.name for e in entries if e.name in IGNORE_FILES])
            # Where no --include/--exclude pattern applies, a test of the name (and this folder's ignore
            # levels) does, without a path string per file.
            name_test = filt.name_test(chain, rel_dir)
            # The doc_id of a file here is this plus its name; when it is UTF-8 without a line break, so is
            # the doc_id of every file here whose name is.
            dir_id = f"{prefix}{rel_dir}/" if rel_dir else prefix
            if os.sep != "/":
                dir_id = dir_id.replace(os.sep, "/")
            plain_dir = _utf8(dir_id) and not line_break_in(dir_id)
            todo: list[os.DirEntry[str]] = entries
            if name_test is not None and plain_dir:
                todo = _take_plain_files(entries, name_test, max_bytes, dir_id, doc_ids, stamps)
            for entry in todo:
                name = entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if filt.admits(rel_dir, chain, name, True):
                            if line_break_in(name):
                                skipped.append((join(current, name),
                                                LINE_BREAK_REASON.replace("file name", "folder name")))
                            else:
                                child = f"{rel_dir}/{name}" if rel_dir else name
                                stack.append((join(current, name), child, chain, True))
                        continue
                    is_link = entry.is_symlink()
                except OSError as e:
                    skipped.append((join(current, name), f"cannot stat: {e.strerror}"))
                    if unreadable is not None and unreadable_now(e):
                        unreadable.append(Path(join(current, name)))
                    continue
                if name_test is not None:
                    if not name_test(name):
                        continue
                elif not filt.admits(rel_dir, chain, name, False):
                    continue
                if not is_link and plain_dir:
                    # The common case, without a path, a Path or an object per file: a regular file within
                    # the size limit whose name is UTF-8 without a line break. Anything else takes
                    # `candidate`, which stats the path again and says why it is passed over.
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        st = None
                    if (st is not None and is_reg(st.st_mode) and st.st_size <= max_bytes
                            and "\n" not in name and "\r" not in name and (name.isascii() or _utf8(name))):
                        doc_ids.append(dir_id + name)
                        stamps.append((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
                        continue
                cand = candidate(folder, Path(join(current, name)), rules, skipped, real_folder, is_link,
                                 unreadable=unreadable)
                if cand is not None:
                    out.add(cand)
        finally:
            entries.close()
    if track and warnings is not None:  # (track implies warnings)
        warnings.extend(filt.unmatched())
    return out


def _take_plain_files(
    entries: list[os.DirEntry[str]], name_test: Callable[[str], object], max_bytes: int, dir_id: str,
    doc_ids: list[str], stamps: list[tuple[int, int, int, int]],
) -> list[os.DirEntry[str]]:
    """The usual folder in bulk: append every regular file whose name passes ``name_test`` to the columns
    and return the entries left for the per-entry loop (folders, links and the like).

    Bulk means a few list comprehensions, which cost less per file than one loop doing it all. Only
    when every one of those files is plain (a regular file within the size limit, its name UTF-8
    without a line break) and none vanished: otherwise nothing is appended and every entry is left
    to the loop, which says why a file is passed over (the stats already made are cached).
    """
    try:
        regular = [e.is_file(follow_symlinks=False) for e in entries]
        chosen = [e for e, r in zip(entries, regular) if r and name_test(e.name)]
        sts = [e.stat(follow_symlinks=False) for e in chosen]
    except OSError:
        return entries
    is_reg = stat.S_ISREG
    names = [e.name for e in chosen]
    if not (all([is_reg(st.st_mode) and st.st_size <= max_bytes for st in sts])
            and all([(n.isascii() or _utf8(n)) and "\n" not in n and "\r" not in n for n in names])):
        return entries
    doc_ids += [dir_id + n for n in names]
    stamps += [(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for st in sts]
    return [e for e, r in zip(entries, regular) if not r]


class _Entries(list[os.DirEntry[str]]):
    """A folder's entries, with the descriptor they were listed (and are stat-ed) through, if any."""

    fd = -1

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_SCANDIR_FD = os.scandir in os.supports_fd
# O_NONBLOCK: a folder swapped for a FIFO is refused (O_DIRECTORY) rather than waited on.
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def _list_folder(path: str, top: bool) -> _Entries:
    """The entries of the folder ``path``, listed through a descriptor of it where the system can.

    Each entry is then stat-ed by its name within that descriptor (no path to resolve again per file),
    and a folder swapped for a symbolic link since its parent was listed is refused (``O_NOFOLLOW``;
    ``top``, the folder the walk starts at, may be reached through a link).
    """
    if not _SCANDIR_FD:
        return _Entries(os.scandir(path))
    fd = os.open(path, _DIR_FLAGS | (0 if top else getattr(os, "O_NOFOLLOW", 0)))
    try:
        with os.scandir(fd) as it:
            out = _Entries(it)
    except BaseException:
        os.close(fd)
        raise
    out.fd = fd
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
    return Candidate(str(path), doc_id, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def filter_paths(paths: Iterable[Path], folder: Path) -> list[Path]:
    """The given paths that lie inside ``folder`` (absolute)."""
    real_folder = os.path.abspath(folder)
    out = []
    for p in paths:
        ap = os.path.abspath(p)
        if os.path.commonpath([ap, real_folder]) == real_folder:
            out.append(Path(ap))
    return out
