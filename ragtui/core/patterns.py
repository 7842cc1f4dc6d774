"""Which paths of a folder the walk leaves out: gitignore-style patterns and the folder's ignore files.

Paths here are relative to the ingested folder, with ``/`` separators, a
folder written with a trailing ``/`` (``docs/drafts/``) so that directory
patterns (``build/``) match it. Three sources decide, in this order:

1. the always-skipped names (``WalkRules.skips_name``: hidden names,
   ``.git``, ``node_modules``, editor swap files), which nothing re-includes;
2. ``--exclude`` patterns (gitignore syntax, relative to the folder);
3. the folder's ignore files (``.gitignore``, then ``.ignore``, in every
   folder the walk enters): each applies to its own folder's subtree, a
   deeper file overrides a shallower one, a later line overrides an earlier
   one, and ``!pattern`` re-includes;

and then a file is a document when an ``--include`` pattern (or, by
default, a text-like name) matches it. A folder left out is never entered,
so nothing below it can be re-included (git's rule).

Matching is pathspec's ``GitIgnoreSpec`` on the RE2 backend: RE2 runs in
time linear in the path, whatever the pattern. Python's ``re`` backtracks,
and a hostile ``.gitignore`` beside hostile names (``*a*a*a*a*b`` against
``aaa…``) would take minutes per file there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragtui.core.errors import UsageError

__all__ = [
    "IGNORE_FILES",
    "IGNORE_FILE_MAX_BYTES",
    "IgnoreLevel",
    "PathFilter",
    "check_patterns",
]

IGNORE_FILES = (".gitignore", ".ignore")
"""Read in this order in each folder: a line of ``.ignore`` overrides one of ``.gitignore`` (as in ripgrep)."""

IGNORE_FILE_MAX_BYTES = 256 * 1024
"""An ignore file larger than this is not applied (and reported): its patterns would cost every path."""

Chain = tuple["IgnoreLevel", ...]
"""The ignore files that apply inside one folder, shallowest first."""


@dataclass(frozen=True)
class IgnoreLevel:
    """The compiled ignore files of one folder: ``base`` is that folder's path plus ``/`` ("" for the root)."""

    base: str
    spec: object  # pathspec.GitIgnoreSpec


def _spec(lines: Sequence[str]):
    """A GitIgnoreSpec on the RE2 backend (raises GitIgnorePatternError, or RE2's error when too large)."""
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(list(lines), backend="re2")
    except ModuleNotFoundError as e:
        if e.name != "re2":
            raise
        raise UsageError(
            "matching --include/--exclude patterns and .gitignore files needs google-re2: pip install google-re2"
        ) from None


def _pattern_error():
    from pathspec.patterns.gitignore import GitIgnorePatternError

    return GitIgnorePatternError


def _key(path: str) -> str:
    """``path`` as the matcher sees it.

    A name's newline is matched as an ordinary character (a pattern, being
    one line, can never contain one, and ``.`` in the compiled regex would
    not cross it); a name that is not UTF-8 has its bad bytes replaced.
    """
    if "\n" in path:
        path = path.replace("\n", "\0")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        path = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return path


def check_patterns(patterns: Sequence[str], flag: str):
    """Compile the patterns of one flag; ``UsageError`` (one line) for one that is not a pattern.

    Returns the compiled spec, or None for no patterns. A pattern that
    gitignore syntax would read as nothing (a comment ``#…``, a lone ``/``,
    an unclosed ``[``, blanks) is refused rather than silently matching
    nothing: on a command line it is a typo.
    """
    if not patterns:
        return None
    bad = _pattern_error()
    for p in patterns:
        if "\n" in p or "\r" in p or "\0" in p:
            raise UsageError(f"{flag} {p!r}: a pattern is one line (no line breaks or NUL)")
        try:
            compiled = _spec([p]).patterns
        except bad:
            raise UsageError(
                f"{flag} {p!r} is not a valid gitignore-style pattern (a trailing backslash, or a lone '!'?)"
            ) from None
        except UsageError:
            raise
        except Exception:  # noqa: BLE001 - RE2 refused it (too large): still the user's pattern
            raise UsageError(f"{flag} {p!r} is too complex to match") from None
        if not compiled or compiled[0].include is None:
            raise UsageError(
                f"{flag} {p!r} matches nothing in gitignore syntax (a comment, a lone '/', an unclosed '[' "
                "or blanks); write \\# for a leading #"
            )
    try:
        return _spec(patterns)
    except Exception:  # noqa: BLE001 - RE2's memory budget for one set of patterns
        raise UsageError(f"the {flag} patterns are too many or too complex to match together") from None


def _load_level(
    folder: str, real_folder: str, rel_dir: str, skipped: list | None, present: Sequence[str] | None = None
) -> IgnoreLevel | None:
    """The ignore files of the folder ``rel_dir`` compiled into one level, or None when it has none.

    ``present``: the ignore file names the folder's listing holds (None: look).

    Read like documents: only regular files inside the folder, without
    blocking on a FIFO, at most ``IGNORE_FILE_MAX_BYTES``. Lines that are
    not patterns are left out (as git does) and reported; an unreadable,
    oversized or too complex file is reported and not applied.
    """
    from ragtui.core.walk import read_file

    lines: list[str] = []
    where = os.path.join(folder, rel_dir) if rel_dir else folder
    for name in IGNORE_FILES:
        if present is not None and name not in present:
            continue
        path = os.path.join(where, name)
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            _report(skipped, path, f"ignore file not applied: cannot stat: {e.strerror}")
            continue
        try:
            data = read_file(Path(path), IGNORE_FILE_MAX_BYTES, inside=real_folder)
        except OSError as e:
            why = e.strerror or str(e)
            if "limit" in why:
                why = f"larger than {IGNORE_FILE_MAX_BYTES:,} bytes"
            _report(skipped, path, f"ignore file not applied: {why}")
            continue
        text = data.decode("utf-8", "replace")
        if text.startswith("\ufeff"):
            text = text[1:]
        file_lines = text.split("\n")
        try:
            _spec(file_lines)
        except _pattern_error():
            file_lines = _valid_lines(file_lines, path, skipped)
        except UsageError:
            raise
        except Exception:  # noqa: BLE001 - RE2's memory budget
            _report(skipped, path, "ignore file not applied: too many or too complex patterns")
            continue
        lines.extend(file_lines)
    if not lines:
        return None
    try:
        spec = _spec(lines)
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - each file fitted, the two together do not
        _report(skipped, where, "ignore files not applied: too many or too complex patterns")
        return None
    if not len(spec):
        return None
    return IgnoreLevel(f"{rel_dir}/" if rel_dir else "", spec)


def _valid_lines(lines: list[str], path: str, skipped: list | None) -> list[str]:
    bad = _pattern_error()
    out, dropped = [], []
    for n, line in enumerate(lines, 1):
        try:
            _spec([line])
        except bad:
            dropped.append(n)
            continue
        out.append(line)
    if dropped:
        more = f" (and {len(dropped) - 1} more)" if len(dropped) > 1 else ""
        _report(skipped, path, f"line {dropped[0]}{more} of this ignore file is not a pattern: left out")
    return out


def _report(skipped: list | None, path: str, reason: str) -> None:
    if skipped is not None:
        skipped.append((os.fsencode(path).decode("utf-8", "replace"), reason))


class PathFilter:
    """The walk's rules applied to paths relative to one folder (see the module docstring).

    ``rules`` is a ``WalkRules``. ``skipped`` receives the ignore files that
    could not be applied. With ``track``, every path the filter is asked
    about is also matched against each ``--include``/``--exclude`` pattern
    that has matched nothing yet; ``unmatched()`` then lists the patterns
    that never matched. Thread-safe: the watch agent asks from watchdog's
    threads.
    """

    def __init__(self, folder: str | os.PathLike, rules, skipped: list | None = None, *, track: bool = False) -> None:
        self.folder = os.path.abspath(folder)
        self.real_folder = os.path.realpath(folder)
        self.rules = rules
        self.skipped = skipped
        self._skips_name: Callable[[str], bool] = rules.skips_name
        self._exclude = check_patterns(tuple(rules.exclude), "--exclude")
        self._include = None if rules.default_include else check_patterns(tuple(rules.include), "--include")
        self._wants_name = rules.wants_name
        self._ignore_files = rules.ignore_files
        self._lock = threading.Lock()
        self._chains: dict[str, Chain | None] = {}
        self._unmatched: list[tuple[str, str, object]] = []
        if track:
            for flag, patterns in (("--include", () if rules.default_include else rules.include),
                                   ("--exclude", rules.exclude)):
                for p in dict.fromkeys(patterns):
                    self._unmatched.append((flag, p, _spec([p])))

    # -- one entry of a folder the walk entered --------------------------------------------------

    def admits(self, parent: str, chain: Chain, name: str, is_dir: bool) -> bool:
        """Whether the walk enters (folder) or takes as a document (file) ``name`` inside ``parent``.

        ``parent`` is the folder's relative path ("" for the root) and
        ``chain`` its ignore levels (``enter`` or ``chain``).
        """
        rel = f"{parent}/{name}" if parent else name
        key = _key(rel + "/" if is_dir else rel)
        if self._unmatched:
            self._track(key)
        if self._skips_name(name):
            return False
        if self._exclude is not None and self._exclude.check_file(key).include:
            return False
        for level in reversed(chain):
            ignored = level.spec.check_file(key[len(level.base):]).include
            if ignored is not None:
                if ignored:
                    return False
                break
        if is_dir:
            return True
        if self._include is None:
            return self._wants_name(name)
        return bool(self._include.check_file(key).include)

    def enter(self, rel_dir: str, parent_chain: Chain, present: Sequence[str] | None = None) -> Chain:
        """The chain inside ``rel_dir`` (a folder ``admits`` let in): its parent's plus its own ignore files.

        ``present``: the ignore file names in the folder's listing, when the caller has listed it.
        """
        if not self._ignore_files or present == []:
            return parent_chain
        level = _load_level(self.folder, self.real_folder, rel_dir, self.skipped, present)
        return parent_chain + (level,) if level is not None else parent_chain

    # -- any path, its folders checked on the way (the watch agent, partial syncs) ---------------

    def chain(self, rel_dir: str) -> Chain | None:
        """The ignore levels inside folder ``rel_dir``, or None when the walk never enters it.

        Every folder on the way from the root is checked (and its ignore
        files read once, then remembered until ``invalidate``).
        """
        with self._lock:
            if rel_dir in self._chains:
                return self._chains[rel_dir]
            parts = rel_dir.split("/") if rel_dir else []
            # The deepest folder on the way already known.
            i = len(parts)
            while i > 0 and "/".join(parts[:i]) not in self._chains:
                i -= 1
            here = "/".join(parts[:i])
            if here in self._chains:
                chain = self._chains[here]
            else:
                chain = self._chains[""] = self.enter("", ())
            for part in parts[i:]:
                if chain is None:
                    break
                child = f"{here}/{part}" if here else part
                chain = self.enter(child, chain) if self.admits(here, chain, part, True) else None
                self._chains[child] = chain
                here = child
            return chain

    def wants(self, rel_path: str, is_dir: bool = False) -> bool:
        """Whether ``rel_path`` is a document (file) or a folder the walk enters, its folders included."""
        if not rel_path:
            return is_dir
        parent, _, name = rel_path.rpartition("/")
        chain = self.chain(parent)
        if chain is None:
            return False
        return self.chain(rel_path) is not None if is_dir else self.admits(parent, chain, name, False)

    def invalidate(self) -> None:
        """Forget every folder's ignore files and decisions (an ignore file or a folder changed)."""
        with self._lock:
            self._chains.clear()

    # -- patterns that matched nothing ------------------------------------------------------------

    def _track(self, key: str) -> None:
        still = [u for u in self._unmatched if u[2].check_file(key).include is None]
        if len(still) != len(self._unmatched):
            self._unmatched = still

    def unmatched(self) -> list[str]:
        """One warning per ``--include``/``--exclude`` pattern that matched no path the filter saw."""
        shown = self.folder
        return [f"{flag} {p!r} matches nothing in {shown}" for flag, p, _ in self._unmatched]
