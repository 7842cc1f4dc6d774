"""The HTTP embedder against a real llama-cpp-python server (SmolLM2-135M): pooling, spans by decoding, an ingest.

Skipped when llama_cpp or the model is not installed, unless RAGTUI_REQUIRE_LLAMA
is set (tests/helpers/llama_embed_server.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from ragtui.core.embedders.http import HTTPEmbedder
from ragtui.core.errors import EmbeddingError
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import sync
from tests.helpers.llama_embed_server import llama_embed_server, require_llama

TEXTS = ["Hello world", "naïve café — «quotes» 日本語", "emoji 😀 ok", "a <s> b </s> <|im_start|>", "\ttab  x "]


@pytest.fixture(scope="module")
def pooled_url():
    gguf = require_llama()
    with llama_embed_server(gguf) as url:
        yield url


def test_embeddings_and_spans_from_a_pooled_server(pooled_url):
    with HTTPEmbedder(pooled_url, "smollm2-135m", tokenize_style="llama-cpp-python") as e:
        vecs = e.embed(TEXTS)
        assert vecs.shape == (len(TEXTS), 576) and e.dim == 576
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        assert not np.allclose(vecs[0], vecs[1])
        for text in TEXTS:
            spans = e.tokenizer.spans(text)
            assert len(spans) == e.tokenizer.count(text) > 0
            assert spans[0][0] == 0 and spans[-1][1] == len(text)
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        # Each non-empty span is the text of its token, as the server decodes it.
        spans = e.tokenizer.spans("Hello world")
        assert ["Hello world"[s:t] for s, t in spans] == ["Hello", " world"]


def test_an_ingest_with_the_defaults(pooled_url, tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    folder.mkdir()
    for i in range(6):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n" + "Cats sit on mats and dogs chase them. " * (10 + 5 * i),
                                         encoding="utf-8")
    with HTTPEmbedder(pooled_url, "smollm2-135m", tokenize_style="llama-cpp-python") as e:
        report = sync(folder, artifacts=art, embedder=e, max_tokens=128, overlap=16)
        assert report.published and 6 < report.chunks_embedded <= report.chunks_total
        assert e.pace.timeouts == 0
    data = read_index(art / "rag" / "docs")
    assert data.meta.dim == 576 and data.meta.embedding_model == "smollm2-135m"
    # Nothing changed: no request at all (a stopped server would do).
    with HTTPEmbedder("http://127.0.0.1:9", "smollm2-135m", tokenize_style="llama-cpp-python", retries=0) as e:
        assert not sync(folder, artifacts=art, embedder=e, max_tokens=128, overlap=16).published


def test_a_server_without_pooling_is_named_with_the_fix():
    gguf = require_llama()
    with llama_embed_server(gguf, pooled=False) as url, HTTPEmbedder(url, "smollm2-135m", retries=0) as e, \
            pytest.raises(EmbeddingError) as info:
        e.embed(["Hello world"])
    msg = str(info.value)
    assert "one per token" in msg and "--pooling mean" in msg and "llama.pooling_type=int:1" in msg


def test_the_cli_ingests_and_searches_with_the_server(pooled_url, tmp_path):
    from tests.files import write
    from tests.helpers.cli import run as ragtui

    docs = tmp_path / "project" / "docs"
    write(docs / "cats.md", "Cats sit on mats and purr.\n")
    write(docs / "ships.md", "Ships sail across the sea to distant harbours.\n")
    config = write(tmp_path / "mine.toml", f'[embedder]\nkind = "http"\nbase_url = "{pooled_url}"\n'
                                           'model = "smollm2-135m"\ntokenize_style = "llama-cpp-python"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    art = tmp_path / "art"
    r = ragtui("--config", str(config), "ingest", "docs", "--artifacts", str(art), env=env, cwd=docs.parent)
    assert r.returncode == 0 and "2 added" in r.stdout, r.stderr
    s = ragtui("--config", str(config), "search", "sailing boats", "--mode", "flat", "--artifacts", str(art),
               env=env, cwd=docs.parent)
    # SmolLM2 is a chat model, not a trained embedder: what is checked is that the query is embedded
    # by the server and both documents come back ranked, not which comes first.
    assert s.returncode == 0 and "ships.md" in s.stdout and "cats.md" in s.stdout, s.stdout + s.stderr
