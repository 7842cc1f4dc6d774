"""`ragtui mcp` as a subprocess, driven by the official MCP SDK's own stdio client."""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager

import pytest

from tests.helpers.cli import ragtui_exe
from tests.helpers.cli import run as ragtui

CATS = "# Cats\n\nCats are small domesticated carnivorous mammals.\nThey sleep a lot.\n"
DOGS = "# Dogs\n\nDogs are loyal companions and good at fetching sticks.\n"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcp")
    docs = base / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text(CATS, encoding="utf-8")
    (docs / "dogs.md").write_text(DOGS, encoding="utf-8")
    art = base / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    return docs, art


@asynccontextmanager
async def session(*args: str):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command, *prefix = ragtui_exe()  # the ragtui beside this Python, as every other process test runs it
    params = StdioServerParameters(command=command, args=[*prefix, "mcp", *args], env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s


async def call(s, name, arguments):
    result = await s.call_tool(name, arguments)
    text = result.content[0].text
    return result.is_error, (text if result.is_error else json.loads(text))


async def test_tools_are_listed_with_strict_schemas(indexed):
    _, art = indexed
    async with session("--artifacts", str(art)) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert sorted(tools) == ["get", "list_indexes", "pack", "search"]
    assert all(t.input_schema["additionalProperties"] is False for t in tools.values())
    assert tools["search"].input_schema["required"] == ["query"]
    assert "fusion" in tools["search"].input_schema["properties"]


async def test_search_get_pack_and_list(indexed):
    _, art = indexed
    async with session("--artifacts", str(art)) as s:
        err, out = await call(s, "search", {"query": "cats mammals", "k": 1})
        assert not err and out["index"] == "docs"
        assert [r["chunk_id"] for r in out["results"]] == ["docs/cats.md#0"]
        err, out = await call(s, "search", {"query": "cats", "mode": "hybrid", "fusion": "rrf", "k": 2})
        assert not err and len(out["results"]) == 2

        err, out = await call(s, "get", {"ref": "docs/cats.md#0"})
        assert not err and out["lines"] == "L1-4" and out["status"] == "fresh" and out["text"] == CATS.strip()
        err, out = await call(s, "get", {"ref": "docs/cats.md:L3-3"})
        assert not err and out["text"] == "Cats are small domesticated carnivorous mammals."
        assert out["chunks"] == [{"chunk_id": "docs/cats.md#0", "status": "fresh", "lines": "L1-4"}]

        err, out = await call(s, "pack", {"query": "dogs sticks", "budget": 30, "mode": "bm25"})
        assert not err and 0 < out["used_tokens"] <= 30 and out["snippets"][0]["label"] == "docs/dogs.md:L1-3"

        err, out = await call(s, "list_indexes", {})
        assert not err and [i["index_id"] for i in out["indexes"]] == ["docs"]
        assert out["indexes"][0]["n_chunks"] == 2


BAD = [
    ("search", {"qeury": "cats"}, "unknown argument 'qeury' (did you mean 'query'?)"),
    ("search", {"query": "cats", "nprob": 3}, "did you mean 'nprobe'?"),
    ("search", {"query": "cats", "k": "5"}, "k must be an integer"),
    ("search", {"query": "cats", "k": True}, "k must be an integer"),
    ("search", {"query": "cats", "k": 0}, "k must be a whole number from 1 to 1000 (got 0)"),
    ("search", {"query": "cats", "mode": "bm52"}, "did you mean 'bm25'?"),
    ("search", {"query": "cats", "nprobe": 3}, "nprobe applies to ivf search, not bm25"),
    ("search", {}, "the argument 'query' is required"),
    ("get", {"ref": "docs/nope.md#0"}, "no chunk_id 'docs/nope.md#0'"),
    ("get", {"ref": "docs/cats.md:L90-99"}, "no chunk of index 'docs' lies on docs/cats.md:L90-99"),
    ("get", {"ref": "not a ref"}, "malformed reference"),
    ("get", {"ref": "docs/cats.md:L0-2"}, "lines are numbered from 1"),
    ("pack", {"query": "cats", "budget": 0}, "the budget must be a whole number of tokens from 1"),
    ("pack", {"query": "cats", "budjet": 10}, "did you mean 'budget'?"),
    ("list_indexes", {"all": True}, "list_indexes takes no arguments"),
    ("serch", {"query": "cats"}, "unknown tool 'serch' (did you mean 'search'?)"),
    ("search", {"query": "cats", "index": "other"}, "no index 'other'"),
]


async def test_bad_arguments_are_errors_and_the_server_goes_on(indexed):
    _, art = indexed
    async with session("--artifacts", str(art)) as s:  # one server for every case: each must leave it serving
        for name, arguments, message in BAD:
            err, text = await call(s, name, arguments)
            assert err and message in text, (name, arguments, text)
            assert "Traceback" not in text and "\n" not in text
            err, out = await call(s, "search", {"query": "dogs"})
            assert not err and out["results"]


async def test_a_publish_is_seen_by_the_next_call(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("apples are red\n", encoding="utf-8")
    art = tmp_path / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    async with session("--artifacts", str(art)) as s:
        err, out = await call(s, "search", {"query": "bananas"})
        assert not err and out["results"] == []
        (docs / "b.md").write_text("bananas are yellow\n", encoding="utf-8")
        assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
        err, out = await call(s, "search", {"query": "bananas"})
        assert not err and [r["chunk_id"] for r in out["results"]] == ["docs/b.md#0"]


async def test_no_index_is_a_tool_error(tmp_path):
    async with session("--artifacts", str(tmp_path / "empty")) as s:
        err, text = await call(s, "search", {"query": "x"})
        assert err and "no index under" in text
        err, out = await call(s, "list_indexes", {})
        assert not err and out["indexes"] == []
