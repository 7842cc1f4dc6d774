"""What ``ragtui search`` prints: path:Lstart-Lend, a snippet centred on the query's terms, --json
with source ranges, mode and query time, and --explain exact to the scores. Run in-process."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run as ragtui

FILLER = "Intro text that goes on about nothing in particular for a long while, and more filler words. " * 2


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("searchout")
    docs = base / "docs"
    docs.mkdir()
    (docs / "chmod.md").write_text(
        "# Permissions\n\n" + FILLER + "\nTo change file permissions recursively, use chmod -R on the folder.\n"
        + FILLER + "\n", encoding="utf-8")
    (docs / "cat.md").write_text("line one\nline two\na cat sat on a mat\n", encoding="utf-8")
    (docs / "evil.md").write_text("an \x1b[31mescape\x1b[0m in \x9b2J text \u202eevil\n", encoding="utf-8")
    art = base / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    return base, art


def test_each_hit_shows_path_lines_and_a_snippet_centred_on_the_terms(indexed):
    base, art = indexed
    r = ragtui("search", "change file permissions recursively", "--artifacts", str(art), cwd=base,
               env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    head, snippet = r.stdout.splitlines()[:2]
    assert "docs/chmod.md:L1-L5" in head and "docs/chmod.md#0" in head
    assert snippet.startswith(" " * 6 + "…") and "change file permissions recursively" in snippet
    assert len(snippet) <= 100
    # Not under the current folder: the absolute path.
    r = ragtui("search", "cat", "--artifacts", str(art), cwd=art)
    assert f"{base.resolve()}/docs/cat.md:L1-L3" in r.stdout


def test_the_snippet_follows_the_terminal_width_and_is_80_when_piped(indexed):
    base, art = indexed
    for columns, limit in (("60", 60), ("200", 200)):
        r = ragtui("search", "chmod", "--artifacts", str(art), cwd=base, env={"COLUMNS": columns})
        lines = r.stdout.splitlines()
        assert max(len(line) for line in lines[1::2]) <= limit
    wide = ragtui("search", "chmod", "--artifacts", str(art), cwd=base, env={"COLUMNS": "200"}).stdout.splitlines()[1]
    assert len(wide) > 150
    piped = ragtui("search", "chmod", "--artifacts", str(art), cwd=base, env={"COLUMNS": ""}).stdout.splitlines()[1]
    assert 60 < len(piped) <= 80  # stdout is a pipe here: 80 columns


def test_text_output_is_neutralised(indexed):
    base, art = indexed
    r = ragtui("search", "evil", "--artifacts", str(art), cwd=base)
    assert r.returncode == 0
    for raw in ("\x1b", "\x9b", "\u202e"):
        assert raw not in r.stdout
    assert "\u241b[31mescape" in r.stdout


def test_json_hits_carry_source_range_mode_and_time(indexed):
    base, art = indexed
    r = ragtui("search", "cat", "--artifacts", str(art), "--json", cwd=base)
    hit = json.loads(r.stdout)[0]
    assert hit["chunk_id"] == "docs/cat.md#0" and hit["mode"] == "bm25" and hit["query_ms"] >= 0
    assert hit["path"].endswith("docs/cat.md") and hit["status"] == "fresh"
    assert (hit["start_line"], hit["end_line"]) == (1, 3)
    source = (base / "docs" / "cat.md").read_text()
    assert source[hit["start_char"] : hit["end_char"]] == hit["text"]


def test_explain_bm25_terms_sum_to_the_score(indexed):
    base, art = indexed
    r = ragtui("search", "a cat file", "--artifacts", str(art), "--json", "--explain", cwd=base)
    hits = json.loads(r.stdout)
    assert hits
    for hit in hits:
        e = hit["explain"]
        assert e["bm25"]["k1"] > 0 and e["score"] == hit["score"]
        total = 0.0
        for t in e["terms"]:
            total += t["contribution"]
        assert abs(total - hit["score"]) <= 1e-9
        assert {t["term"] for t in e["terms"]} == {"a", "cat", "file"}
    text = ragtui("search", "a cat file", "--artifacts", str(art), "--explain", cwd=base).stdout
    assert "bm25: k1 1.2, b 0.75" in text and "idf" in text and "tf 1" in text


@pytest.mark.parametrize(("mode", "needle"), [("hybrid", "bm25stem rank 1"), ("ivf", "probed"), ("flat", "cosine")])
def test_explain_vector_modes(indexed, mode, needle):
    base, art = indexed
    r = ragtui("search", "cat", "--mode", mode, "--artifacts", str(art), "--explain", cwd=base)
    assert r.returncode == 0, r.stderr
    assert needle in r.stdout
    hits = json.loads(ragtui("search", "cat", "--mode", mode, "--artifacts", str(art), "--explain", "--json").stdout)
    if mode == "hybrid":
        arms = hits[0]["explain"]["arms"]
        assert [a["arm"] for a in arms] == ["bm25stem", "flat"]  # wordllama's fit (fusion_fit)
        assert abs(sum(a["added"] for a in arms) - hits[0]["score"]) <= 1e-12
    if mode == "ivf":
        ivf = hits[0]["explain"]["ivf"]
        assert hits[0]["explain"]["ivf_list"] in ivf["probed"] and len(ivf["probed"]) <= ivf["nlist"]


_COUNT_OPENS = """
import collections, json, os, sys
folder = os.path.realpath(sys.argv.pop(1))
opened = collections.Counter()
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and os.path.realpath(args[0]).startswith(folder + os.sep):
        opened[os.path.basename(args[0])] += 1
sys.addaudithook(hook)
from ragtui import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "opened": opened}), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--json"], ["--json", "--mode", "hybrid"], []])
def test_each_hits_source_file_is_read_once(tmp_path, args):
    """Several hits of one file, with --json and without: each file is opened once, and the output is
    what the in-process command prints."""
    import subprocess
    import sys

    base = tmp_path
    docs = base / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("".join(f"## Part {i}\n\nA cat sat on mat number {i}.\n\n{FILLER * 3}\n"
                                          for i in range(6)), encoding="utf-8")
    (docs / "dogs.md").write_text("A dog sat on a mat too.\n", encoding="utf-8")
    art = base / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    argv = ["search", "cat sat on mat", "-k", "5", "--artifacts", str(art), *args]
    done = subprocess.run([sys.executable, "-c", _COUNT_OPENS, str(base / "docs"), *argv], capture_output=True,
                          text=True, cwd=base, timeout=300)
    seen = json.loads(done.stderr.strip().splitlines()[-1])
    assert seen["code"] == 0, done.stderr
    assert seen["opened"] and set(seen["opened"].values()) == {1}, seen["opened"]
    here = ragtui(*argv, cwd=base)
    if "--json" in args:
        strip = [{k: v for k, v in row.items() if k != "query_ms"} for row in json.loads(done.stdout)]
        assert strip == [{k: v for k, v in row.items() if k != "query_ms"} for row in json.loads(here.stdout)]
        paths = [row["path"] for row in strip]
        assert len(strip) == 5 and paths.count(str(docs / "cats.md")) >= 3
        assert all(row["start_line"] is not None and row["fresh"] for row in strip)
    else:
        assert done.stdout == here.stdout
