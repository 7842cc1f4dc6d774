"""Which files are documents: gitignore-style --include/--exclude and the folder's ignore files (spec/patterns.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ragtui.core.errors import UsageError
from ragtui.core.ingest.patterns import IGNORE_FILE_MAX_BYTES, check_patterns
from ragtui.core.ingest.sync import load_state, sync
from ragtui.core.ingest.walk import WalkRules, walk_folder
from tests.files import write

from .fakes import HashEmbedder

pytestmark = pytest.mark.timeout(120)


def walked(folder: Path, rules: WalkRules | None = None, skipped=None, warnings=None) -> set[str]:
    """The folder-relative paths of the documents the walk finds."""
    skipped = [] if skipped is None else skipped
    cands = walk_folder(folder, rules or WalkRules(), skipped, warnings=warnings)
    return {os.path.relpath(c.path, folder) for c in cands}


@pytest.fixture()
def tree(tmp_path):
    """A folder with nested ignore files: negations, directory patterns, anchored patterns."""
    f = tmp_path / "docs"
    for rel in ("a.md", "notes.txt", "app.log.txt", "build/out.md", "src/build/gen.md", "src/main.py",
                "docs/guide.md", "docs/drafts/wip.md", "docs/drafts/keep.md", "deep/x/tmp/t.md", "tmp/top.md",
                "sub/keep.log.txt", "sub/other.log.txt", "sub/inner/other.log.txt", "secret/s.md", "secret/ok.md"):
        write(f / rel, f"text of {rel}\n")
    write(f / ".gitignore", "# comment\n/build\n*.log.txt\n**/tmp/\nsecret/\n!secret/ok.md\n")
    write(f / "sub" / ".gitignore", "!keep.log.txt\n")  # a deeper file re-includes
    write(f / "docs" / ".gitignore", "drafts/*\n!drafts/keep.md\n")  # negation inside a folder still entered
    return f


def test_nested_gitignore_files_apply_to_their_subtree(tree):
    assert walked(tree) == {
        "a.md", "notes.txt",
        "src/build/gen.md",  # /build is anchored to the folder: src/build stays
        "src/main.py", "docs/guide.md",
        "docs/drafts/keep.md",  # drafts/* leaves the folder entered, so its negation works
        "sub/keep.log.txt",  # sub/.gitignore overrides the top one for its subtree
    }  # gone: build/ (anchored), *.log.txt, tmp/ at any depth, secret/


def test_no_ignore_files_takes_everything_text_like(tree):
    assert walked(tree, WalkRules(ignore_files=False)) == {
        "a.md", "notes.txt", "app.log.txt", "build/out.md", "src/build/gen.md", "src/main.py", "docs/guide.md",
        "docs/drafts/wip.md", "docs/drafts/keep.md", "deep/x/tmp/t.md", "tmp/top.md", "sub/keep.log.txt",
        "sub/other.log.txt", "sub/inner/other.log.txt", "secret/s.md", "secret/ok.md",
    }


def test_a_file_in_an_ignored_folder_cannot_be_re_included(tree):
    # secret/ is ignored, so "!secret/ok.md" cannot bring ok.md back (git's rule: the folder is never entered).
    assert not {"secret/ok.md", "secret/s.md"} & walked(tree)


def test_exclude_is_a_path_pattern_relative_to_the_folder(tree):
    rules = WalkRules(exclude=("docs/drafts",), ignore_files=False)
    found = walked(tree, rules)
    assert "docs/guide.md" in found and not any(p.startswith("docs/drafts/") for p in found)
    # Anchored: /deep matches only at the top; **/x/ any folder named x; *.py any depth.
    found = walked(tree, WalkRules(exclude=("/deep", "*.py", "**/build/"), ignore_files=False))
    assert not any(p.startswith(("deep/", "build/", "src/build/")) for p in found) and "src/main.py" not in found
    assert "a.md" in found and "tmp/top.md" in found


def test_exclude_negation_only_reopens_its_own_patterns(tree):
    rules = WalkRules(exclude=("*.md", "!guide.md"))
    found = walked(tree, rules)
    assert "docs/guide.md" in found and "a.md" not in found
    # An --exclude negation does not override an ignore file: secret/ok.md stays out.
    assert "secret/ok.md" not in walked(tree, WalkRules(exclude=("!secret/ok.md",)))


def test_include_replaces_the_defaults_with_path_patterns(tree):
    assert walked(tree, WalkRules(include=("docs/",), ignore_files=False)) == {
        "docs/guide.md", "docs/drafts/wip.md", "docs/drafts/keep.md"}
    assert walked(tree, WalkRules(include=("*.py", "/a.md"))) == {"src/main.py", "a.md"}
    # --include chooses among what the ignore files leave: build/out.md stays out.
    assert walked(tree, WalkRules(include=("/build/",))) == set()
    assert walked(tree, WalkRules(include=("build/",))) == {"src/build/gen.md"}


def test_always_skipped_names_stay_skipped(tmp_path):
    f = tmp_path / "docs"
    for rel in (".hidden.md", ".git/config.md", "node_modules/m.md", "a.md.swp", "a.md", "__pycache__/c.md"):
        write(f / rel, "x\n")
    # Negations in an ignore file or --exclude, or an --include naming them, bring none of them back.
    write(f / ".gitignore", "!.hidden.md\n!node_modules/\n!*.swp\n")
    rules = WalkRules(include=("*",), exclude=("!.git/",))
    assert walked(f, rules) == {"a.md"}


def test_dot_ignore_overrides_gitignore_in_the_same_folder(tmp_path):
    f = tmp_path / "docs"
    write(f / "a.md", "a\n")
    write(f / "b.md", "b\n")
    write(f / ".gitignore", "*.md\n")
    write(f / ".ignore", "!a.md\n")
    assert walked(f) == {"a.md"}
    assert walked(f, WalkRules(ignore_files=False)) == {"a.md", "b.md"}


def test_unmatched_patterns_are_warned_once_each(tree):
    warnings: list[str] = []
    rules = WalkRules(include=("*.md", "*.nothing"), exclude=("docs/drafts", "no/such/dir", ".git"))
    walked(tree, rules, warnings=warnings)
    assert warnings == [
        f"--include '*.nothing' matches nothing in {tree}",
        f"--exclude 'no/such/dir' matches nothing in {tree}",
        f"--exclude '.git' matches nothing in {tree}",
    ]
    # A pattern matching a hidden or always-skipped entry did match something.
    write(tree / ".venv" / "x.md", "x\n")
    warnings.clear()
    walked(tree, WalkRules(exclude=(".venv",)), warnings=warnings)
    assert warnings == []


@pytest.mark.parametrize("pattern", ["a\\", "!", "#comment", "/", "[abc", "   ", "a\nb", ""])
def test_a_pattern_that_is_not_one_is_a_usage_error(pattern):
    with pytest.raises(UsageError) as e:
        check_patterns([pattern], "--exclude")
    assert "\n" not in str(e.value) and "--exclude" in str(e.value)


def test_escaped_hash_and_bang_are_literal_names(tmp_path):
    f = tmp_path / "docs"
    write(f / "#notes.md", "hash\n")
    write(f / "!bang.md", "bang\n")
    write(f / "plain.md", "plain\n")
    assert walked(f, WalkRules(exclude=("\\#notes.md", "\\!bang.md"))) == {"plain.md"}


def test_names_with_newlines_and_odd_bytes_are_matched_like_any_name(tmp_path):
    # Patterns see such names whole; afterwards the walk skips line-break names
    # (their chunk ids could not be referenced), and says why.
    f = tmp_path / "docs"
    write(f / "line\nbreak" / "y.md", "y\n")
    write(f / "cr\rname.md", "cr\n")
    write(f / "keep.md", "k\n")
    write(f / ".gitignore", "cr*\n")
    skipped: list = []
    assert walked(f, skipped=skipped) == {"keep.md"}
    reasons = {os.path.basename(p): r for p, r in skipped}
    assert "cr\rname.md" not in reasons  # ignored by the pattern, not skipped for its name
    assert "line break" in reasons["line\nbreak"]
    assert walked(f, WalkRules(exclude=("line*",))) == {"keep.md"}
    skipped = []
    walked(f, WalkRules(exclude=("line*",)), skipped)
    assert not any("line break" in r for _, r in skipped)  # excluded folders are never looked at
    bad = os.fsencode(f) + b"/caf\xe9"
    os.makedirs(bad)
    with open(bad + b"/z.md", "wb") as fh:
        fh.write(b"z\n")
    skipped = []
    walked(f, WalkRules(exclude=("nothing-like-it",)), skipped)
    assert any(reason == "file name is not valid UTF-8" for _, reason in skipped)
    assert walked(f, WalkRules(exclude=("caf*",))) == {"keep.md"}


def test_hostile_ignore_files_are_reported_and_never_read_outside(tmp_path):
    outside = tmp_path / "outside.txt"
    write(outside, "*.md\n")
    f = tmp_path / "docs"
    write(f / "a.md", "a\n")
    write(f / "sub" / "b.md", "b\n")
    write(f / "big" / "c.md", "c\n")
    write(f / "bad" / "d.md", "d\n")
    write(f / "fifo" / "e.md", "e\n")
    os.symlink(outside, f / "sub" / ".gitignore")  # a link out of the folder is not followed
    write(f / "big" / ".gitignore", "*.md\n" + "#" * IGNORE_FILE_MAX_BYTES)  # too large: not applied
    write(f / "bad" / ".gitignore", "ok\\\n!\n*.nope\n")  # two bad lines left out, the rest applies
    os.mkfifo(f / "fifo" / ".gitignore")  # never opened for reading (would block)
    skipped: list = []
    assert walked(f, skipped=skipped) == {"a.md", "sub/b.md", "big/c.md", "bad/d.md", "fifo/e.md"}
    reasons = {os.path.relpath(p, f): r for p, r in skipped}
    assert reasons["sub/.gitignore"] == "ignore file not applied: resolves outside the folder (not followed)"
    assert reasons["big/.gitignore"] == f"ignore file not applied: larger than {IGNORE_FILE_MAX_BYTES:,} bytes"
    assert reasons["bad/.gitignore"] == "line 1 (and 1 more) of this ignore file is not a pattern: left out"
    assert reasons["fifo/.gitignore"] == "ignore file not applied: is a FIFO, not a regular file (never opened)"


def test_patterns_that_backtrack_for_ever_in_python_re_match_at_once(tmp_path):
    # With Python's re each of these takes minutes to hours against these names (measured: *a*a*a*a*b
    # against 250 a's, 14 s; four inner ** against 600 folders a/a/..., 157 s); RE2 is linear.
    f = tmp_path / "docs"
    name = "a" * 250 + ".md"
    write(f / "x" / name, "long name\n")
    deep = f.joinpath(*["a"] * 300)
    write(deep / "q.md", "deep\n")
    write(f / ".gitignore", "*a*a*a*a*a*a*a*a*b\na/**/a/**/a/**/a/**/a/**/b\n")
    assert walked(f) == {f"x/{name}", os.path.relpath(deep / "q.md", f)}
    write(f / ".gitignore", "*a*a*a*a*a*a*a*a*.md\n")  # and one that does match the long name
    assert walked(f) == {os.path.relpath(deep / "q.md", f)}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_same_files_as_git_ls_files(tree, tmp_path):
    """The ignore files as git itself reads them (an independent implementation)."""
    env = {**os.environ, "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q", str(tree)], check=True, env=env)
    out = subprocess.run(["git", "-C", str(tree), "ls-files", "--others", "--exclude-standard", "-z"],
                         capture_output=True, check=True, env=env).stdout
    by_git = {p for p in out.decode().split("\0") if p and not p.rsplit("/", 1)[-1].startswith(".")}
    shutil.rmtree(tree / ".git")
    assert walked(tree, WalkRules(include=("*",))) == by_git


# -- the writer state: other patterns are noticed --------------------------------------------------------


def run(folder, art, **kw):
    return sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4, **kw)


def test_changed_patterns_are_noticed_even_by_a_partial_sync(tree, tmp_path):
    art = tmp_path / "art"
    first = run(tree, art)
    assert "docs/docs/drafts/keep.md" in first.added
    assert load_state(art, "docs")["walk"]["exclude"] == []
    # The same folder with another --exclude, asked about one unrelated path (as the watch agent would):
    # the last sync's documents cannot be trusted to be the right ones, so the whole folder is walked.
    again = run(tree, art, rules=WalkRules(exclude=("docs/drafts",)), paths=[tree / "a.md"])
    assert again.published and again.removed == ["docs/docs/drafts/keep.md"]
    assert load_state(art, "docs")["walk"]["exclude"] == ["docs/drafts"]
    # Patterns that change no document are remembered without a publish; the next check is a no-op.
    same = run(tree, art, rules=WalkRules(exclude=("docs/drafts", "*.nothing")))
    assert not same.published and same.warnings == [f"--exclude '*.nothing' matches nothing in {tree}"]
    assert load_state(art, "docs")["walk"]["exclude"] == ["docs/drafts", "*.nothing"]
    quiet = run(tree, art, rules=WalkRules(exclude=("docs/drafts", "*.nothing")), paths=[tree / "a.md"])
    assert not quiet.published and quiet.warnings == []


def test_a_named_ignore_file_makes_the_sync_walk_everything(tree, tmp_path):
    art = tmp_path / "art"
    run(tree, art)
    write(tree / ".gitignore", "/build\n")  # *.log.txt, tmp/ and secret/ are no longer ignored
    report = run(tree, art, paths=[tree / ".gitignore"])
    assert set(report.added) >= {"docs/app.log.txt", "docs/sub/other.log.txt", "docs/deep/x/tmp/t.md",
                                 "docs/secret/s.md", "docs/secret/ok.md"}


def test_a_partial_sync_with_other_rules_is_not_a_no_op(tmp_path):
    # Before the state recorded the walk rules, this partial sync looked at a.md only, carried
    # drafts/keep.md over and answered "nothing to write" (even with a plain name pattern).
    f = tmp_path / "docs"
    write(f / "a.md", "a\n")
    write(f / "drafts" / "keep.md", "k\n")
    art = tmp_path / "art"
    run(f, art)
    report = run(f, art, rules=WalkRules(exclude=("drafts",)), paths=[f / "a.md"])
    assert report.published and report.removed == ["docs/drafts/keep.md"]
    report = run(f, art, rules=WalkRules(exclude=("drafts",), max_bytes=1), paths=[f / "a.md"])
    assert report.published and report.removed == ["docs/a.md"]
    assert report.skipped == [(str(f / "a.md"), "larger than the 1-byte limit")]


def test_the_one_regex_for_file_names_agrees_with_the_two_name_rules():
    """Where no pattern applies to paths the walk decides a file by one regex: the same answer as the two rules."""
    from tests.conftest import shared_data

    names = {
        "a.md", "README", "README.md", "LICENSE", "Makefile", "Makefilex", "Dockerfile", "x.rst.txt", "A.MD",
        ".hidden.md", ".#a.md", "#a.md#", "a.md~", "a~.md", "x.swp", "x.swp.md", "a.md.swp", "4913", "4913.md",
        ".goutputstream-XY", "x.goutputstream-1", "a.tmp", "a.tmp.md", "a.temp", "node_modules", "venv.md",
        "a.md\n", "\n.md", "a\r.md", "été.md", "\udcff.md", "ΩMEGA.md", "no_extension", "a.", ".", "~", "a.MD.md",
    }
    for _dirpath, dirnames, filenames in os.walk(shared_data("corpora", "tldr-pages")):
        names.update(dirnames)
        names.update(filenames)
    test = WalkRules.doc_name_test()
    for name in names:
        assert bool(test(name)) == (not WalkRules.skips_name(name) and WalkRules.wants_name(name)), name


def test_a_folder_swapped_for_a_link_is_not_listed(tmp_path):
    """The walk lists each folder below the top through a descriptor opened without following a link."""
    from ragtui.core.ingest.walk import _list_folder

    write(tmp_path / "outside" / "secret.md", "not to be read")
    (tmp_path / "docs").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "docs" / "sub")
    with pytest.raises(OSError):
        _list_folder(str(tmp_path / "docs" / "sub"), False)
    entries = _list_folder(str(tmp_path / "docs" / "sub"), True)  # the folder given may be reached through a link
    try:
        assert [e.name for e in entries] == ["secret.md"]
        assert entries[0].stat(follow_symlinks=False).st_size == len("not to be read")
    finally:
        entries.close()
    assert walked(tmp_path / "docs") == set()  # and the walk itself never follows one
    os.mkfifo(tmp_path / "fifo")  # a folder swapped for a FIFO: refused at once, never waited on
    with pytest.raises(NotADirectoryError):
        _list_folder(str(tmp_path / "fifo"), False)


def test_the_per_folder_name_test_agrees_with_admits(tree):
    """The walk asks a per-folder test of the name where no --include/--exclude applies; in every folder
    of a tree with nested ignore files (negations, anchored and folder patterns) it answers as ``admits``."""
    write(tree / "docs" / "drafts" / ".ignore", "!wip.md\nkeep.md\n")
    filt = WalkRules().path_filter(tree, [])
    names = ["a.md", "notes.txt", "app.log.txt", "keep.log.txt", "other.log.txt", "wip.md", "keep.md", "ok.md",
             "s.md", "t.md", "top.md", "gen.md", "main.py", "x.bin", ".hidden.md", "tmp", "build", "été.log.txt",
             "a\nb.md", "odd\udcff.md", "README", "a.md~"]
    folders = ["", "sub", "sub/inner", "docs", "docs/drafts", "src", "src/build", "deep/x", "secret", "deep/x/tmp"]
    asked = 0
    for rel in folders:
        chain = filt.chain(rel)
        if chain is None:
            continue
        test = filt.name_test(chain, rel)
        assert test is not None
        for name in names:
            assert bool(test(name)) == filt.admits(rel, chain, name, False), (rel, name)
            asked += 1
    assert asked >= 8 * len(names)
    assert WalkRules(exclude=("*.txt",)).path_filter(tree, []).name_test((), "") is None  # patterns: ask admits


def test_a_folder_with_one_odd_file_is_walked_entry_by_entry_with_the_reason(tmp_path):
    """The walk takes a folder's plain files in bulk; one file that is not plain (too large, a FIFO, a name
    with a line break, a link) sends the folder through the per-entry checks, which say why it is left out."""
    folder = tmp_path / "docs"
    for i in range(5):
        write(folder / "plain" / f"f{i}.md", f"plain {i}\n")
        write(folder / "odd" / f"f{i}.md", f"odd {i}\n")
    write(folder / "odd" / "big.md", "x" * 200)
    write(folder / "odd" / "line\nbreak.md", "a name with a newline\n")
    os.mkfifo(folder / "odd" / "pipe.md")
    os.symlink(folder / "plain" / "f0.md", folder / "odd" / "link.md")
    skipped: list = []
    got = walked(folder, WalkRules(max_bytes=100), skipped)
    assert got == {f"plain/f{i}.md" for i in range(5)} | {f"odd/f{i}.md" for i in range(5)} | {"odd/link.md"}
    reasons = {os.path.basename(p): why for p, why in skipped}
    assert "100-byte limit" in reasons["big.md"]
    assert "line break" in reasons["line\nbreak.md"]
    assert "not a regular file" in reasons["pipe.md"]
