"""One rule for every command: exit codes and messages for no index, an empty query or index, nprobe
out of range, help texts, the TUI without a terminal, and positional short references in `inspect`."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess

import pytest

from tests.cli.test_roots_cli import _one_error, ragtui
from tests.helpers.cli import ragtui_exe, run_process


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """docs (two files) and empty (no document), under one artifacts root."""
    base = tmp_path_factory.mktemp("consistency")
    docs, empty = base / "docs", base / "empty"
    docs.mkdir()
    empty.mkdir()
    (docs / "b.md").write_text("Change file permissions recursively with chmod -R.\n")
    (docs / "c.md").write_text("Compress a folder into a tar archive.\n")
    art = base / "art"
    for folder in (docs, empty):
        result = ragtui("ingest", str(folder), "--artifacts", str(art))
        assert result.returncode == 0, result.stderr
    return base, art


def test_no_index_is_the_same_error_for_every_command(tmp_path):
    art = str(tmp_path / "art")
    for command in (("info",), ("info", "--json"), ("search", "tar"), ("inspect", "docs/a.md#0")):
        _one_error(ragtui(*command, "--artifacts", art), 2, f"no index under {art}/rag",
                   "--artifacts DIR or RAGTUI_ARTIFACTS")


def test_an_empty_query_says_so(indexes):
    _, art = indexes
    for query in ("", "   "):
        _one_error(ragtui("search", query, "--index", "docs", "--artifacts", str(art)), 2, "the query is empty")


def test_a_search_on_an_empty_index_says_the_index_is_empty(indexes):
    _, art = indexes
    for mode in ("bm25", "flat"):
        _one_error(ragtui("search", "tar", "--mode", mode, "--index", "empty", "--artifacts", str(art)), 1,
                   "index 'empty' is empty", "ragtui ingest")


def test_nprobe_out_of_range_is_refused_with_the_range(indexes):
    _, art = indexes
    common = ("search", "tar", "--mode", "ivf", "--index", "docs", "--artifacts", str(art))
    _one_error(ragtui(*common, "--nprobe", "0"), 2, "--nprobe must be between 1 and", "(got 0)")
    _one_error(ragtui(*common, "--nprobe", "999"), 2, "--nprobe must be between 1 and 1,", "(got 999)")
    assert ragtui(*common, "--nprobe", "1").returncode == 0


def test_inspect_an_empty_index_says_it_is_empty(indexes):
    _, art = indexes
    line = _one_error(ragtui("inspect", "empty#0", "--artifacts", str(art)), 1, "index 'empty' is empty")
    assert "0..-1" not in line


def test_every_subcommand_help_has_a_description():
    from ragtui.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert p.description and len(p.description) > 20, f"`ragtui {name} --help` has no description"
    text = ragtui("info", "--help").stdout
    assert "which artifacts root is in use" in text.lower()


def test_the_tui_without_a_terminal_refuses_with_a_hint(tmp_path):
    # Whether stdin and stdout are terminals is a property of the process's file descriptors.
    result = run_process("--artifacts", str(tmp_path / "art"), timeout=60)
    _one_error(result, 2, "needs a terminal", "stdin and stdout", "ragtui search")
    piped = run_process("--artifacts", str(tmp_path / "art"), stdin="", timeout=60)
    _one_error(piped, 2, "needs a terminal")
    # A terminal on stdout alone is not enough: the UI would wait for keys that never come.
    import pty

    master, slave = pty.openpty()
    proc = subprocess.run([*ragtui_exe(), "--artifacts", str(tmp_path / "art")], stdin=subprocess.DEVNULL, stdout=slave,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    os.close(slave)
    os.close(master)
    assert proc.returncode == 2 and "but stdin is not one" in proc.stderr, proc.stderr


# -- short references are positional -----------------------------------------------------


def test_a_short_reference_says_it_is_positional(indexes):
    _, art = indexes
    shown = ragtui("inspect", "docs#0", "--artifacts", str(art))
    assert shown.returncode == 0, shown.stderr
    assert "docs#0 is positional" in shown.stdout and "cite docs/b.md#0" in shown.stdout
    full = ragtui("inspect", "docs/b.md#0", "--artifacts", str(art))
    assert "positional" not in full.stdout
    as_json = json.loads(ragtui("inspect", "docs#0", "--json", "--artifacts", str(art)).stdout)
    assert as_json["positional"] is True and as_json["chunk_id"] == "docs/b.md#0"
    check = ragtui("inspect", "--check", "docs#0", "--artifacts", str(art))
    assert check.returncode == 0 and "positional: cite docs/b.md#0" in check.stdout


def test_check_flags_a_short_reference_whose_row_now_holds_another_document(tmp_path):
    docs, art = tmp_path / "docs", tmp_path / "art"
    docs.mkdir()
    text = "Change file permissions recursively with chmod -R."
    (docs / "b.md").write_text(text + "\n")
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    cited = json.loads(ragtui("inspect", "docs#0", "--json", "--artifacts", str(art)).stdout)
    fp = cited["fingerprint"]
    assert fp == hashlib.sha256(cited["text"].encode()).hexdigest()
    check = ("inspect", "--check", "docs#0", "--artifacts", str(art))
    assert ragtui(*check, "--text", cited["text"]).returncode == 0
    assert ragtui(*check, "--fingerprint", fp).returncode == 0
    (docs / "a.md").write_text("Archives: tar, zip and friends.\n")  # sorts first: row 0 is now a.md's chunk
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    unguarded = ragtui(*check)
    assert unguarded.returncode == 0 and "cite docs/a.md#0" in unguarded.stdout  # fresh, but see the advice
    for flag, value in (("--text", cited["text"]), ("--fingerprint", fp)):
        flagged = ragtui(*check, flag, value)
        assert flagged.returncode == 1, flagged.stderr
        assert flagged.stdout.startswith("replaced docs#0") and "row 0 now holds docs/a.md#0" in flagged.stdout
    record = json.loads(ragtui(*check, "--fingerprint", fp, "--json").stdout)
    assert record["status"] == "replaced" and record["ok"] is False and record["holds_expected"] is False
    assert ragtui("inspect", "--check", "docs/b.md#0", "--fingerprint", fp, "--artifacts", str(art)).returncode == 0


def test_expectations_need_check_and_one_per_reference(indexes):
    _, art = indexes
    _one_error(ragtui("inspect", "docs#0", "--text", "x", "--artifacts", str(art)), 2, "use them with --check")
    _one_error(ragtui("inspect", "--check", "docs#0", "docs#1", "--text", "x", "--artifacts", str(art)), 2,
               "once per reference")
    _one_error(ragtui("inspect", "--check", "docs#0", "--fingerprint", "abc", "--artifacts", str(art)), 2,
               "64 hex digits")
