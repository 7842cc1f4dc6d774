"""`ragtui search --all` and `--index a,b`: several indexes ranked as one, each hit naming its index."""

from __future__ import annotations

import json
import math

import pytest

from tests.helpers.cli import run as ragtui

NOTES = {"tar.md": "# Tar\n\nUse tar to archive files: tar -czf out.tgz dir. The archive keeps permissions.\n",
         "ssh.md": "# SSH\n\nCopy files over ssh with scp, or archive them first.\n"}
RECIPES = {"bread.md": "# Bread\n\nKnead the dough, then bake the bread for forty minutes.\n",
           "soup.md": "# Archive soup\n\nAn old recipe archive of soups and a bread roll.\n",
           "cake.md": "# Cake\n\nBake the cake; files of recipes are kept in a box.\n"}


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    """Two indexes (notes, recipes) and, for reference, one index of a folder holding both folders."""
    base = tmp_path_factory.mktemp("multi")
    both = base / "both"
    for name, files in (("notes", NOTES), ("recipes", RECIPES)):
        for folder in (base / name, both / name):
            folder.mkdir(parents=True)
            for file, text in files.items():
                (folder / file).write_text(text, encoding="utf-8")
        assert ragtui("--artifacts", str(base / "art"), "ingest", str(base / name), "--quiet").returncode == 0
    assert ragtui("--artifacts", str(base / "one"), "ingest", str(both), "--quiet").returncode == 0
    return base


def _hits(base, *args):
    r = ragtui("--artifacts", str(base), "search", *args, "--json", "-k", "20")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("mode", ["bm25", "flat", "hybrid"])
@pytest.mark.parametrize("query", ["archive files", "bake bread", "recipes box"])
def test_all_ranks_as_one_index_of_both_folders(art, mode, query):
    many = _hits(art / "art", query, "--all", "--mode", mode)
    one = _hits(art / "one", query, "--mode", mode)
    # The one index's chunk_ids carry the parent folder: compare by text, rank by rank.
    assert [h["text"] for h in many] == [h["text"] for h in one]
    assert all(math.isclose(a["score"], b["score"], abs_tol=1e-9) for a, b in zip(many, one))
    assert {h["index"] for h in many} <= {"notes", "recipes"}
    for h in many:
        assert h["chunk_id"].startswith(h["index"] + "/")


def test_index_list_names_a_subset_and_text_output_names_each_hits_index(art):
    hits = _hits(art / "art", "archive", "--index", "recipes,notes")
    assert {h["index"] for h in hits} == {"notes", "recipes"}
    r = ragtui("--artifacts", str(art / "art"), "search", "archive", "--index", "notes,recipes")
    assert r.returncode == 0
    first = r.stdout.splitlines()[0].split()
    assert first[2] in ("notes", "recipes") and "over 2 indexes" in r.stderr


def test_hits_show_their_source_lines_and_a_snippet_as_one_index_does(art):
    """As a single index's: path:Lstart-Lend, the chunk_id, then the words searched for in context."""
    hits = _hits(art / "art", "archive", "--all", "--mode", "bm25")
    for h in hits:
        assert h["status"] == "fresh" and h["start_line"] >= 1 and h["path"].endswith(h["doc_id"].split("/", 1)[1])
    r = ragtui("--artifacts", str(art / "art"), "search", "archive", "--all", "--mode", "bm25", "-k", "20", cwd=art)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * len(hits)
    for h, head, snippet in zip(hits, lines[::2], lines[1::2]):
        assert head.split()[2] == h["index"] and head.split()[4] == h["chunk_id"]
        assert head.split()[3] == f"{h['doc_id']}:L{h['start_line']}-L{h['end_line']}"
        assert snippet.startswith(" ") and "archive" in snippet.lower()


@pytest.mark.parametrize("args, needle", [
    (["--index", "notes,nosuch"], "no index 'nosuch'"),
    (["--index", "notes,,recipes"], "names an empty index id"),
    (["--all", "--rerank", "5"], "--rerank works on one index at a time"),
])
def test_bad_index_lists_are_one_clear_error(art, args, needle):
    r = ragtui("--artifacts", str(art / "art"), "search", "archive", *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_all_with_no_index_exits_2(tmp_path):
    r = ragtui("--artifacts", str(tmp_path), "search", "archive", "--all")
    assert r.returncode == 2 and "no index under" in r.stderr
