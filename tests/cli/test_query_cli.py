"""Query syntax through the installed `ragtui search`: filters and phrases narrow, a malformed query exits 2
with one line naming the column, before any index is opened."""

from __future__ import annotations

import json

import pytest

from ragtui.core.search.retriever import MODES
from tests.helpers.cli import run as ragtui


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("query-cli")
    docs = base / "docs"
    (docs / "notes" / "2026").mkdir(parents=True)
    (docs / "src").mkdir()
    (docs / "notes" / "2026" / "plan.md").write_text("# Plan\n\nThe garden plan: plant tomatoes in May.\n")
    (docs / "notes" / "old.md").write_text("# Old\n\nTomatoes grew badly; the plan failed.\n")
    (docs / "src" / "garden.py").write_text("def plant(tomatoes):\n    '''Plant tomatoes by the plan.'''\n")
    art = base / "art"
    result = ragtui("ingest", str(docs), "--artifacts", str(art))
    assert result.returncode == 0, result.stderr
    return art


def _docs(art, query: str, mode: str = "bm25") -> list[str]:
    result = ragtui("search", query, "--mode", mode, "--artifacts", str(art), "--json")
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    return sorted({hit["doc_id"] for hit in json.loads(result.stdout)})


@pytest.mark.parametrize("mode", MODES)
def test_filters_and_phrases_narrow_every_mode(indexed, mode):
    assert _docs(indexed, "tomatoes", mode) == ["docs/notes/2026/plan.md", "docs/notes/old.md", "docs/src/garden.py"]
    assert _docs(indexed, "tomatoes path:notes/2026/", mode) == ["docs/notes/2026/plan.md"]
    assert _docs(indexed, "tomatoes lang:python", mode) == ["docs/src/garden.py"]
    assert _docs(indexed, "tomatoes ext:md -path:2026", mode) == ["docs/notes/old.md"]
    assert _docs(indexed, '"plant tomatoes"', mode) == ["docs/notes/2026/plan.md", "docs/src/garden.py"]
    assert _docs(indexed, "plan -tomato*", mode) == []


def test_an_escaped_colon_searches_the_text(indexed):
    assert _docs(indexed, "plan\\: garden") == ["docs/notes/2026/plan.md", "docs/notes/old.md", "docs/src/garden.py"]


@pytest.mark.parametrize(("query", "needle"), [
    ('"plant tomatoes', "query column 1: this quote is never closed"),
    ("tomatoes OR", "query column 10: OR with nothing after it"),
    ("tomatoes - plan", "query column 10: a lone '-'"),
    ("tomatoes pth:notes", "query column 10: unknown filter 'pth:'"),
    ("tomatoes ext:", "query column 10: the filter ext: has no value"),
])
def test_a_malformed_query_exits_2_naming_the_column_before_opening_anything(tmp_path, query, needle):
    # No index exists at this root: the query is refused before anything is opened or loaded.
    result = ragtui("search", query, "--strict", "--mode", "flat", "--artifacts", str(tmp_path / "none"))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
