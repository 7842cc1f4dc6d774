"""The `ragtui` command: output, exit codes, one-line errors (in-process; the installed command once)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.helpers.cli import one_error_line, run_process
from tests.helpers.cli import run as ragtui


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """A small folder ingested once with the embedded default embedder."""
    base = tmp_path_factory.mktemp("cli")
    docs = base / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nCats are small domesticated carnivorous mammals.\n", encoding="utf-8")
    (docs / "dogs.md").write_text("# Dogs\n\nDogs are loyal companions and good at fetching sticks.\n", encoding="utf-8")
    (docs / "hostile.txt").write_text("escape \x1b[2J\x1b]0;title\x07 sequences here\n", encoding="utf-8")
    art = base / "art"
    result = ragtui("ingest", str(docs), "--artifacts", str(art), "--json")
    assert result.returncode == 0, result.stderr
    return docs, art, json.loads(result.stdout)


def test_ingest_report(indexed):
    _, _, report = indexed
    assert report["published"] and report["added"] == ["docs/cats.md", "docs/dogs.md", "docs/hostile.txt"]


def test_the_installed_command_searches_and_reports_errors(indexed):
    """The console script itself (its entry point, its interpreter start-up), once: a search and a usage error."""
    _, art, _ = indexed
    version = run_process("--version")
    assert version.returncode == 0 and version.stdout.startswith("ragtui "), version.stderr
    found = run_process("search", "cats mammals", "--artifacts", str(art), "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["chunk_id"] == "docs/cats.md#0"
    bad = run_process("search", "x", "-k", "0", "--artifacts", str(art))
    assert bad.returncode == 2 and one_error_line(bad.stderr) and "-k must be" in bad.stderr


def test_reingest_writes_nothing(indexed):
    docs, art, _ = indexed
    result = ragtui("ingest", str(docs), "--artifacts", str(art))
    assert result.returncode == 0
    assert "nothing to write" in result.stdout


@pytest.mark.parametrize("mode", ["bm25", "flat", "ivf", "hybrid"])
def test_search_every_mode(indexed, mode):
    _, art, _ = indexed
    result = ragtui("search", "cats mammals", "--mode", mode, "--artifacts", str(art), "--json")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits[0]["chunk_id"] == "docs/cats.md#0"
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))


def test_search_text_output_and_nothing_found(indexed):
    _, art, _ = indexed
    result = ragtui("search", "fetching", "--artifacts", str(art))
    assert result.returncode == 0 and "docs/dogs.md#0" in result.stdout
    result = ragtui("search", "zeppelin", "--artifacts", str(art))
    assert result.returncode == 1 and result.stdout == ""


def test_search_output_is_neutralised(indexed):
    _, art, _ = indexed
    result = ragtui("search", "sequences", "--artifacts", str(art))
    assert result.returncode == 0
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\u241b[2J" in result.stdout


def test_info(indexed):
    _, art, _ = indexed
    result = ragtui("info", "--artifacts", str(art), "--json")
    info = json.loads(result.stdout)
    assert info["n_chunks"] == 3 and info["embedding_model"].startswith("wordllama")
    # The IVF default nprobe, calibrated (3 chunks: one list per chunk, every list probed).
    assert info["ivf_nprobe"] == info["ivf_nlist"] and info["ivf_calibration"]["recall"] == 1.0


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["search", "x", "--mode", "nope"], 2, "unknown mode"),
        (["search", "x", "-k", "0"], 2, "-k must be a whole number from 1 to 1000"),
        (["search", "x", "--index", "missing"], 2, "no index"),
        (["search", "x", "--index", "../etc"], 2, "invalid index id"),
        (["frobnicate"], 2, "invalid choice"),
        (["ingest", "/definitely/not/here"], 2, "not a folder"),
    ],
)
def test_errors_are_one_line_with_exit_codes(indexed, args, code, needle):
    _, art, _ = indexed
    result = ragtui(*args, "--artifacts", str(art))
    assert result.returncode == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--mode", "hybird"], "unknown mode 'hybird' (did you mean 'hybrid'?)"),
        (["--mode", "bm25", "--nprobe", "4"], "nprobe applies to ivf search, not bm25"),
        (["--mode", "ivf", "--nprobe", "0"], "--nprobe must be between 1 and the index's number of IVF lists"),
    ],
)
def test_search_arguments_are_checked_before_anything_loads(tmp_path, args, needle):
    """No index and an embedder that cannot be built: the argument error still comes first."""
    result = ragtui("search", "x", *args, "--artifacts", str(tmp_path), env={"RAGTUI_EMBEDDER": "bogus"})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_corrupt_index_exits_3(indexed, tmp_path):
    _, art, _ = indexed
    copy = tmp_path / "art"
    shutil.copytree(art, copy, symlinks=True)
    target = os.path.realpath(copy / "rag" / "docs")
    with open(os.path.join(target, "bm25.idx"), "r+b") as f:
        f.write(b"XXXX")
    result = ragtui("search", "cats", "--artifacts", str(copy))
    assert result.returncode == 3
    assert "bm25.idx" in result.stderr and "magic" in result.stderr and "Traceback" not in result.stderr
    debug = ragtui("search", "cats", "--artifacts", str(copy), "--debug")
    assert debug.returncode == 3 and "Traceback" in debug.stderr


def test_no_index_yet_says_how_to_make_one(tmp_path):
    result = ragtui("search", "x", "--artifacts", str(tmp_path))
    assert result.returncode == 2 and "ragtui ingest" in result.stderr


def test_environment_variable_sets_the_artifacts_root(indexed):
    _, art, _ = indexed
    result = ragtui("search", "cats", env={"RAGTUI_ARTIFACTS": str(art)})
    assert result.returncode == 0 and "docs/cats.md#0" in result.stdout


def test_the_index_chooses_its_embedder_whatever_is_configured(indexed):
    """An index built with the embedded default is searched with it, though another embedder (here a server
    that is not even running) is configured for new indexes."""
    _, art, _ = indexed
    result = ragtui("search", "cats", "--mode", "flat", "--artifacts", str(art),
                    env={"RAGTUI_EMBEDDER": "http", "RAGTUI_EMBED_URL": "http://127.0.0.1:9", "RAGTUI_EMBED_MODEL": "other"})
    assert result.returncode == 0, result.stderr
    assert "docs/cats.md#0" in result.stdout.splitlines()[0]
