"""`ragtui pack` and `ragtui ask` in-process, against a real index and a loopback chat server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.chat_server import ChatServer, Fault
from tests.helpers.cli import run as ragtui

CATS = "# Cats\n\nCats are small domesticated carnivorous mammals.\nThey sleep a lot.\n"
DOGS = "# Dogs\n\nDogs are loyal companions and good at fetching sticks.\n"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("answer")
    docs = base / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text(CATS, encoding="utf-8")
    (docs / "dogs.md").write_text(DOGS, encoding="utf-8")
    art = base / "art"
    result = ragtui("ingest", str(docs), "--artifacts", str(art))
    assert result.returncode == 0, result.stderr
    return docs, art


@pytest.fixture
def chat():
    with ChatServer(model="m") as server:
        yield server


def llm_env(server, **extra):
    return {"RAGTUI_LLM_URL": server.url, "RAGTUI_LLM_MODEL": "m", **extra}


# -- pack ------------------------------------------------------------------------------------------


def test_pack_json(indexed):
    _, art = indexed
    r = ragtui("pack", "cats mammals", "--artifacts", str(art), "--json", "-b", "500", "--mode", "bm25")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["budget"] == 500 and 0 < out["used_tokens"] <= 500
    first = out["snippets"][0]
    assert first["path"] == "docs/cats.md" and first["lines"] == "L1-4" and first["chunk_ids"] == ["docs/cats.md#0"]
    assert first["why"]["mode"] == "bm25" and first["status"] == "fresh" and first["text"] == CATS.strip()
    assert len(out["fingerprint"]) == 64
    again = json.loads(ragtui("pack", "cats mammals", "--artifacts", str(art), "--json", "-b", "500",
                              "--mode", "bm25").stdout)
    assert again["fingerprint"] == out["fingerprint"]
    assert "tokens" in r.stderr and "to pack" in r.stderr


def test_pack_markdown_to_a_file(indexed, tmp_path):
    _, art = indexed
    target = tmp_path / "context.md"
    r = ragtui("pack", "dogs sticks", "--artifacts", str(art), "--markdown", "-o", str(target), "--mode", "bm25")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    text = target.read_text(encoding="utf-8")
    assert "[docs/dogs.md:L1-3]\n# Dogs" in text


def test_pack_bad_input(indexed, tmp_path):
    _, art = indexed
    r = ragtui("pack", "cats", "--artifacts", str(art), "-b", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "budget" in r.stderr
    r = ragtui("pack", "cats", "--artifacts", str(art), "--mode", "bm52")
    assert r.returncode == 2 and "did you mean 'bm25'" in r.stderr
    r = ragtui("pack", "cats", "--artifacts", str(tmp_path / "none"))
    assert r.returncode == 2 and "no index" in r.stderr
    r = ragtui("pack", "zzzqqq", "--artifacts", str(art), "--mode", "bm25")
    assert r.returncode == 1 and "0 snippet(s)" in r.stderr
    r = ragtui("pack", "cats", "--artifacts", str(art), "-o", str(tmp_path / "no" / "such" / "dir" / "f.md"))
    assert r.returncode == 3 and "cannot write" in r.stderr


# -- ask -------------------------------------------------------------------------------------------


def test_ask_verified(indexed, chat):
    _, art = indexed
    r = ragtui("ask", "what are cats", "--artifacts", str(art), "--mode", "bm25", env=llm_env(chat))
    assert r.returncode == 0, r.stderr
    assert "The sources say so [docs/cats.md:L1-4]." in r.stdout
    assert "ok              [docs/cats.md:L1-4]  verified: source 1" in r.stdout
    assert "Stats: mode bm25 · chat calls 1 · tokens in" in r.stderr and "seconds: retrieve" in r.stderr
    body = chat.chat_bodies()[0]
    assert "Source 1: [docs/cats.md:L1-4]\n# Cats" in body["messages"][-1]["content"]
    assert body["messages"][-1]["content"].endswith("Question: what are cats")


def test_ask_json_and_streamed(indexed, chat):
    _, art = indexed
    r = ragtui("ask", "what are cats", "--artifacts", str(art), "--mode", "bm25", "--json", env=llm_env(chat))
    out = json.loads(r.stdout)
    assert out["all_verified"] and out["citations"][0]["verdict"] == "verified"
    assert out["stats"]["chat_calls"] == 1 and out["stats"]["input_tokens"] > 0
    assert set(out["stats"]["seconds"]) == {"retrieve", "pack", "chat", "check"}
    r = ragtui("ask", "what are cats", "--artifacts", str(art), "--mode", "bm25", "--stream", env=llm_env(chat))
    assert r.returncode == 0 and "The sources say so [docs/cats.md:L1-4]." in r.stdout
    assert chat.chat_bodies()[-1]["stream"] is True


@pytest.mark.parametrize("reply, verdict", [
    ("Cats are birds [docs/birds.md:L1-9].", "unresolvable"),
    ("Dogs fetch [docs/dogs.md:L3-3].", "not-in-context"),
    ("Dogs fetch [docs/dogs.md#0].", "not-in-context"),
    ("Cats sleep [docs/cats.md:L90-95].", "unresolvable"),
])
def test_ask_a_citation_that_fails_the_check_exits_1(indexed, chat, reply, verdict):
    _, art = indexed
    chat.reply = reply
    r = ragtui("ask", "cats mammals", "--artifacts", str(art), "--mode", "bm25", "-b", "40", "--json",
               env=llm_env(chat))
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert [c["verdict"] for c in out["citations"]] == [verdict]
    assert "failed the check" in r.stderr
    r = ragtui("ask", "cats mammals", "--artifacts", str(art), "--mode", "bm25", "-b", "40",
               "--allow-unverified", env=llm_env(chat))
    assert r.returncode == 0 and verdict in r.stdout


def test_ask_stale_when_the_source_changed(tmp_path, chat):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text(CATS, encoding="utf-8")
    assert ragtui("ingest", str(docs), "--artifacts", str(tmp_path / "art")).returncode == 0
    (docs / "cats.md").write_text(CATS.replace("small", "large"), encoding="utf-8")
    r = ragtui("ask", "cats", "--artifacts", str(tmp_path / "art"), "--mode", "bm25", "--json", env=llm_env(chat))
    assert r.returncode == 1
    check = json.loads(r.stdout)["citations"][0]
    assert check["label"] == "docs/cats.md#0" and check["verdict"] == "stale" and "changed" in check["reason"]


def test_an_answer_that_cites_nothing(indexed, chat):
    _, art = indexed
    chat.reply = "Cats are mammals."
    r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25", env=llm_env(chat))
    assert r.returncode == 1
    assert "cites no source" in r.stderr and "asking once more" in r.stderr
    assert len(chat.chat_bodies()) == 2  # the answer, then one request for citations
    r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25", "--fast", env=llm_env(chat))
    assert r.returncode == 1 and len(chat.chat_bodies()) == 3  # --fast: exactly one call


def test_hyde_is_cached_outside_the_index(indexed, chat, tmp_path):
    _, art = indexed
    cache = tmp_path / "xdg-cache"
    env = llm_env(chat, XDG_CACHE_HOME=str(cache))
    before = sorted(p.name for p in (art / "rag").rglob("*"))
    r1 = ragtui("ask", "what are cats", "--artifacts", str(art), "--hyde", "--json", "--mode", "bm25", env=env)
    assert r1.returncode == 0, r1.stderr
    s1 = json.loads(r1.stdout)["stats"]
    assert s1["chat_calls"] == 2 and s1["mode"] == "bm25+hyde" and s1["hyde_cached"] is False
    r2 = ragtui("ask", "what are cats", "--artifacts", str(art), "--hyde", "--json", "--mode", "bm25", env=env)
    s2 = json.loads(r2.stdout)["stats"]
    assert s2["chat_calls"] == 1 and s2["hyde_cached"] is True and "hyde" in s2["seconds"]
    assert len(chat.chat_bodies()) == 3
    assert len(list((cache / "ragtui" / "hyde").glob("*.json"))) == 1
    assert sorted(p.name for p in (art / "rag").rglob("*")) == before  # nothing written into the index
    r = ragtui("ask", "cats", "--artifacts", str(art), "--hyde", "--fast", env=env)
    assert r.returncode == 2 and "choose one" in r.stderr


@pytest.mark.parametrize("fault, message", [
    (Fault("no_choices"), "no choices"),
    (Fault("empty"), "empty text"),
    (Fault("status", status=400, message="context too long"), "context too long"),
])
def test_server_faults_are_one_line_exit_3(indexed, chat, fault, message):
    _, art = indexed
    chat.queue(fault)
    r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25", "--no-stream", env=llm_env(chat))
    assert r.returncode == 3, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("ragtui: error:")


def test_no_llm_configured_wrong_model_and_server_down(indexed, chat):
    _, art = indexed
    r = ragtui("ask", "cats", "--artifacts", str(art))
    assert r.returncode == 2 and "no chat model configured" in r.stderr and r.stderr.count("\n") == 1
    r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25",
               env={"RAGTUI_LLM_URL": chat.url, "RAGTUI_LLM_MODEL": "nope"})
    assert r.returncode == 3 and "model `nope` does not exist" in r.stderr
    url = chat.url
    chat.stop()
    r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25",
               env={"RAGTUI_LLM_URL": url, "RAGTUI_LLM_MODEL": "m"})
    assert r.returncode == 3 and "is the chat server running" in r.stderr and "Traceback" not in r.stderr


def test_a_folders_config_cannot_send_the_key_elsewhere(indexed, chat, tmp_path):
    _, art = indexed
    project = tmp_path / "cloned"
    project.mkdir()
    (project / "ragtui.toml").write_text(f'[llm]\nbase_url = "{chat.url}"\nmodel = "m"\n', encoding="utf-8")
    r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25", cwd=project,
               env={"OPENAI_API_KEY": "sk-do-not-send"})
    assert r.returncode == 2 and "llm.base_url" in r.stderr and "nothing was sent" in r.stderr
    assert chat.seen == []


def test_the_key_comes_from_the_variable_the_users_config_names(indexed, chat, tmp_path):
    _, art = indexed
    home = Path(os.environ["XDG_CONFIG_HOME"]) / "ragtui"
    home.mkdir(parents=True, exist_ok=True)
    (home / "ragtui.toml").write_text(
        f'[llm]\nbase_url = "{chat.url}"\nmodel = "m"\napi_key_env = "MY_CHAT_KEY"\n', encoding="utf-8")
    try:
        chat.queue(Fault("status", status=401, message="refused", echo_auth=True))
        r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25", env={"MY_CHAT_KEY": "sk-secret-77"})
        assert r.returncode == 3 and "sk-secret-77" not in r.stderr + r.stdout and "***" in r.stderr
        assert chat.seen[0].headers["Authorization"] == "Bearer sk-secret-77"
        r = ragtui("ask", "cats", "--artifacts", str(art), "--mode", "bm25")
        assert r.returncode == 2 and "MY_CHAT_KEY" in r.stderr
        (home / "ragtui.toml").write_text('[llm]\nbase_ulr = "x"\n', encoding="utf-8")
        r = ragtui("ask", "cats", "--artifacts", str(art))
        assert r.returncode == 2 and "did you mean llm.base_url?" in r.stderr
    finally:
        (home / "ragtui.toml").unlink()


def test_the_question_and_the_hyde_passage_are_prose_not_query_syntax(indexed, chat, tmp_path):
    _, art = indexed
    chat.reply = 'He said "unclosed -cats OR path: ext:'  # query syntax mistakes, if it were parsed
    r = ragtui("ask", 'what are "cats', "--artifacts", str(art), "--mode", "bm25", "--hyde", "--allow-unverified",
               env=llm_env(chat, XDG_CACHE_HOME=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    r = ragtui("pack", 'what are "cats', "--artifacts", str(art), "--mode", "bm25", "--strict")
    assert r.returncode == 2 and "query column" in r.stderr  # pack takes a search query, syntax included
    r = ragtui("pack", 'what are "cats', "--artifacts", str(art), "--mode", "bm25")
    assert r.returncode == 0 and "searched as plain text" in r.stderr  # unless strict: as text, with a note


def _timeout_config(tmp_path, server, seconds: float) -> str:
    config = tmp_path / "llm.toml"
    config.write_text(f'[llm]\nbase_url = "{server.url}"\nmodel = "m"\ntimeout = {seconds}\nretries = 2\n',
                      encoding="utf-8")
    return str(config)


@pytest.mark.parametrize("flag", ["--stream", "--no-stream", "--json"])
def test_an_answer_that_never_ends_exits_3_with_what_arrived_marked_as_cut(indexed, tmp_path, flag):
    from ragtui.commands.ask import CUT_MARK

    _, art = indexed
    with ChatServer(model="m", hang_limit=120.0) as server:
        server.queue(Fault("trickle"))  # one character every 0.2 s, never an end
        r = ragtui("ask", "what are cats", "--artifacts", str(art), "--mode", "bm25", flag,
                   "--config", _timeout_config(tmp_path, server, 1.5))
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("ragtui: error: ") and "within 1.5s" in lines[0], r.stderr
    if flag == "--json":
        out = json.loads(r.stdout)
        assert out["complete"] is False and out["answer"] and "The sources say so".startswith(out["answer"][:18])
    else:
        text, mark = r.stdout.rstrip("\n").rsplit("\n", 1)
        assert mark == CUT_MARK and text and "The sources say so [docs/cats.md:L1-4].".startswith(text)


def test_a_stream_of_pings_alone_exits_3_in_time(indexed, tmp_path):
    _, art = indexed
    with ChatServer(model="m", hang_limit=120.0) as server:
        server.queue(Fault("pings"))
        r = ragtui("ask", "what are cats", "--artifacts", str(art), "--mode", "bm25", "--stream",
                   "--config", _timeout_config(tmp_path, server, 1.5))
    assert r.returncode == 3 and "did not finish within 1.5s" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == ""


def test_the_closing_warning_starts_on_its_own_line(indexed, chat):
    import subprocess
    import sys

    _, art = indexed
    chat.reply = "Cats are mammals."  # cites nothing: a warning follows the streamed answer
    # Both streams into one pipe, as a terminal shows them: the order of the process's writes is the contract.
    r = subprocess.run([sys.executable, "-m", "ragtui", "ask", "cats", "--artifacts", str(art), "--mode", "bm25",
                        "--stream", "--fast"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env={**os.environ, **llm_env(chat)}, timeout=300)
    assert r.returncode == 1
    assert "Cats are mammals.\nragtui: warning: the answer cites no source" in r.stdout, r.stdout


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """An index whose hits fill any budget: 60 notes of about 40 words that all mention cats."""
    base = tmp_path_factory.mktemp("large")
    docs = base / "notes"
    docs.mkdir()
    for i in range(60):
        (docs / f"n{i:02d}.md").write_text(f"# Note {i}\n\n" + f"Cats and their habits, part {i}. " * 6 + "\n",
                                            encoding="utf-8")
    art = base / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    return art


def test_the_context_is_fitted_to_the_servers_context_length(large, chat):
    chat.n_ctx = 1024  # as llama.cpp's server started with -c 1024 says in /props; max_tokens stays 512
    r = ragtui("ask", "cats habits", "--artifacts", str(large), "--mode", "bm25", "-b", "2000", "--json",
               env=llm_env(chat))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stats"]["context_window"] == 1024 and out["stats"]["budget"] < 2000
    assert "the pack budget is" in r.stderr and "1,024-token context (GET /props)" in r.stderr
    # The same server when it does not say: [llm] context_window says it.
    chat.props = False
    r = ragtui("ask", "cats habits", "--artifacts", str(large), "--mode", "bm25", "-b", "2000", env=llm_env(chat))
    assert r.returncode == 3 and "exceeds the available context size" in r.stderr and "context_window" in r.stderr
    home = Path(os.environ["XDG_CONFIG_HOME"]) / "ragtui"
    home.mkdir(parents=True, exist_ok=True)
    (home / "ragtui.toml").write_text("[llm]\ncontext_window = 1024\n", encoding="utf-8")
    try:
        r = ragtui("ask", "cats habits", "--artifacts", str(large), "--mode", "bm25", "-b", "2000",
                   env=llm_env(chat))
        assert r.returncode == 0 and "([llm] context_window)" in r.stderr, r.stderr
    finally:
        (home / "ragtui.toml").unlink()


@pytest.mark.parametrize("flag", ["--stream", "--no-stream"])
def test_terminal_escapes_in_the_answer_never_reach_the_screen(indexed, chat, flag):
    _, art = indexed
    chat.reply = "Cats \x1b[2J\x1b]0;pwned\x07 sleep [docs/cats.md:L1-4\x1b[31m]."
    r = ragtui("ask", "what are cats", "--artifacts", str(art), "--mode", "bm25", flag, "--allow-unverified",
               env=llm_env(chat))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\x1b" not in r.stderr
    assert "Cats ␛[2J␛]0;pwned␇ sleep" in r.stdout
