"""The same question gets the same answer from every front end: `search --json`, `pack --json`, the MCP
`search` tool and the application layer rank the same chunks with the same scores, with and without a
`[search]` table (the table applies everywhere). Called in-process: the processes are not the contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtui import app
from ragtui.config import load_settings
from ragtui.mcp.tools import Toolbox
from tests.helpers.cli import run

DOCS = {
    "cats.md": "# Cats\n\nCats purr and sleep in the sun. A cat hunts mice at night.\n",
    "dogs.md": "# Dogs\n\nDogs fetch sticks and guard the house. A dog barks at cats.\n",
    "rivers.md": "# Rivers\n\nRivers carry water to the sea; cats avoid the river bank.\n",
    "tea.md": "# Tea\n\nGreen tea is steeped briefly; black tea longer. Cats ignore tea.\n",
    "notes/sun.md": "# Sun\n\nThe sun warms the house where the cats sleep.\n",
}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("same")
    docs = base / "docs"
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    art = base / "art"
    code, _, err = run("ingest", str(docs), "--artifacts", str(art), "--max-tokens", "16", "--overlap", "4")
    assert code == 0, err
    plain = base / "plain.toml"
    plain.write_text("", encoding="utf-8")
    table = base / "search.toml"
    table.write_text('[search]\nfusion = "rrf"\nrrf_k = 5\ndepth = 7\nchunk_weight = 2.0\nmin_score = 0.0\n',
                     encoding="utf-8")
    return art, plain, table


CASES = [("hybrid", "cats sleep"), ("bm25doc", "cats sleep"), ("bm25", "tea OR river"), ("flat", "warm house"),
         ("hybrid", "TypeError: cats")]


@pytest.mark.parametrize("with_table", [False, True], ids=["no-table", "search-table"])
@pytest.mark.parametrize(("mode", "query"), CASES)
def test_every_front_end_ranks_the_same_chunks_with_the_same_scores(root, with_table, mode, query):
    art, plain, table = root
    config = table if with_table else plain
    flags = ("--artifacts", str(art), "--config", str(config), "--mode", mode, "-k", "5")

    code, out, err = run("search", query, "--json", *flags)
    assert code == 0, err
    by_search = [(h["chunk_id"], h["score"]) for h in json.loads(out)]

    code, out, err = run("pack", query, "--json", *flags)
    assert code == 0, err
    by_pack = [(h["chunk_id"], h["score"]) for h in json.loads(out)["ranked"]]

    settings = load_settings(config=config).with_flags(artifacts=art)
    mcp = Toolbox(settings).call("search", {"query": query, "mode": mode, "k": 5})
    by_mcp = [(h["chunk_id"], h["score"]) for h in mcp["results"]]

    request = app.build_request(settings, query, mode=mode, k=5)
    result = app.run_search(app.open_searcher(settings, request, note=None), request)
    by_app = [(h.chunk_id, h.score) for h in result.hits]

    assert by_search and by_search == by_pack == by_mcp == by_app
    if with_table and mode == "hybrid":  # the table really applies: rrf scores, not weighted ones
        plain_settings = load_settings(config=plain).with_flags(artifacts=art)
        other = app.run_search(app.open_searcher(plain_settings, request, note=None),
                               app.build_request(plain_settings, query, mode=mode, k=5))
        assert [h.score for h in other.hits] != [s for _, s in by_app]


def test_mcp_hits_carry_what_a_citation_needs(root):
    art, plain, _ = root
    settings = load_settings(config=plain).with_flags(artifacts=art)
    out = Toolbox(settings).call("search", {"query": "cats sleep", "mode": "bm25doc", "k": 3})
    assert out["mode"] == "bm25doc" and out["results"]
    for hit in out["results"]:
        assert hit["index"] == "docs" and hit["path"].endswith(hit["doc_id"].split("/", 1)[1])
        assert hit["status"] == "fresh" and hit["fresh"] is True
        assert 1 <= hit["start_line"] <= hit["end_line"]
    code, out_cli, _ = run("search", "cats sleep", "--json", "--mode", "bm25doc", "-k", "3", "--artifacts",
                               str(art), "--config", str(plain))
    cli_rows = json.loads(out_cli)
    keys = ("chunk_id", "path", "start_line", "end_line", "status", "fresh", "index")
    assert [{k: h[k] for k in keys} for h in cli_rows] == [{k: h[k] for k in keys} for h in out["results"]]
