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

pathspec reads the gitignore syntax (escapes, anchoring, ``**``, trailing
blanks, negation) into one regular expression per line. pathspec's own
matcher is built for flat lists of paths: a pattern also matches every path
below a folder it matches, with priorities to imitate git. The walk is not
flat: it asks about each folder before entering it, exactly as git does. So
here a line counts only where it matches the path itself, and the last such
line decides (git's rule, and what a comparison with ``git ls-files`` checks).
All the lines of one source run as one RE2 set: RE2 runs in time linear in
the path whatever the pattern, where Python's ``re`` backtracks (a hostile
``.gitignore`` line ``*a*a*a*a*b`` beside a name of 250 ``a`` takes 14 s per
name there, ``a/**/a/**/a/**/a/**/b`` against a deep path minutes).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ragtui.core.errors import UsageError
from ragtui.core.files import read_file

__all__ = [
    "IGNORE_FILES",
    "IGNORE_FILE_MAX_BYTES",
    "IgnoreLevel",
    "PathFilter",
    "PatternSet",
    "Rules",
    "check_patterns",
]



class Rules(Protocol):
    """What a ``PathFilter`` needs of the walk's rules (``walk.WalkRules`` is the one implementation)."""

    @property
    def include(self) -> Sequence[str]: ...
    @property
    def exclude(self) -> Sequence[str]: ...
    @property
    def ignore_files(self) -> bool: ...
    @property
    def skip_under(self) -> Sequence[Path]: ...
    @property
    def default_include(self) -> bool: ...
    def skips_name(self, name: str, /) -> bool: ...
    def wants_name(self, name: str, /) -> bool: ...
    def doc_name_test(self) -> Callable[[str], object]: ...


IGNORE_FILES = (".gitignore", ".ignore")
"""Read in this order in each folder: a line of ``.ignore`` overrides one of ``.gitignore`` (as in ripgrep)."""

IGNORE_FILE_MAX_BYTES = 256 * 1024
"""An ignore file larger than this is not applied (and reported): its patterns would cost every path."""

IGNORE_FILE_MAX_PATTERNS = 5000
"""Nor is one with more patterns (RE2's 8 MiB budget holds about that many; compiling them takes ~0.5 s)."""

# The two forms pathspec gives a pattern's end: "this, or a folder of this name" and "a folder".
_DIR_MARK_OPT = "(?:(?P<ps_d>/)|$)"
_DIR_MARK = "(?P<ps_d>/)"


class BadPattern(ValueError):
    """A line that is not a gitignore pattern (``.line``: its 0-based index)."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class TooComplex(ValueError):
    """RE2 could not compile the set within its memory budget."""


def _re2() -> Any:  # google-re2 ships no type information
    try:
        import re2
    except ModuleNotFoundError:
        raise UsageError(
            "matching --include/--exclude patterns and .gitignore files needs google-re2: pip install google-re2"
        ) from None
    return re2


def _regex(line: str) -> tuple[str | None, bool | None]:
    """pathspec's (regex, include) for one line; (None, None) for a line that is no pattern."""
    from pathspec.patterns.gitignore import GitIgnorePatternError
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    try:
        # Annotated here: mypy loses pathspec's own annotation to its @override shim on Python 3.11.
        pair: tuple[str | None, bool | None] = GitIgnoreSpecPattern.pattern_to_regex(line)
        return pair
    except GitIgnorePatternError:
        raise BadPattern(0) from None


def _at_itself(regex: str, line: str) -> str:
    """``regex`` rewritten to match a path only where the line matches that path itself.

    pathspec ends a pattern with an optional folder mark that lets it match
    everything below; here the mark must be the path's last character (the
    walk writes folders with a trailing ``/``). ``a/**/`` is pathspec's
    ``^a`` plus the mark, but means "the folders inside a" (as git reads it).
    """
    if regex.endswith(_DIR_MARK_OPT):
        return regex[: -len(_DIR_MARK_OPT)] + "/?$"
    if regex.endswith(_DIR_MARK):
        body = regex[: -len(_DIR_MARK)]
        # "x/**/": folders inside x, not x; a line of only ** ("/**/", "**/**/"): every folder.
        return body + ("/.+/$" if body and line.rstrip().endswith("/**/") else "/$")
    if "ps_d" in regex:  # a form this module does not know: keep pathspec's own reading
        return regex.replace(_DIR_MARK, "/")
    if regex.endswith("/"):
        return regex + "."  # a/** is what is inside a: not a itself, which the walk writes "a/"
    return regex  # ** and the like: everything


class PatternSet:
    """Compiled gitignore lines: for one path, whether the last line matching it excludes (True) or re-includes.

    ``below``: a line matching a folder also matches everything in it (for
    ``--include``, which picks files: ``docs/`` then means every file under
    docs). Otherwise a line matches only the path itself (excludes and
    ignore files, which the walk asks about folder by folder). Raises
    ``BadPattern`` for a line that is not a pattern (unless ``bad`` is a
    list: the line's index is appended there and the line left out) and
    ``TooComplex`` when RE2 cannot compile them all.
    """

    def __init__(self, lines: Sequence[str], *, below: bool = False, bad: list[int] | None = None) -> None:
        re2 = _re2()
        options = re2.Options()
        options.log_errors = False
        options.never_capture = True
        self._set = re2.Set.SearchSet(options)
        self._include: list[bool] = []
        self.lines: list[str] = []
        for n, line in enumerate(lines):
            try:
                regex, include = _regex(line)
                if regex is None or include is None:
                    continue
                regex = regex.replace(_DIR_MARK, "/") if below else _at_itself(regex, line)
                try:
                    self._set.Add(regex)
                except Exception:  # noqa: BLE001 - a regex RE2 refuses: the line cannot be matched as written
                    raise BadPattern(n) from None
            except BadPattern:
                if bad is None:
                    raise BadPattern(n) from None
                bad.append(n)
                continue
            self._include.append(include)
            self.lines.append(line)
        if self._include:
            try:
                self._set.Compile()
            except Exception:  # noqa: BLE001 - RE2's memory budget (8 MiB) for one set
                raise TooComplex() from None

    def __len__(self) -> int:
        return len(self._include)

    def decide(self, key: str) -> bool | None:
        """True: excluded; False: re-included (``!``); None: no line matches ``key``."""
        if not self._include:
            return None
        hits = self._set.Match(key)
        return self._include[max(hits)] if hits else None


Chain = tuple["IgnoreLevel", ...]
"""The ignore files that apply inside one folder, shallowest first."""


@dataclass(frozen=True)
class IgnoreLevel:
    """The compiled ignore files of one folder: ``base`` is that folder's path plus ``/`` ("" for the root)."""

    base: str
    patterns: PatternSet


def _key(path: str) -> str:
    """``path`` as the matcher sees it.

    A name's newline is matched as an ordinary character (a pattern, being
    one line, can never contain one, and ``.`` in the compiled regex would
    not cross it); a name that is not UTF-8 has its bad bytes replaced.
    """
    if path.isascii() and "\n" not in path:
        return path  # the common case: nothing to replace, and ASCII is UTF-8
    if "\n" in path:
        path = path.replace("\n", "\0")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        path = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return path


def check_patterns(patterns: Sequence[str], flag: str) -> PatternSet | None:
    """Compile the patterns of one flag; ``UsageError`` (one line) for one that is not a pattern.

    Returns the compiled set (``--include`` lines also match what is below
    a folder they match), or None for no patterns. A pattern that gitignore
    syntax reads as nothing (a comment ``#…``, a lone ``/``, an unclosed
    ``[``, blanks) is refused rather than silently matching nothing: on a
    command line it is a typo.
    """
    if not patterns:
        return None
    below = flag == "--include"
    for p in patterns:
        if "\n" in p or "\r" in p or "\0" in p:
            raise UsageError(f"{flag} {p!r}: a pattern is one line (no line breaks or NUL)")
        try:
            one = PatternSet([p], below=below)
        except BadPattern:
            raise UsageError(
                f"{flag} {p!r} is not a valid gitignore-style pattern (a trailing backslash, or a lone '!'?)"
            ) from None
        except TooComplex:
            raise UsageError(f"{flag} {p!r} is too complex to match") from None
        if not len(one):
            raise UsageError(
                f"{flag} {p!r} matches nothing in gitignore syntax (a comment, a lone '/', an unclosed '[' "
                "or blanks); write \\# for a leading #"
            )
    try:
        return PatternSet(patterns, below=below)
    except TooComplex:
        raise UsageError(f"the {flag} patterns are too many or too complex to match together") from None


def _load_level(
    folder: str, real_folder: str, rel_dir: str, skipped: list[tuple[str, str]] | None, present: Sequence[str] | None = None
) -> IgnoreLevel | None:
    """The ignore files of the folder ``rel_dir`` compiled into one level, or None when it has none.

    ``present``: the ignore file names the folder's listing holds (None: look).
    Read like documents: only regular files inside the folder, without
    blocking on a FIFO, at most ``IGNORE_FILE_MAX_BYTES``. Lines that are
    not patterns are left out (as git does) and reported; an unreadable,
    oversized or too complex file is reported and not applied.
    """
    lines: list[str] = []
    compiled: list[PatternSet] = []
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
        n_patterns = sum(1 for line in file_lines if line.strip() and not line.startswith("#"))
        if n_patterns > IGNORE_FILE_MAX_PATTERNS:
            _report(skipped, path, f"ignore file not applied: more than {IGNORE_FILE_MAX_PATTERNS:,} patterns")
            continue
        bad: list[int] = []
        try:
            compiled.append(PatternSet(file_lines, bad=bad))
        except TooComplex:
            _report(skipped, path, "ignore file not applied: too many or too complex patterns")
            continue
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            _report(skipped, path, f"line {bad[0] + 1}{more} of this ignore file is not a pattern: left out")
            dropped = set(bad)
            file_lines = [line for n, line in enumerate(file_lines) if n not in dropped]
        lines.extend(file_lines)
    if not lines:
        return None
    try:
        patterns = compiled[0] if len(compiled) == 1 else PatternSet(lines)
    except TooComplex:  # each file fitted, the two together do not
        _report(skipped, where, "ignore files not applied: too many or too complex patterns")
        return None
    if not len(patterns):
        return None
    return IgnoreLevel(f"{rel_dir}/" if rel_dir else "", patterns)


def _report(skipped: list[tuple[str, str]] | None, path: str, reason: str) -> None:
    if skipped is not None:
        skipped.append((os.fsencode(path).decode("utf-8", "replace"), reason))


class PathFilter:
    """The walk's rules applied to paths relative to one folder (see the module docstring).

    ``rules`` is a ``walk.WalkRules`` (the ``Rules`` protocol). ``skipped`` receives the ignore files that
    could not be applied. With ``track``, every path the filter is asked
    about is also matched against each ``--include``/``--exclude`` pattern
    that has matched nothing yet; ``unmatched()`` then lists the patterns
    that never matched. Thread-safe: the watch agent asks from watchdog's
    threads.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        rules: Rules,
        skipped: list[tuple[str, str]] | None = None,
        *,
        track: bool = False,
    ) -> None:
        self.folder = os.path.abspath(folder)
        self.real_folder = os.path.realpath(folder)
        self.rules = rules
        self.skipped = skipped
        self._skips_name: Callable[[str], bool] = rules.skips_name
        self._exclude = check_patterns(tuple(rules.exclude), "--exclude")
        self._include = None if rules.default_include else check_patterns(tuple(rules.include), "--include")
        self._wants_name = rules.wants_name
        self._doc_name_test = rules.doc_name_test()
        self._ignore_files = rules.ignore_files
        self._lock = threading.Lock()
        self._chains: dict[str, Chain | None] = {}
        self._unmatched: list[tuple[str, str, PatternSet]] = []
        if track:
            for flag, patterns in (("--include", () if rules.default_include else rules.include),
                                   ("--exclude", rules.exclude)):
                for p in dict.fromkeys(patterns):
                    self._unmatched.append((flag, p, PatternSet([p], below=flag == "--include")))

    # -- one entry of a folder the walk entered --------------------------------------------------

    def admits(self, parent: str, chain: Chain, name: str, is_dir: bool) -> bool:
        """Whether the walk enters (folder) or takes as a document (file) ``name`` inside ``parent``.

        ``parent`` is the folder's relative path ("" for the root) and
        ``chain`` its ignore levels (``enter`` or ``chain``).
        """
        if not (self._unmatched or chain or self._exclude is not None or self._include is not None or is_dir):
            # Nothing here matches on the path (the usual file of a walk without patterns or ignore
            # files): only the name decides, and the path key is not built.
            return not self._skips_name(name) and bool(self._wants_name(name))
        rel = f"{parent}/{name}" if parent else name
        key = _key(rel + "/" if is_dir else rel)
        if self._unmatched:
            self._track(key)
        if self._skips_name(name):
            return False
        if self._exclude is not None and self._exclude.decide(key):
            return False
        for level in reversed(chain):
            ignored = level.patterns.decide(key[len(level.base):])
            if ignored is not None:
                if ignored:
                    return False
                break
        if is_dir:
            return True
        if self._include is None:
            return self._wants_name(name)
        return bool(self._include.decide(key))

    def name_test(self, chain: Chain, rel_dir: str) -> Callable[[str], object] | None:
        """For the files of the folder ``rel_dir`` whose ignore levels are ``chain``: a test of a file's name,
        true exactly when ``admits`` would admit it; None when ``admits`` must be asked (``--include`` or
        ``--exclude`` patterns, or tracking which of them match).

        Without ignore files on the way the name alone decides (one regex match). With them, a name
        the defaults refuse is out whatever they say (they can only leave files out), so they are asked
        only about the others, each level with this folder's part of the path worked out once.
        """
        if self._unmatched or self._exclude is not None or self._include is not None:
            return None
        doc_name = self._doc_name_test
        if not chain:
            return doc_name
        here = _key(f"{rel_dir}/") if rel_dir else ""
        levels = [(here[len(level.base):], level.patterns.decide) for level in reversed(chain)]

        def test(name: str) -> bool:
            if not doc_name(name):
                return False
            key = name if name.isascii() and "\n" not in name else _key(name)
            for tail, decide in levels:
                ignored = decide(tail + key)
                if ignored is not None:
                    return not ignored
            return True

        return test

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
        still = [u for u in self._unmatched if u[2].decide(key) is None]
        if len(still) != len(self._unmatched):
            self._unmatched = still

    def unmatched(self) -> list[str]:
        """One warning per ``--include``/``--exclude`` pattern that matched no path the filter saw."""
        shown = self.folder
        return [f"{flag} {p!r} matches nothing in {shown}" for flag, p, _ in self._unmatched]
