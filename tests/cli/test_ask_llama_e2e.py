"""End to end: `ragtui ask` against a real chat model, llama.cpp's server with SmolLM2-135M.

This checks the plumbing, not the model's wisdom: the answer streams in pieces, the server's usage
is counted, the citations the model writes are parsed and each gets a verdict, the exit code
follows the verdicts, and the HyDE passage is cached. `make e2e-llm` runs this file alone; it skips
without llama-cpp-python unless RAGTUI_REQUIRE_LLAMA is set (CI), where it fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli import run as ragtui
from tests.helpers.llama_server import MODEL_ALIAS, llama_server

DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo"
QUESTION = "Does ragtui need a network connection?"
VERDICTS = {"verified", "stale", "not-in-context", "unresolvable"}


@pytest.fixture(scope="module")
def server():
    with llama_server() as url:
        yield url


@pytest.fixture(scope="module")
def setup(server, tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    docs = base / "demo"
    shutil.copytree(DEMO, docs)
    art = base / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    config = base / "ragtui.toml"
    # A short answer keeps the test quick on 2 cores; temperature 0 keeps it the same run to run.
    config.write_text(f'[llm]\nbase_url = "{server}"\nmodel = "{MODEL_ALIAS}"\nmax_tokens = 48\n'
                      'temperature = 0.0\ntimeout = 300\n', encoding="utf-8")
    return art, config, base


def test_a_streamed_answer_from_the_real_server(server):
    from ragtui.core.answer.llm import ChatClient

    pieces: list[str] = []
    with ChatClient(server, MODEL_ALIAS, max_tokens=24, timeout=300) as client:
        answer = client.chat([{"role": "user", "content": "Say hello."}], on_delta=pieces.append)
        whole = client.chat([{"role": "user", "content": "Say hello."}])
    assert answer.streamed and len(pieces) > 1 and "".join(pieces) == answer.text
    assert answer.finish_reason in ("stop", "length") and answer.first_token_seconds is not None
    # Not streamed, the server reports its usage (llama-cpp-python sends none while streaming).
    assert not whole.streamed and whole.prompt_tokens and whole.prompt_tokens > 0 and whole.completion_tokens


def test_ask_counts_usage_and_classifies_every_citation(setup):
    art, config, base = setup
    r = ragtui("ask", QUESTION, "--artifacts", str(art), "--config", str(config), "--mode", "bm25", "-b", "300",
               "--json", env={"XDG_CACHE_HOME": str(base / "cache")})
    assert r.returncode in (0, 1), r.stderr
    out = json.loads(r.stdout)
    stats = out["stats"]
    assert stats["input_tokens"] > 0 and stats["output_tokens"] > 0 and stats["usage_reported"]
    assert stats["chat_calls"] in (1, 2) and set(stats["seconds"]) >= {"retrieve", "pack", "chat", "check"}
    assert 0 < out["context"]["used_tokens"] <= 300
    from ragtui.core.citations import parse_labels

    assert [c["label"] for c in out["citations"]] == list(dict.fromkeys(x.text for x in parse_labels(out["answer"])))
    assert all(c["verdict"] in VERDICTS for c in out["citations"])
    assert r.returncode == (0 if out["all_verified"] else 1)
    if not out["citations"]:
        assert "cites no source" in r.stderr


def test_ask_streams_to_the_terminal_and_hyde_is_cached(setup):
    art, config, base = setup
    env = {"XDG_CACHE_HOME": str(base / "hyde-cache")}
    args = ("ask", QUESTION, "--artifacts", str(art), "--config", str(config), "--mode", "bm25", "-b", "300",
            "--hyde", "--stream", "--allow-unverified")
    first = ragtui(*args, env=env)
    assert first.returncode == 0, first.stderr
    assert "Citations:" in first.stdout and "Stats: mode bm25+hyde" in first.stderr
    assert "first token" in first.stderr
    second = ragtui(*args, env=env)
    assert second.returncode == 0 and "HyDE passage taken from the cache" in second.stderr
    calls = [int(line.split("chat calls ")[1].split()[0]) for line in (first.stderr + second.stderr).splitlines()
             if "chat calls" in line]
    assert calls[1] == calls[0] - 1  # the repeat made no HyDE call
    assert len(list((base / "hyde-cache" / "ragtui" / "hyde").glob("*.json"))) == 1
