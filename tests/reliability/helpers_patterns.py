"""Cases for which-files-are-documents: gitignore patterns and ignore files (spec/patterns.md).

``run_gitignore_vs_git``      random trees with random nested .gitignore files: the walk takes
                              exactly the files ``git ls-files --others --exclude-standard`` lists.
``run_watch_agrees_with_walk`` the same random trees: the watch agent's event filter (``Scope``)
                              and a partial sync's filter say "document" for exactly the files
                              the walk takes, and "entered" for exactly the folders it enters.
``run_hostile_ignore_files``  ignore files an attacker wrote (patterns that make a backtracking
                              matcher run for hours, huge, binary, FIFO, links out, unreadable,
                              too many patterns): each walk finishes, reports what it did not
                              apply, and takes the expected files.
``run_flag_patterns_fuzz``    random --include/--exclude strings: compiled, or one UsageError line;
                              never another exception (a few through the CLI: exit 0 or 2).
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from ragtui.core.errors import UsageError
from ragtui.core.ingest.patterns import IGNORE_FILE_MAX_BYTES, check_patterns
from ragtui.core.ingest.walk import WalkRules, walk_folder
from ragtui.watch.events import Scope
from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run
from tests.reliability.cases import Case
from tests.reliability.helpers import write

DIRS = ("a", "b", "c", "src", "tmp")
FILES = ("x.md", "y.txt", "z.log", "a.md", "b", "#a", "a b")
SEGMENTS = ("a", "b", "c", "src", "tmp", "*", "**", "*.md", "*.log", "x.md", "?.txt", "[ab]", "[!a]*", "b*", "*c",
            "\\#a", "a\\ b", "a b", "x.md  ", "[a-c]*", "*.*", "**/**")


def random_tree(rng: random.Random, folder: Path) -> list[str]:
    """Files in folders up to three deep, and .gitignore files in some folders; returns the files' paths."""
    files = []
    for _ in range(rng.randint(4, 25)):
        parts = [rng.choice(DIRS) for _ in range(rng.randint(0, 3))]
        rel = "/".join([*parts, rng.choice(FILES)])
        # A name cannot be both a folder and a file.
        if any(rel.startswith(f + "/") or f.startswith(rel + "/") for f in files):
            continue
        write(folder / rel, f"{rel}\n")
        files.append(rel)
    folders = {""} | {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    for d in sorted(folders):
        if rng.random() < 0.5:
            lines = [random_pattern(rng) for _ in range(rng.randint(1, 5))]
            write(folder / d / ".gitignore", "\n".join(lines) + "\n")
    return files


def random_pattern(rng: random.Random) -> str:
    segs = [rng.choice(SEGMENTS) for _ in range(rng.randint(1, 3))]
    p = "/".join(segs)
    if rng.random() < 0.25:
        p = "/" + p
    if rng.random() < 0.25:
        p += "/"
    if rng.random() < 0.3:
        p = "!" + p
    if rng.random() < 0.05:
        p = "# " + p
    return p


def _walk(folder: Path, rules: WalkRules) -> set[str]:
    return {os.path.relpath(c.path, folder) for c in walk_folder(folder, rules, [])}


def git_untracked(folder: Path, home: Path) -> set[str]:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(folder)], check=True, env=env)
    try:
        out = subprocess.run(["git", "-C", str(folder), "ls-files", "--others", "--exclude-standard", "-z"],
                             capture_output=True, check=True, env=env).stdout
    finally:
        shutil.rmtree(folder / ".git")
    return {p for p in out.decode().split("\0") if p and not p.rsplit("/", 1)[-1].startswith(".")}


PATTERN_CASES = {"ci": 80, "full": 1000}


def gitignore_cases(size: str = "ci", seed: int = 16) -> list[Case]:
    """Random trees with random ignore files: the walk takes exactly what ``git`` leaves untracked."""
    return [Case(f"tree-{i}", functools.partial(check_gitignore, seed, i)) for i in range(PATTERN_CASES[size])]


def check_gitignore(seed: int, i: int, base: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    folder = base / "docs"
    random_tree(random.Random(f"{seed}-{i}"), folder)
    by_git = git_untracked(folder, base)
    ours = _walk(folder, WalkRules(include=("*",)))
    assert ours == by_git, f"only ours {sorted(ours - by_git)}, only git {sorted(by_git - ours)}"


def watch_agrees_cases(size: str = "ci", seed: int = 61) -> list[Case]:
    """Random trees and patterns: the watch's scope and a partial sync's filter agree with the walk."""
    return [Case(f"tree-{i}", functools.partial(check_watch_agrees, seed, i)) for i in range(PATTERN_CASES[size])]


def check_watch_agrees(seed: int, i: int, base: Path) -> None:
    rng = random.Random(f"{seed}-{i}")
    folder = base / "docs"
    files = random_tree(rng, folder)
    exclude = tuple(p for p in (random_pattern(rng) for _ in range(rng.randint(0, 2))) if not p.startswith("#"))
    rules = WalkRules(include=("*",) if rng.random() < 0.5 else WalkRules().include, exclude=exclude)
    taken = _walk(folder, rules)
    scope = Scope(folder, rules)
    filt = rules.path_filter(folder)  # what a partial sync asks
    for rel in files:
        want = rel in taken
        assert scope.matters(str(folder / rel), False) == want, f"scope on {rel}: {not want}"
        assert filt.wants(rel) == want, f"partial sync on {rel}: {not want}"
    folders = {"/".join(f.split("/")[:k]) for f in files for k in range(1, f.count("/") + 1)}
    for d in folders:
        entered = any(t.startswith(d + "/") for t in taken)
        if entered:  # a folder holding a taken file must be one the watch enters
            assert scope.matters(str(folder / d), True), f"scope does not enter {d}"


def _hostile_cases(base: Path):
    """(name, build(folder) -> (rules, expected documents, expected skipped reasons by relative path))."""

    def redos(f):
        write(f / ("a" * 250 + ".txt"), "long\n")
        write(f.joinpath(*["a"] * 300, "q.md"), "deep\n")
        write(f / ".gitignore", "*a*a*a*a*a*a*a*a*a*a*b\n" + "a/**/a/**/a/**/a/**/a/**/a/**/b\n" * 3)
        return WalkRules(), {"a" * 250 + ".txt", "/".join(["a"] * 300) + "/q.md"}, {}

    def huge(f):
        write(f / "a.md", "a\n")
        write(f / ".gitignore", "a.md\n" + "x\n" * IGNORE_FILE_MAX_BYTES)
        return WalkRules(), {"a.md"}, {".gitignore": f"ignore file not applied: larger than {IGNORE_FILE_MAX_BYTES:,} bytes"}

    def too_many(f):
        write(f / "a.md", "a\n")
        write(f / ".gitignore", "a.md\n" + "".join(f"*{i}*x*y*z\n" for i in range(20000)))
        return WalkRules(), {"a.md"}, {".gitignore": "ignore file not applied: more than 5,000 patterns"}

    def complex_patterns(f):  # under the count limit, over RE2's memory budget
        write(f / "a.md", "a\n")
        write(f / ".gitignore", "a.md\n" + "".join(f"*{i}*x*y*z*{i}\n" for i in range(4000)))
        return WalkRules(), {"a.md"}, {".gitignore": "ignore file not applied: too many or too complex patterns"}

    def binary(f):
        write(f / "a.md", "a\n")
        write(f / "b.md", "b\n")
        write(f / ".gitignore", b"\x00\xff\xfe garbage \x1b[2J\nb.md\r\n\xc3(\n")
        return WalkRules(), {"a.md"}, {}

    def fifo(f):
        write(f / "a.md", "a\n")
        os.mkfifo(f / ".gitignore")
        return WalkRules(), {"a.md"}, {".gitignore": "ignore file not applied: is a FIFO, not a regular file (never opened)"}

    def link_out(f):
        write(f.parent / "outside", "a.md\n")
        write(f / "a.md", "a\n")
        os.symlink(f.parent / "outside", f / ".ignore")
        return WalkRules(), {"a.md"}, {".ignore": "ignore file not applied: resolves outside the folder (not followed)"}

    def link_loop(f):
        write(f / "a.md", "a\n")
        os.symlink(".gitignore", f / ".gitignore")
        return WalkRules(), {"a.md"}, {".gitignore": "ignore file not applied: is a symbolic link (not followed)"}

    def folder_named_gitignore(f):
        write(f / "a.md", "a\n")
        write(f / ".gitignore" / "inner.md", "a hidden folder: never read as patterns\n")
        return WalkRules(), {"a.md"}, {".gitignore": "ignore file not applied: is a directory, not a regular file (never opened)"}

    def unreadable(f):
        write(f / "a.md", "a\n")
        write(f / ".gitignore", "a.md\n")
        os.chmod(f / ".gitignore", 0)
        if os.access(f / ".gitignore", os.R_OK):  # root reads anything: the file then applies
            return WalkRules(), set(), {}
        return WalkRules(), {"a.md"}, {".gitignore": "ignore file not applied: Permission denied"}

    def bad_lines(f):
        write(f / "a.md", "a\n")
        write(f / "b.md", "b\n")
        write(f / ".gitignore", "!\nfoo\\\nb.md\n")
        return WalkRules(), {"a.md"}, {".gitignore": "line 1 (and 1 more) of this ignore file is not a pattern: left out"}

    def deep_nesting(f):
        d = f
        for k in range(60):
            d = d / f"d{k}"
            write(d / ".gitignore", f"!keep{k}.md\n*.md\n!keep{k}.md\n")
            write(d / f"keep{k}.md", "kept\n")
            write(d / "drop.md", "dropped\n")
        rel = "/".join(f"d{k}" for k in range(60))
        return WalkRules(), {"/".join(rel.split("/")[: k + 1]) + f"/keep{k}.md" for k in range(60)}, {}

    def crlf_names(f):
        write(f / "a\r.md", "cr\n")
        write(f / "b\n.md", "lf\n")
        write(f / "c.md", "c\n")
        write(f / ".gitignore", "a*\r\nb*\r\n")  # a CRLF ignore file: the CR is not part of the pattern
        return WalkRules(), {"c.md"}, {}

    return [redos, huge, too_many, complex_patterns, binary, fifo, link_out, link_loop, folder_named_gitignore, unreadable,
            bad_lines, deep_nesting, crlf_names]


def hostile_ignore_cases(size: str = "ci") -> list[Case]:
    """One case per kind of hostile ignore file (ReDoS, huge, binary, FIFO, links, CRLF, ...)."""
    return [Case(build.__name__, functools.partial(check_hostile_ignore, build.__name__))
            for build in _hostile_cases(Path("."))]


def check_hostile_ignore(name: str, base: Path) -> None:
    build = {b.__name__: b for b in _hostile_cases(base)}[name]
    folder = base / name / "docs"
    folder.mkdir(parents=True)
    rules, want, reasons = build(folder)
    try:
        skipped: list = []
        got = {os.path.relpath(c.path, folder) for c in walk_folder(folder, rules, skipped)}
        if want or reasons:
            assert got == want, f"took {sorted(got)[:5]}, wanted {sorted(want)[:5]}"
        rel_reasons = {os.path.relpath(p, folder): r for p, r in skipped}
        for rel, reason in reasons.items():
            assert rel_reasons.get(rel) == reason, f"{rel}: {rel_reasons.get(rel)!r}"
        for _, reason in skipped:
            assert "\n" not in reason
    finally:
        for p in folder.rglob("*"):
            if not p.is_symlink():
                os.chmod(p, 0o700)


def random_flag_pattern(rng: random.Random) -> str:
    alphabet = "ab*?[]!#/\\ .-^{}\t\x1b\u00e9\u202e"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


FLAG_CASES = {"ci": (300, 4), "full": (2000, 20)}
"""(patterns tried in-process, patterns tried through the CLI)."""


def _flags_folder() -> Path:
    from tests.reliability.cases import once

    def make(base: Path) -> Path:
        folder = base / "docs"
        write(folder / "a.md", "a\n")
        write(folder / "sub" / "b.md", "b\n")
        return folder

    return once("flag-patterns", make)


def flag_pattern_cases(size: str = "ci", seed: int = 7) -> list[Case]:
    """Random ``--include``/``--exclude`` strings: refused on one line or walked without a warning
    turned error (``pattern-17``); a few through ``ragtui ingest`` (``cli-2``)."""
    n, n_cli = FLAG_CASES[size]
    return ([Case(f"pattern-{i}", functools.partial(check_flag_pattern, seed, i)) for i in range(n)]
            + [Case(f"cli-{i}", functools.partial(check_flag_cli, seed, i)) for i in range(n_cli)])


def check_flag_pattern(seed: int, i: int, _tmp: Path) -> None:
    pattern = random_flag_pattern(random.Random(f"{seed}-{i}"))
    try:
        spec = check_patterns([pattern], "--exclude")
    except UsageError as e:
        assert "\n" not in str(e) and "--exclude" in str(e), f"{pattern!r}: {e}"
        return
    assert spec is not None
    rules = WalkRules(exclude=(pattern,), include=(pattern,) if pattern[:1] not in ("!",) else ("*",))
    warnings: list[str] = []
    walk_folder(_flags_folder(), rules, [], warnings=warnings)


def check_flag_cli(seed: int, i: int, base: Path) -> None:
    pattern = random_flag_pattern(random.Random(f"cli-{seed}-{i}")) or "#"
    art = base / "art"
    result = run("ingest", str(_flags_folder()), "--artifacts", str(art), "--exclude", pattern, "--quiet")
    assert result.returncode in (0, 2), result.stderr
    if result.returncode == 2:
        assert one_clear_line(result.stderr) and not art.exists(), result.stderr
    else:
        assert all(line.startswith(("ragtui: warning: ", "skipped ")) for line in result.stderr.splitlines())
        assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
