"""Terminal safety: text and names that carry escape sequences are shown neutralised by search and inspect."""

from __future__ import annotations

import json

import pytest

from ragtui.core.textsafe import neutralize
from tests.helpers.cli import run
from tests.reliability.cases import CI, params
from tests.reliability.helpers_terminal import HOSTILE, build, markers, terminal_cases, unsafe


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory):
    base = tmp_path_factory.mktemp("terminal")
    folder = build(base / "docs")
    art = base / "art"
    r = run("ingest", str(folder), "--artifacts", str(art))
    assert r.returncode == 0, r.stderr
    return folder, art


def test_neutralize_leaves_nothing_a_terminal_acts_on():
    for text in HOSTILE.values():
        assert unsafe(neutralize(text).replace("\t", " ")) == []


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_search_output(hostile_index, mode):
    _, art = hostile_index
    r = run("search", " ".join(markers()), "--mode", mode, "-k", "50", "--artifacts", str(art))
    assert r.returncode == 0, r.stderr
    assert unsafe(r.stdout) == [] and unsafe(r.stderr) == []
    assert "\u241b[2J" in r.stdout and "PWNED-TITLE" in r.stdout and "HIDDEN-TEXT" in r.stdout  # shown, not obeyed
    # Two lines per hit (where it is, then the snippet): no embedded newline or CR adds one.
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * len(HOSTILE) and all(line.startswith(" " * 6) for line in lines[1::2])


def test_inspect_output(hostile_index):
    folder, art = hostile_index
    hits = json.loads(run("search", " ".join(markers()), "-k", "50", "--artifacts", str(art), "--json").stdout)
    refs = [h["chunk_id"] for h in hits]
    assert len(refs) == len(HOSTILE)
    r = run("inspect", *refs, "--artifacts", str(art), "--root", str(folder.parent))
    assert r.returncode == 0, r.stderr
    assert unsafe(r.stdout.replace("\t", " ")) == [] and unsafe(r.stderr) == []
    assert "HIDDEN-TEXT" in r.stdout


def test_json_output_escapes_every_control(hostile_index):
    """--json is for programs, but it often lands on a terminal: no raw control there either."""
    _, art = hostile_index
    r = run("search", " ".join(markers()), "-k", "50", "--artifacts", str(art), "--json")
    hits = json.loads(r.stdout)
    assert {h["text"].split()[0] for h in hits} == set(markers())  # the data itself is intact
    assert unsafe(r.stdout) == []


def test_json_output_has_no_raw_c0_control(hostile_index):
    _, art = hostile_index
    r = run("search", " ".join(markers()), "-k", "50", "--artifacts", str(art), "--json")
    assert not any(c < " " and c != "\n" for c in r.stdout)


def test_skip_and_error_lines_are_safe(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bin\x1b]0;T\x07.txt").write_bytes(b"\x00binary")
    r = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"))
    assert "skipped" in r.stderr and unsafe(r.stderr) == []
    r = run("inspect", "docs/x\x1b[2J.md#0", "--artifacts", str(tmp_path / "art"))
    assert r.returncode != 0 and unsafe(r.stdout + r.stderr) == []


@pytest.mark.parametrize("case", params(terminal_cases(CI)))
def test_each_hostile_document_through_search_and_inspect(case, tmp_path):
    case(tmp_path)
