"""`ragtui export` in-process: writes, replaces, refuses, verifies, answers a query; exit codes."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run as ragtui
from tests.unit.indexgen import build

DOCS = {"docs/cats.md": ["# Cats\n\nCats are small carnivorous mammals."],
        "docs/dogs.md": ["# Dogs\n\nDogs fetch sticks.", "## Training\n\nDogs learn tricks."]}
STAMP = "2026-01-01T00:00:00Z"


@pytest.fixture
def art(tmp_path):
    build(tmp_path / "art", "docs", DOCS, dim=8)
    return tmp_path / "art"


def test_export_verify_and_query(tmp_path, art):
    out = tmp_path / "site"
    r = ragtui("export", str(out), "--artifacts", str(art), "--generated-at", STAMP, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["chunks"] == 3 and summary["replaced"] is False and (out / "index.html").is_file()
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    r = ragtui("export", str(out), "--artifacts", str(art), "--generated-at", STAMP)
    assert r.returncode == 0 and "replaced the previous export" in r.stdout
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == first
    r = ragtui("export", "--verify", str(out))
    assert r.returncode == 0 and r.stdout.startswith("ok: docs: 3 chunks")
    r = ragtui("export", "--verify", str(out), "--query", "dogs tricks", "--json")
    hits = json.loads(r.stdout)
    assert r.returncode == 0 and hits[0]["chunk_id"] == "docs/dogs.md#1" and hits[0]["heading"] == "Dogs > Training"
    r = ragtui("export", "--verify", str(out), "--query", "zebra")
    assert r.returncode == 1 and r.stdout == ""


def test_export_refuses_and_reports_bad_usage(tmp_path, art):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    cases = [
        (["export", str(mine), "--artifacts", str(art)], 2, "not empty"),
        (["export", str(tmp_path / "x"), "--artifacts", str(art), "--format", "lunr"], 2, "unknown export format"),
        (["export", str(tmp_path / "x"), "--artifacts", str(art), "--generated-at", "yesterday"], 2, "--generated-at"),
        (["export", str(tmp_path / "x"), "--artifacts", str(art), "--vectors", "f16"], 2, "--vectors"),
        (["export", str(tmp_path / "x"), "--artifacts", str(tmp_path / "none")], 2, "no index"),
        (["export", "--verify", str(tmp_path / "nothing")], 3, "nothing"),
    ]
    for argv, code, words in cases:
        r = ragtui(*argv)
        assert r.returncode == code and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (argv, r)
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]
