"""The index chooses its embedder: meta.json's model names the embedder that made it (the embedded default, an
ONNX preset, or the HTTP embedder the user's config names for that model), so search, pack, MCP and the TUI
work on any index with no embedder setting, and indexes of different models search together, each with its
own embedder, merged by rank. Called in-process; the environment is the test's own (conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtui import app
from ragtui.config import Settings, load_settings
from ragtui.core.errors import ModelMismatchError
from ragtui.mcp.tools import Toolbox
from tests.helpers.cli import run
from tests.helpers.embed_server import EmbedServer
from tests.helpers.onnx_models import require_onnx


def _folder(base: Path, name: str, texts: dict[str, str]) -> Path:
    folder = base / name
    folder.mkdir()
    for file, text in texts.items():
        (folder / file).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    """An index built with the ONNX tier (bge-small) and one with the embedded default, under one root."""
    require_onnx()
    base = tmp_path_factory.mktemp("two-models")
    art = base / "art"
    onnx = _folder(base, "papers", {"paris.md": "# Paris\n\nParis is the capital of France, on the Seine.\n",
                                    "tea.md": "# Tea\n\nGreen tea is steeped for two minutes.\n"})
    plain = _folder(base, "notes", {"rome.md": "# Rome\n\nRome is the capital of Italy, on the Tiber.\n",
                                    "bikes.md": "# Bikes\n\nOil the chain of a bicycle every month.\n"})
    code, _, err = run("ingest", str(onnx), "--artifacts", str(art), env={"RAGTUI_EMBEDDER": "onnx:bge-small"})
    assert code == 0, err
    code, _, err = run("ingest", str(plain), "--artifacts", str(art))
    assert code == 0, err
    meta = json.loads((art / "rag" / "papers" / "meta.json").read_text())
    assert meta["embedding_model"].startswith("bge-small-en-v1.5-int8@") and meta["dim"] == 384
    return art


@pytest.mark.parametrize("mode", ["flat", "hybrid", "ivf"])
def test_each_index_alone_is_searched_with_its_own_model_and_no_setting(two_models, mode):
    art = two_models
    for index, top in (("papers", "papers/paris.md#0"), ("notes", "notes/rome.md#0")):
        code, out, err = run("search", "capital city", "--json", "--mode", mode, "--index", index,
                                 "--artifacts", str(art))
        assert code == 0, err
        assert json.loads(out)[0]["chunk_id"] == top
        mcp = Toolbox(Settings(artifacts=art)).call("search", {"query": "capital city", "mode": mode, "index": index})
        assert [h["chunk_id"] for h in mcp["results"]] == [h["chunk_id"] for h in json.loads(out)]
    code, out, err = run("pack", "capital city", "--json", "--index", "papers", "--artifacts", str(art))
    assert code == 0 and json.loads(out)["tokenizer"].startswith("bge-small"), err


def test_indexes_of_different_models_search_together_merged_by_rank(two_models):
    art = two_models
    code, out, err = run("search", "capital city", "--all", "--mode", "hybrid", "--json", "-k", "4",
                             "--artifacts", str(art))
    assert code == 0, err
    hits = json.loads(out)
    assert {h["index"] for h in hits} == {"papers", "notes"}
    assert {h["chunk_id"] for h in hits[:2]} == {"papers/paris.md#0", "notes/rome.md#0"}
    assert "different embedding models" in err and "merged by rank" in err
    settings = load_settings().with_flags(artifacts=art, index="papers,notes")
    request = app.build_request(settings, "capital city", mode="flat", k=4)
    result = app.run_search(app.open_searcher(settings, request, note=None), request)
    searched = {i: r.embedder.model for i, r in result.snapshots.items()}
    assert searched["papers"].startswith("bge-small") and searched["notes"].startswith("wordllama")


async def test_the_tui_opens_an_onnx_index_with_its_own_embedder(two_models):
    from ragtui.tui.history import QueryHistory
    from ragtui.tui.ragtui_app import create_app
    from tests.tui import ready, search, settled

    app_ = create_app(Settings(artifacts=two_models, index="papers"), debounce=0.0, poll_seconds=0.1,
                      history=QueryHistory(None))
    async with app_.run_test() as pilot:
        await ready(pilot)  # the index opens, then its own embedder loads (no factory, no setting): vectors on
        assert app_.embedder.model.startswith("bge-small") and app_.retriever.embedder is app_.embedder
        await pilot.press("f1")
        await search(pilot, "capital city")
        await settled(pilot)
        assert app_.results.request.mode == "flat" and app_.results.hits[0].chunk_id == "papers/paris.md#0"


def test_a_model_no_setting_names_says_which_setting_to_add(tmp_path):
    docs = _folder(tmp_path, "docs", {"a.md": "# A\n\nApples are red.\n"})
    art = tmp_path / "art"
    with EmbedServer(model="served-embedder") as srv:
        config = tmp_path / "mine.toml"
        config.write_text(f'[embedder]\nkind = "http"\nbase_url = "{srv.url}"\nmodel = "served-embedder"\n'
                          'tokenize_style = "native"\nretries = 0\n', encoding="utf-8")
        code, _, err = run("--config", str(config), "ingest", str(docs), "--artifacts", str(art))
        assert code == 0, err
        # With no setting for that model: refused before any request, naming the setting to add.
        code, out, err = run("search", "apples", "--mode", "flat", "--artifacts", str(art))
        assert code == 2 and out == ""
        assert "'served-embedder'" in err and 'kind = "http", model = "served-embedder"' in err
        with pytest.raises(ModelMismatchError, match="RAGTUI_EMBED_MODEL=served-embedder"):
            app.embedder_for(Settings(artifacts=art), app.open_index(art / "rag" / "docs", Settings(artifacts=art)).meta)
        # The user's config names an HTTP embedder for that model: it is the one used.
        code, out, err = run("--config", str(config), "search", "apples", "--mode", "flat", "--artifacts", str(art))
        assert code == 0 and "docs/a.md#0" in out, err
        # BM25 needs no embedder at all.
        code, out, err = run("search", "apples", "--artifacts", str(art))
        assert code == 0 and "docs/a.md#0" in out, err
