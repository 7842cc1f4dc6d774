"""Request deadlines and answer-size bounds, against real loopback servers that never finish their answers.

Three generators of cases, one row each in the docs tables:

* ``chat_deadline_cases``: the installed ``ragtui ask`` (``[llm] timeout = 1.5``) against a chat server
  that keeps the answer open forever (comment pings, empty deltas, a trickle of text, a trickled JSON
  body, trickled headers), streamed and not: exit 3, one ``ragtui: error:`` line naming the deadline,
  what arrived on stdout marked as cut when text came, and the process ends well before the server would.
* ``embed_deadline_cases``: the HTTP embedder (``timeout = 1``) against a trickled body or trickled
  headers on each endpoint it calls (embeddings, tokenize, detokenize): an ``EmbeddingError`` naming the
  server and the deadline; and ``ragtui ingest`` against a trickled embeddings answer: exit 3, the index
  untouched.
* ``answer_bound_cases``: answers that never end or are far too large: the chat server writing text as
  fast as it is read past ``max_tokens`` and a plain body past 8 MiB (``ragtui ask``: exit 3), and each
  embedder endpoint sending an endless chunked body or a 64 MiB one (the error names the bound, the
  answer is not asked for again); ``ragtui ingest`` against an endless embeddings answer.

No case depends on timing beyond a generous upper bound (``LIMIT`` seconds for something the server
would keep up for minutes).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from ragtui.commands.ask import CUT_MARK
from ragtui.core.embedders.http import HTTPEmbedder
from ragtui.core.errors import EmbeddingError
from tests.helpers.chat_server import ChatServer
from tests.helpers.chat_server import Fault as ChatFault
from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run, run_process
from tests.helpers.embed_server import EmbedServer
from tests.helpers.embed_server import Fault as EmbedFault
from tests.reliability.cases import Case, embed_server, once
from tests.reliability.helpers import make_folder, snapshot
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
        r = run("ingest", str(self.docs), "--artifacts", str(self.art))
        assert r.code == 0, r.err

    def __call__(self, server: ChatServer, *flags: str, timeout: float = 1.5, max_tokens: int = 64):
        config = self.base / "llm.toml"
        config.write_text(f'[llm]\nbase_url = "{server.url}"\nmodel = "m"\ntimeout = {timeout}\nretries = 2\n'
                          f"max_tokens = {max_tokens}\n", encoding="utf-8")
        t0 = time.monotonic()
        r = run_process("ask", "alpha beta", "--artifacts", str(self.art), "--mode", "bm25", "--config", str(config),
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


def _ask() -> _Ask:
    return once("ask-index", _Ask)


def chat_deadline_cases(size: str = "ci") -> list[Case]:
    """The installed ``ragtui ask`` against each stall of a chat server, streamed and not: ``pings-stream``."""
    return [Case(f"{kind}-{flag[2:]}", functools.partial(_chat_deadline, kind, flag))
            for kind in CHAT_STALLS for flag in ("--stream", "--no-stream")]


def _chat_deadline(kind: str, flag: str, _tmp: Path) -> None:
    _check_ask(_ask(), kind, flag, "within 1.5s")


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


def embed_deadline_cases(size: str = "ci") -> list[Case]:
    """A trickled body and trickled headers on each embedder endpoint; ``ragtui ingest`` against a
    trickled embeddings answer."""
    out = [Case(f"{endpoint}-{kind}", functools.partial(_embed_case, endpoint, kind))
           for endpoint in EMBED_ENDPOINTS for kind in ("trickle", "slow_head")]
    return out + [Case("ingest-trickle", lambda base: _check_ingest(base, embed_server(), "trickle",
                                                                     "did not finish within 1s"))]


def _embed_case(endpoint: str, kind: str, _tmp: Path) -> None:
    _check_embed(embed_server(), endpoint, kind)


def answer_bound_cases(size: str = "ci") -> list[Case]:
    """Chat text past max_tokens (streamed and not), a chat body over 8 MiB; an endless and an oversized
    answer on each embedder endpoint; ``ragtui ingest`` against an endless embeddings answer."""
    out = [Case(f"chat-endless-{flag[2:]}", functools.partial(_chat_bound, flag)) for flag in ("--stream", "--no-stream")]
    out.append(Case("chat-body-over-8-MiB", _chat_oversized))
    out += [Case(f"{endpoint}-{kind}", functools.partial(_embed_case, endpoint, kind))
            for endpoint in EMBED_ENDPOINTS for kind in ("endless", "oversized")]
    return out + [Case("ingest-endless", lambda base: _check_ingest(base, embed_server(), "endless", "larger than"))]


def _chat_bound(flag: str, _tmp: Path) -> None:
    _check_ask(_ask(), "endless", flag, "ran past max_tokens = 64")


def _chat_oversized(_tmp: Path) -> None:
    _check_ask(_ask(), "oversized", "--no-stream", "larger than", reply="x" * (9 << 20))
