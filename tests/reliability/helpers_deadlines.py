"""Request deadlines and answer-size bounds, against real loopback servers that never finish their answers.

Three runners, one row each in the README table:

* ``run_chat_deadlines``: the installed ``ragtui ask`` (``[llm] timeout = 1.5``) against a chat server
  that keeps the answer open forever (comment pings, empty deltas, a trickle of text, a trickled JSON
  body, trickled headers), streamed and not: exit 3, one ``ragtui: error:`` line naming the deadline,
  what arrived on stdout marked as cut when text came, and the process ends well before the server would.
* ``run_embed_deadlines``: the HTTP embedder (``timeout = 1``) against a trickled body or trickled
  headers on each endpoint it calls (embeddings, tokenize, detokenize): an ``EmbeddingError`` naming the
  server and the deadline; and ``ragtui ingest`` against a trickled embeddings answer: exit 3, the index
  untouched.
* ``run_answer_bounds``: answers that never end or are far too large: the chat server writing text as
  fast as it is read past ``max_tokens`` and a plain body past 8 MiB (``ragtui ask``: exit 3), and each
  embedder endpoint sending an endless chunked body or a 64 MiB one (the error names the bound, the
  answer is not asked for again); ``ragtui ingest`` against an endless embeddings answer.

No case depends on timing beyond a generous upper bound (``LIMIT`` seconds for something the server
would keep up for minutes).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ragtui.commands.ask import CUT_MARK
from ragtui.core.embedders.http import HTTPEmbedder
from ragtui.core.errors import EmbeddingError
from tests.helpers.chat_server import ChatServer
from tests.helpers.chat_server import Fault as ChatFault
from tests.helpers.embed_server import EmbedServer
from tests.helpers.embed_server import Fault as EmbedFault
from tests.reliability.helpers import Tally, make_folder, one_clear_line, ragtui, snapshot
from tests.reliability.helpers_cli_http import HttpCli

LIMIT = 60.0
"""Seconds a case may take at most: the servers below would go on for HANG seconds."""
HANG = 300.0
CHAT_STALLS = ("pings", "empty_deltas", "trickle", "slow_body", "slow_head")
CHAT_TEXT = ("empty_deltas", "trickle")
"""Stalls that send some text first: it is shown, marked as cut."""
EMBED_ENDPOINTS = {
    "embeddings": ("/v1/embeddings", "native"),
    "tokenize": ("/tokenize", "llama.cpp"),
    "detokenize": ("/extras/detokenize", "llama-cpp-python"),
}


class _Ask:
    """An index of a small folder and ``ragtui ask`` against a chat server with ``[llm] timeout``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.docs, self.art = base / "docs", base / "art"
        make_folder(self.docs, 1, n_docs=4)
        r = ragtui("ingest", str(self.docs), "--artifacts", str(self.art))
        assert r.returncode == 0, r.stderr

    def __call__(self, server: ChatServer, *flags: str, timeout: float = 1.5, max_tokens: int = 64):
        config = self.base / "llm.toml"
        config.write_text(f'[llm]\nbase_url = "{server.url}"\nmodel = "m"\ntimeout = {timeout}\nretries = 2\n'
                          f"max_tokens = {max_tokens}\n", encoding="utf-8")
        t0 = time.monotonic()
        r = ragtui("ask", "alpha beta", "--artifacts", str(self.art), "--mode", "bm25", "--config", str(config),
                   *flags, timeout=LIMIT + 60)
        return r, time.monotonic() - t0


def _check_ask(ask: _Ask, kind: str, flag: str, expect: str, *, reply: str | None = None) -> None:
    with ChatServer(model="m", hang_limit=HANG, reply=reply) as server:
        if kind != "oversized":
            server.queue(ChatFault(kind))
        r, seconds = ask(server, flag)
    assert seconds < LIMIT, f"took {seconds:.0f} s"
    assert r.returncode == 3 and one_clear_line(r.stderr), (r.returncode, r.stderr[-500:])
    assert expect in r.stderr, r.stderr
    if kind in CHAT_TEXT or kind == "endless":
        text, mark = r.stdout.rstrip("\n").rsplit("\n", 1)
        assert mark == CUT_MARK and text, r.stdout[-300:]
    else:
        assert CUT_MARK not in r.stdout


def run_chat_deadlines(base: Path) -> Tally:
    tally = Tally("`ragtui ask`: answers that never end, cut at the request's deadline (exit 3)")
    ask = _Ask(base / "chat")
    for kind in CHAT_STALLS:
        for flag in ("--stream", "--no-stream"):
            tally.check(f"{kind} {flag}", lambda kind=kind, flag=flag: _check_ask(ask, kind, flag, "within 1.5s"))
    return tally


def _embedder(url: str, style: str, model: str, dim: int) -> HTTPEmbedder:
    return HTTPEmbedder(url, model, dim=dim, tokenize_style=style, timeout=1.0, retries=1, backoff=0.0,
                        adaptive=False)


def _call(emb: HTTPEmbedder, endpoint: str) -> object:
    if endpoint == "embeddings":
        return emb.embed(["some text to embed"])
    if endpoint == "tokenize":
        return emb.tokenizer.count("some text to count")
    return emb.tokenizer.spans("some text to align")


def _check_embed(shared: EmbedServer, endpoint: str, kind: str) -> None:
    path, style = EMBED_ENDPOINTS[endpoint]
    with EmbedServer(shared.embedder, hang_limit=HANG) as server:
        url = server.url
        server.queue(*[EmbedFault(kind, path=path)] * 2)  # every attempt meets it
        emb = _embedder(url, style, server.model, shared.embedder.dim)
        t0 = time.monotonic()
        try:
            _call(emb, endpoint)
        except EmbeddingError as exc:
            message = str(exc)
        else:
            raise AssertionError("the call succeeded")
        finally:
            emb.close()
        seconds = time.monotonic() - t0
        bodies = [json.dumps(s.body, sort_keys=True) for s in server.seen if s.path == path]
    assert seconds < LIMIT, f"took {seconds:.0f} s"
    assert url in message and "\n" not in message, message
    if kind in ("endless", "oversized"):
        assert "larger than" in message, message
        assert len(bodies) == len(set(bodies)), "a too-large answer was asked for again"
    else:
        assert "within 1s" in message, message


def _check_ingest(base: Path, shared: EmbedServer, kind: str, expect: str) -> None:
    with EmbedServer(shared.embedder, hang_limit=HANG) as server:
        cli = HttpCli(base, server.url, server.model, timeout=1.0)
        make_folder(cli.folder, 1)
        r = cli.ingest()
        assert r.returncode == 0, r.stderr
        old = snapshot(cli.art / "rag" / "docs")
        make_folder(cli.folder, 2)
        server.queue(*[EmbedFault(kind, path="/v1/embeddings")] * 8)
        t0 = time.monotonic()
        r = cli.ingest()
        seconds = time.monotonic() - t0
    assert seconds < LIMIT, f"took {seconds:.0f} s"
    assert r.returncode == 3 and one_clear_line(r.stderr) and expect in r.stderr, (r.returncode, r.stderr[-500:])
    assert snapshot(cli.art / "rag" / "docs") == old


def run_embed_deadlines(base: Path, shared: EmbedServer) -> Tally:
    tally = Tally("HTTP embedder: answers that never finish, cut at each request's deadline")
    for endpoint in EMBED_ENDPOINTS:
        for kind in ("trickle", "slow_head"):
            tally.check(f"{endpoint} {kind}", lambda e=endpoint, k=kind: _check_embed(shared, e, k))
    tally.check("ingest, embeddings trickle",
                lambda: _check_ingest(base / "ingest-trickle", shared, "trickle", "did not finish within 1s"))
    return tally


def run_answer_bounds(base: Path, shared: EmbedServer) -> Tally:
    tally = Tally("Answers past their bound (chat max_tokens, 8 MiB; embedder n x dim), not read on")
    ask = _Ask(base / "chat-bounds")
    for flag in ("--stream", "--no-stream"):
        tally.check(f"chat endless text {flag}",
                    lambda flag=flag: _check_ask(ask, "endless", flag, "ran past max_tokens = 64"))
    tally.check("chat plain body over 8 MiB",
                lambda: _check_ask(ask, "oversized", "--no-stream", "larger than", reply="x" * (9 << 20)))
    for endpoint in EMBED_ENDPOINTS:
        for kind in ("endless", "oversized"):
            tally.check(f"{endpoint} {kind}", lambda e=endpoint, k=kind: _check_embed(shared, e, k))
    tally.check("ingest, embeddings endless",
                lambda: _check_ingest(base / "ingest-endless", shared, "endless", "larger than"))
    return tally
