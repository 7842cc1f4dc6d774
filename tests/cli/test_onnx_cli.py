"""The ONNX tier through the `ragtui` command: ingest, search --rerank, eval --rerank, config trust,
and an interrupted ingest that resumes without embedding again (real models of the onnx extra)."""

from __future__ import annotations

import json

import pytest

from ragtui.config import load_settings
from ragtui.core.errors import UsageError
from tests.helpers.cli import run as ragtui
from tests.helpers.onnx_models import require_onnx

DOCS = {
    "paris.md": "# Paris\n\nParis is the capital and largest city of France, on the Seine.\n",
    "bread.md": "# Bread\n\nBread is baked from flour, water, yeast and a pinch of salt.\n",
    "berlin.md": "# Berlin\n\nBerlin is the capital of Germany and its largest city.\n",
    "tides.md": "# Tides\n\nTides are the rise and fall of the sea caused by the Moon's gravity.\n",
}


@pytest.fixture(scope="module")
def onnx_index(tmp_path_factory):
    require_onnx()
    base = tmp_path_factory.mktemp("onnxcli")
    docs = base / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    env = {"RAGTUI_EMBEDDER": "onnx:bge-small", "XDG_CONFIG_HOME": str(base / "xdg"), "HF_HUB_OFFLINE": "1"}
    art = base / "art"
    result = ragtui("--artifacts", str(art), "ingest", str(docs), "--json", env=env, cwd=base)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["chunks"]["embedded"] == len(DOCS)
    return base, art, env


def test_ingest_records_the_model_and_search_uses_it_whatever_is_configured(onnx_index):
    base, art, env = onnx_index
    meta = json.loads((art / "rag" / "docs" / "meta.json").read_text())
    assert meta["embedding_model"].startswith("bge-small-en-v1.5-int8@") and meta["dim"] == 384
    other = ragtui("--artifacts", str(art), "search", "capital", "--mode", "flat", "--json",
                   env={**env, "RAGTUI_EMBEDDER": "wordllama"}, cwd=base)
    assert other.returncode == 0 and json.loads(other.stdout), other.stderr


def test_search_with_rerank(onnx_index):
    base, art, env = onnx_index
    result = ragtui("--artifacts", str(art), "search", "what is the capital of France", "--mode", "hybrid",
                    "-k", "3", "--rerank", "20", "--json", env=env, cwd=base)
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert hits[0]["doc_id"] == "docs/paris.md"
    assert all(h["reranked"] for h in hits)  # 4 candidates, all scored
    assert sorted(h["first_stage_rank"] for h in hits) == sorted(set(h["first_stage_rank"] for h in hits))
    text = ragtui("--artifacts", str(art), "search", "capital of France", "--rerank", "2", env=env, cwd=base)
    assert text.returncode == 0 and "reranked 2 in" in text.stderr


@pytest.mark.parametrize(("flags", "words"), [
    (["--rerank", "-1"], "--rerank must be 0"),
    (["--rerank", "3", "--rerank-budget-ms", "-5"], "--rerank-budget-ms must be"),
    (["--rerank", "3", "--rerank-model", "no-such-model"], "unknown preset 'no-such-model'"),
])
def test_bad_rerank_flags_exit_2(onnx_index, flags, words):
    base, art, env = onnx_index
    result = ragtui("--artifacts", str(art), "search", "capital", *flags, env=env, cwd=base)
    assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr


def test_eval_measures_each_mode_with_and_without_rerank(onnx_index):
    base, art, env = onnx_index
    ds = base / "tiny-beir"
    (ds / "qrels").mkdir(parents=True)
    corpus = [{"_id": n[:-3], "title": "", "text": t} for n, t in DOCS.items()]
    (ds / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    queries = [{"_id": "q1", "text": "capital of France"}, {"_id": "q2", "text": "why does the sea rise"}]
    (ds / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tparis\t1\nq2\ttides\t1\n")
    out = base / "report.json"
    result = ragtui("--artifacts", str(art), "eval", str(ds), "--modes", "bm25,flat", "-k", "3", "--rerank", "4",
                    "--json", str(out), "--quiet", env=env, cwd=base)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert list(report["modes"]) == ["bm25", "flat", "bm25+rerank", "flat+rerank"]
    params = report["modes"]["flat+rerank"]["params"]
    assert params["rerank"] == 4 and params["reranker"].startswith("ms-marco-MiniLM-L-12-v2-int8@")
    assert report["modes"]["flat+rerank"]["metrics"]["mrr"] == 1.0
    compare = ragtui("eval", "--compare", f"{out}:bm25", f"{out}:flat+rerank", env=env, cwd=base)
    assert compare.returncode == 0, compare.stderr
    assert "flat+rerank" in compare.stdout


def test_ingest_warns_when_chunks_are_longer_than_the_model_reads(onnx_index):
    base, art, env = onnx_index
    result = ragtui("--artifacts", str(art), "ingest", str(base / "docs"), "--max-tokens", "600", "--index", "long",
                    env=env, cwd=base)
    assert result.returncode == 0, result.stderr
    assert "note: chunks of up to 600 tokens are longer than the 510" in result.stderr


def test_an_interrupted_ingest_resumes_without_embedding_again(tmp_path):
    """The first run is stopped (Ctrl-C) after its first batch; the second embeds only the rest."""
    require_onnx()
    from ragtui.core.embedders import make_embedder
    from ragtui.core.ingest import sync as sync_module
    from ragtui.core.ingest.assemble import EMBED_BATCH

    docs = tmp_path / "docs"
    docs.mkdir()
    n_docs = EMBED_BATCH + 20
    for i in range(n_docs):
        (docs / f"n{i:03d}.txt").write_text(f"note {i}: item {i * 7 % 13} of list {i % 5}\n", encoding="utf-8")
    real = make_embedder("onnx:bge-small")

    class StopsAfterOneBatch:
        """The real model, and a Ctrl-C arriving while the second batch is being embedded."""

        model, dim, tokenizer = real.model, real.dim, real.tokenizer
        calls = 0

        def embed(self, texts):
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt
            return real.embed(texts)

        def close(self):
            pass

    with pytest.raises(KeyboardInterrupt):
        sync_module.sync(docs, artifacts=tmp_path / "art", embedder=StopsAfterOneBatch(), index_id="docs")
    report = sync_module.sync(docs, artifacts=tmp_path / "art", embedder=real, index_id="docs")
    assert report.chunks_total == n_docs
    assert report.chunks_embedded == n_docs - EMBED_BATCH  # the journal's batch was not redone
    from ragtui.core.search.retriever import Retriever

    r = Retriever.open(report.index_path, embedder=real)
    assert r.search("note 3: item 8 of list 3", mode="flat", k=1)[0].doc_id == "docs/n003.txt"


# -- which config files may name a model folder -------------------------------------------------


@pytest.fixture()
def project(tmp_path, monkeypatch):
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return folder


@pytest.mark.parametrize("text", [
    "[embedder]\nkind = 'onnx:/opt/models/evil'\n",
    "[embedder]\nkind = 'onnx:./models/x'\n",
    "[embedder]\nkind = 'onnx'\nmodel_dir = '/opt/models/evil'\n",
    "[rerank]\nmodel_dir = '/opt/models/evil'\n",
])
def test_an_untrusted_project_config_may_not_name_a_model_folder(project, text):
    (project / "ragtui.toml").write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match="may not choose"):
        load_settings(environ={})


def test_presets_may_come_from_any_config(project):
    (project / "ragtui.toml").write_text("[embedder]\nkind = 'onnx:bge-small'\n[rerank]\nn = 20\nmodel = "
                                         "'ms-marco-minilm'\nbudget_ms = 300\n", encoding="utf-8")
    s = load_settings(environ={})
    assert s.embedder == {"kind": "onnx:bge-small"}
    assert s.rerank == {"n": 20, "model": "ms-marco-minilm", "budget_ms": 300}
    trusted = load_settings(environ={"RAGTUI_EMBEDDER": "onnx:/opt/models/mine"})  # the environment is the user's
    assert trusted.embedder == {"kind": "onnx:/opt/models/mine"}
