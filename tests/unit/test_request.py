"""One request for every front end: built and checked once (ragtui.request), searched on one snapshot per
index, with the same rules and messages in the CLI, the MCP tools, the TUI's backend and the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtui import app
from ragtui.config import Settings, load_settings
from ragtui.core.errors import QueryError, UsageError
from ragtui.core.search.modes import MODE_TABLE, MODES
from ragtui.mcp.tools import TOOLS, Toolbox
from ragtui.request import MAX_K, build_request, search_options
from tests.helpers.cli import run


def ingest(docs: Path, art: Path, *extra: str) -> None:
    code, _, err = run("ingest", str(docs), "--artifacts", str(art), *extra)
    assert code == 0, err


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("request")
    docs = base / "docs"
    docs.mkdir()
    (docs / "rust.md").write_text("# Reading files\n\nCall std::fs::read_to_string to read a file whole.\n"
                                  "A TypeError: unsupported operand comes from adding str and int.\n", encoding="utf-8")
    (docs / "links.md").write_text("# Links\n\nThe library reference is at https://docs.python.org/3/library "
                                   "and foo::bar is a path.\n", encoding="utf-8")
    (docs / "k8s.md").write_text("# Clusters\n\n-kubernetes is how the flag was spelt; kubernetes runs pods.\n",
                                 encoding="utf-8")
    for i in range(6):
        (docs / f"filler{i}.md").write_text(f"# Filler {i}\n\nPods and files and reading number {i}.\n",
                                            encoding="utf-8")
    art = base / "art"
    ingest(docs, art)
    return docs, art


# -- queries people paste ---------------------------------------------------------------


@pytest.mark.parametrize("query", ["TypeError: unsupported operand", "https://docs.python.org/3/library",
                                   "std::fs::read_to_string", "foo::bar"])
def test_pasted_queries_search_as_text_in_every_front_end(index, query):
    _, art = index
    code, out, err = run("search", query, "--json", "--artifacts", str(art))
    assert code == 0, err
    hits = json.loads(out)
    assert hits and "unknown filter" not in err
    settings = Settings(artifacts=art)
    mcp = Toolbox(settings).call("search", {"query": query})
    assert [h["chunk_id"] for h in mcp["results"]] == [h["chunk_id"] for h in hits]
    # --strict (and the MCP argument) keep the errors for those who want them.
    code, _, err = run("search", query, "--strict", "--artifacts", str(art))
    assert code == 2 and "unknown filter" in err
    with pytest.raises(QueryError, match="unknown filter"):
        Toolbox(settings).call("search", {"query": query, "strict": True})


def test_a_malformed_query_is_searched_as_plain_text_with_a_note(index):
    _, art = index
    code, out, err = run("search", '"read_to_string', "--artifacts", str(art))
    assert code == 0 and "docs/rust.md" in out
    assert "note: searched as plain text: query column 1: this quote is never closed" in err


def test_a_query_beginning_with_a_dash_goes_after_double_dash(index):
    _, art = index
    code, _, err = run("search", "-kubernetes", "--artifacts", str(art))
    assert code == 2 and "a query that begins with '-' goes after --: ragtui search -- -kubernetes" in err
    code, out, err = run("search", "--artifacts", str(art), "--", "-kubernetes")
    assert code == 0 and "docs/k8s.md" in out, err
    assert "searched as plain text" in err  # only an exclusion: read as the text it is


# -- the same rules everywhere -----------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_an_empty_query_is_refused_everywhere(index, query):
    _, art = index
    for command in ("search", "pack", "ask"):
        code, out, err = run(command, query, "--artifacts", str(art))
        assert code == 2 and out == "" and "the query is empty" in err, (command, err)
    settings = Settings(artifacts=art)
    with pytest.raises(UsageError, match="the query is empty"):
        Toolbox(settings).call("search", {"query": query})
    with pytest.raises(UsageError, match="the query is empty"):
        Toolbox(settings).call("pack", {"query": query})
    retriever = app.open_index(app.resolve_index(settings, note=None), settings)
    with pytest.raises(UsageError, match="the query is empty"):
        retriever.search(query)
    from ragtui.core.search.multi import search_many

    with pytest.raises(UsageError, match="the query is empty"):
        search_many({"docs": retriever}, query)


@pytest.mark.parametrize(("mode", "bad", "good"), [("hybrid", 1.01, 1.0), ("hybrid", -0.1, 0.0), ("flat", 1.5, -1.0),
                                                   ("ivf", -2.0, 0.9), ("bm25", -1.0, 0.0), ("bm25doc", -0.5, 7.0)])
def test_a_floor_outside_what_the_mode_scores_is_refused(mode, bad, good):
    settings = Settings()
    spec = next(m for m in MODE_TABLE if m.name == mode)
    with pytest.raises(UsageError, match=f"--min-score {bad:g} is outside what {mode} scores: {spec.score_text}"):
        build_request(settings, "x", mode=mode, options={"min_score": bad})
    with pytest.raises(UsageError, match=f"min_score {bad:g} is outside"):  # MCP names the argument
        build_request(settings, "x", mode=mode, options={"min_score": bad}, style="name")
    assert build_request(settings, "x", mode=mode, options={"min_score": good}).params["min_score"] == good
    table = Settings(search={"min_score": bad})
    with pytest.raises(UsageError, match=r"\[search\] min_score"):
        search_options(table, mode)


def test_values_are_checked_with_one_set_of_ranges_and_messages():
    s = Settings()
    for k in (0, MAX_K + 1, True, "5"):
        with pytest.raises(UsageError, match=f"-k must be a whole number from 1 to {MAX_K}"):
            build_request(s, "x", k=k)
    with pytest.raises(UsageError, match="unknown mode 'bm52' \\(did you mean 'bm25'\\?\\)"):
        build_request(s, "x", mode="bm52")
    with pytest.raises(UsageError, match="--weight must be from 0 to 1"):
        build_request(s, "x", mode="hybrid", options={"weight": 2})
    with pytest.raises(UsageError, match="--nprobe applies to ivf search, not bm25"):
        build_request(s, "x", nprobe=3)
    with pytest.raises(UsageError, match="nprobe must be between 1"):
        build_request(s, "x", mode="ivf", nprobe=0, style="name")


def test_flags_over_the_search_table_over_the_defaults():
    table = Settings(search={"fusion": "rrf", "rrf_k": 9.0, "weight": 0.3, "mmr": 0.5})
    assert search_options(table, "hybrid") == {"fusion": "rrf", "rrf_k": 9.0, "mmr": 0.5}
    assert search_options(table, "hybrid", {"fusion": "weighted"}) == {"fusion": "weighted", "weight": 0.3, "mmr": 0.5}
    assert search_options(table, "bm25", {"mmr": 0.9}) == {"mmr": 0.9}
    assert build_request(table, "x", mode="hybrid", options={"rrf_k": 3}).params["rrf_k"] == 3.0


def test_explain_says_what_mmr_and_the_floor_did(index):
    _, art = index
    code, out, err = run("search", "pods files reading", "--explain", "--mmr", "0.1", "--min-score", "0.5",
                             "-k", "5", "--artifacts", str(art))
    assert code == 0, err
    assert "then: min_score 0.5: " in out
    assert "then: mmr 0.1: reordered the hits for diversity" in out
    code, out, _ = run("search", "pods files reading", "--explain", "--mmr", "0.1", "--json", "-k", "5",
                           "--artifacts", str(art))
    stages = json.loads(out)[0]["explain"]["stages"]
    assert any(s.startswith("mmr 0.1: reordered") for s in stages)


def test_the_result_carries_its_own_time_and_the_retriever_keeps_none(index):
    _, art = index
    settings = Settings(artifacts=art)
    retriever = app.open_index(app.resolve_index(settings, note=None), settings)
    hits = retriever.search("pods", mode="bm25")
    assert hits.seconds > 0 and not hasattr(retriever, "last_search_seconds")


# -- MCP at parity ------------------------------------------------------------------------


def test_the_mcp_schema_is_the_mode_table_and_the_option_descriptions():
    search = next(t for t in TOOLS if t.name == "search").input_schema["properties"]
    assert search["mode"]["enum"] == list(MODES) and "bm25doc" in search["mode"]["enum"]
    assert "LEXICAL share" in search["weight"]["description"]
    assert search["weight"]["minimum"] == 0.0 and search["weight"]["maximum"] == 1.0
    for name in ("fusion", "rrf_k", "depth", "lexical", "chunk_weight", "mmr", "min_score", "merge", "strict"):
        assert name in search


def test_mcp_checks_nprobe_as_the_cli_does(index):
    _, art = index
    settings = Settings(artifacts=art)
    with pytest.raises(UsageError, match=r"nprobe must be between 1 and \d+, the number of IVF lists"):
        Toolbox(settings).call("search", {"query": "pods", "mode": "ivf", "nprobe": 10**18})
    code, _, err = run("search", "pods", "--mode", "ivf", "--nprobe", str(10**18), "--artifacts", str(art))
    assert code == 2 and "--nprobe must be between 1 and" in err


def test_mcp_with_several_indexes_and_none_named_lists_them(index, tmp_path):
    docs, art = index
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("pods elsewhere\n", encoding="utf-8")
    ingest(other, art)
    try:
        settings = Settings(artifacts=art)
        app.remember_index(settings, "docs")  # the CLI's last-used index does not decide for an agent
        with pytest.raises(UsageError, match=r"several indexes under .* \(docs, other\): choose one with the index "
                                             "argument"):
            Toolbox(settings).call("search", {"query": "pods"})
        out = Toolbox(settings).call("search", {"query": "pods", "index": "other"})
        assert [h["index"] for h in out["results"]] == ["other"]
        both = Toolbox(settings).call("search", {"query": "pods", "index": "docs,other", "k": 20})
        assert {h["index"] for h in both["results"]} == {"docs", "other"}
    finally:
        code, _, err = run("rm", "other", "--artifacts", str(art), "--yes")
        assert code == 0, err


# -- one snapshot for the whole request -----------------------------------------------------


def test_pack_packs_the_generation_it_searched_even_after_a_reload(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "b.md").write_text("# Bananas\n\nBananas are yellow and sweet.\n", encoding="utf-8")
    art = tmp_path / "art"
    ingest(docs, art)
    settings = load_settings().with_flags(artifacts=art)
    request = build_request(settings, "bananas yellow", mode="bm25")
    searcher = app.open_searcher(settings, request, embedders=True, note=None)
    result = app.run_search(searcher, request)
    assert [h.chunk_id for h in result.hits] == ["docs/b.md#0"] and result.hits[0].row == 0
    # A new generation is published and the index reloaded between the search and the pack: the rows shift.
    (docs / "a.md").write_text("# Apples\n\nApples are red and crisp.\n", encoding="utf-8")
    ingest(docs, art)
    searcher.reload()
    assert searcher.only.data.records[0].chunk_id == "docs/a.md#0"
    packed = app.pack_result(result, 500)
    assert [cid for s in packed.snippets for cid in s.chunk_ids] == ["docs/b.md#0"]
    assert "Bananas are yellow" in packed.snippets[0].text


def test_hybrids_defaults_are_one_hook_every_front_end_asks(index, monkeypatch):
    """Hybrid's defaults depend on the index's embedder (fusion_fit): one function decides, for the CLI, MCP,
    the app layer and the TUI alike; a value given (or in [search]) wins over it."""
    import ragtui.request as request_module
    from ragtui.core.search.fusion_fit import fusion_defaults
    from ragtui.tui import backend

    _, art = index
    settings = Settings(artifacts=art)
    asked: list[str] = []

    def fitted(model: str, params) -> dict:
        asked.append(model)
        return {"lexical": "bm25doc", "fusion": "weighted", "weight": 0.1, **params}

    def scores(**options) -> list[float]:
        request = build_request(settings, "pods files", mode="hybrid", k=5, options=options)
        return [h.score for h in app.run_search(app.open_searcher(settings, request, note=None), request).hits]

    before = scores()
    model = app.open_index(app.resolve_index(settings, note=None), settings).meta.embedding_model
    assert model.startswith("wordllama") and scores(**fusion_defaults(model)) == before  # the table's row
    monkeypatch.setattr(request_module, "HYBRID_DEFAULTS", fitted)
    after = scores()
    assert after != before and asked == [model]
    assert scores(lexical="bm25doc", fusion="weighted", weight=0.1) == after
    assert scores(**fusion_defaults(model)) == before
    mcp = Toolbox(settings).call("search", {"query": "pods files", "mode": "hybrid", "k": 5})
    assert [h["score"] for h in mcp["results"]] == after
    retriever = app.open_index(app.resolve_index(settings, note=None), settings)
    retriever.embedder = app.embedder_for(settings, retriever.meta)
    tui = backend.run_search(retriever, backend.search_request(settings, 1, "pods files", "hybrid", 5))
    assert [h.score for h in tui.hits] == after
    assert backend.ranking_text(backend.search_params(settings, "hybrid"), model) == "weighted 0.1 · bm25doc"


def test_several_indexes_get_the_fit_of_the_embedder_they_share_else_the_unknown_one():
    from types import SimpleNamespace

    from ragtui.core.search.fusion_fit import FITTED, fusion_defaults
    from ragtui.request import pooled_params

    bge, wordllama = (m for m in sorted(FITTED) if m.startswith(("bge", "wordllama")))
    same = [SimpleNamespace(embedding_model=bge)] * 2
    mixed = [SimpleNamespace(embedding_model=bge), SimpleNamespace(embedding_model=wordllama)]
    assert pooled_params("hybrid", {}, same) == fusion_defaults(bge) != fusion_defaults(wordllama)
    assert pooled_params("hybrid", {}, mixed) == fusion_defaults("")
    assert pooled_params("hybrid", {"fusion": "rrf", "rrf_k": 7.0}, mixed)["rrf_k"] == 7.0
    assert pooled_params("bm25", {"mmr": 0.5}, mixed) == {"mmr": 0.5}
