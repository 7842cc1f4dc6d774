"""A real OpenAI-compatible chat server on 127.0.0.1, for tests of ``ragtui ask`` and ``core.answer.llm``.

``POST /v1/chat/completions`` answers ``reply`` (default: a sentence citing
the first ``Source n: [label]`` of the last user message, so a citation check has
something to verify), as one JSON body or, when the request says
``"stream": true``, as server-sent events in chunked encoding, with a
``usage`` object unless told not to. ``GET /v1/models`` lists ``model``.

With ``n_ctx`` set it acts as llama.cpp's server with that context: ``GET /props``
reports it (``default_generation_settings.n_ctx``) unless ``props = False``, and a
request whose prompt words plus ``max_tokens`` exceed it answers HTTP 400 with
llama.cpp's message (a word counts as one token: fewer than any real tokenizer
counts, so a client that fits its own count fits here too).

Faults are scripted with ``queue(Fault(...), ...)``: the next requests
misbehave, one fault each, in order. Every request is recorded in ``seen``.

Bounds: a ``hang`` waits for ``release()`` (``stop`` calls it) or
``hang_limit`` seconds; ``stop`` closes every connection and joins the
handler threads.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from tests.helpers.loopback import LoopbackHandler, LoopbackServer, Seen

FAULT_KINDS = (
    "status",      # answer `status` with an OpenAI-style error body and optional Retry-After
    "hang",        # never answer (until release/hang_limit), then drop the connection
    "garbage",     # 200 whose body is not JSON
    "empty",       # a valid answer with empty text
    "no_choices",  # 200 {"choices": []}
    "drop",        # streamed: two pieces of text, then the connection is cut mid-chunk
    "truncated",   # streamed: two pieces of text, then a clean end with no finish_reason and no [DONE]
    "bad_event",   # streamed: one piece, then a data line that is not JSON
    "no_usage",    # a valid answer without a usage object
    "plain",       # a non-streamed JSON answer even when streaming was asked for
    "pings",       # streamed: a ": ping" comment every `interval` (0.5 s), never any text nor an end
    "empty_deltas",  # streamed: an empty delta every `interval` (0.05 s), never an end
    "trickle",     # streamed: one character every `interval` (0.2 s), never an end
    "endless",     # streamed: text as fast as the client reads it, never an end (max_tokens ignored)
    "slow_body",   # not streamed: the JSON answer one byte every `interval` (0.2 s)
    "slow_head",   # the status line and headers one byte every `interval` (0.2 s), never finished
)
ENDLESS = ("pings", "empty_deltas", "trickle", "endless", "slow_body", "slow_head")
"""Faults that go on until the client closes the connection, ``release()`` or ``hang_limit``."""
INTERVALS = {"pings": 0.5, "empty_deltas": 0.05, "trickle": 0.2, "endless": 0.0, "slow_body": 0.2, "slow_head": 0.2}

_SOURCE = re.compile(r"^Source \d+: \[([^\[\]\n]+)\]$", re.MULTILINE)
_LABEL = re.compile(r"\[([^\[\]\n]+?(?::L\d+-\d+|#\d+))\]")


@dataclass
class Fault:
    kind: str
    status: int = 500
    retry_after: str | None = None
    message: str = "injected fault"
    echo_auth: bool = False
    interval: float | None = None
    """Seconds between the pieces of an ``ENDLESS`` fault (None: its ``INTERVALS`` entry)."""

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")



class ChatServer(LoopbackServer):
    """See the module docstring."""

    thread_name = "chat-server"

    def __init__(self, *, model: str = "test-model", reply: str | None = None, hang_limit: float = 30.0,
                 n_ctx: int | None = None) -> None:
        super().__init__(idle_timeout=10.0)
        self.model = model
        self.n_ctx = n_ctx
        self.reply = reply
        self.hang_limit = hang_limit
        self.props = True
        self._faults: deque[Fault] = deque()
        self._seen: list[Seen] = []

    def queue(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def chat_bodies(self) -> list[Any]:
        return [s.body for s in self.seen if s.path == "/v1/chat/completions"]

    def _take(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def answer_text(self, body: dict[str, Any]) -> str:
        if self.reply is not None:
            return self.reply
        users = [str(m.get("content", "")) for m in body.get("messages", [])
                 if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else ""  # the question asked now, not a worked example before it
        labels = _SOURCE.findall(prompt) or _LABEL.findall(prompt)
        if not labels:
            return "A hypothetical passage about the question, with no sources."
        return f"The sources say so [{labels[0]}]."


class _Handler(LoopbackHandler):
    server: Any

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path == "/props" and owner.n_ctx is not None and owner.props:
            self._json(200, {"default_generation_settings": {"n_ctx": owner.n_ctx}, "total_slots": 1})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.server.owner.model, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        with owner._lock:
            owner._seen.append(Seen(self.path, body, dict(self.headers.items())))
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"File Not Found: {self.path}"}})
            return
        if body.get("model") != owner.model:
            self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist",
                                       "type": "invalid_request_error", "code": "model_not_found"}})
            return
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []) if isinstance(m, dict))
        if owner.n_ctx is not None and words + int(body.get("max_tokens") or 0) > owner.n_ctx:
            self._json(400, {"error": {"code": 400, "type": "exceed_context_size_error", "message":
                                       f"the request exceeds the available context size ({words} prompt tokens "
                                       f"and {body.get('max_tokens')} to predict, n_ctx {owner.n_ctx}), try "
                                       "increasing it"}})
            return
        fault = owner._take()
        kind = fault.kind if fault else None
        if kind == "status":
            assert fault is not None
            message = fault.message
            if fault.echo_auth:
                message += f" (you sent Authorization: {self.headers.get('Authorization')})"
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            self._json(fault.status, {"error": {"message": message}}, headers)
            return
        if kind == "hang":
            owner._release.wait(owner.hang_limit)
            self.close_connection = True
            return
        if kind == "garbage":
            self._raw(200, b"<html>502 Bad Gateway</html> {not json", "application/json")
            return
        if kind in ENDLESS:
            assert fault is not None
            try:
                self._endless(fault, body)
            except OSError:
                pass  # the client closed the connection: what a client with a deadline does
            self.close_connection = True
            return
        if kind == "no_choices":
            self._json(200, {"id": "x", "object": "chat.completion", "choices": [], "model": owner.model})
            return
        text = "" if kind == "empty" else owner.answer_text(body)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        usage = None if kind == "no_usage" else {"prompt_tokens": prompt_tokens,
                                                  "completion_tokens": len(text.split()),
                                                  "total_tokens": prompt_tokens + len(text.split())}
        if not body.get("stream") or kind == "plain":
            answer: dict[str, Any] = {
                "id": "chatcmpl-1", "object": "chat.completion", "model": owner.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            }
            if usage:
                answer["usage"] = usage
            self._json(200, answer)
            return
        self._stream(text, usage, kind)

    def _stream(self, text: str, usage: dict[str, int] | None, kind: str | None) -> None:
        owner = self.server.owner
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def chunk(payload: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()

        def event(obj: Any) -> None:
            chunk(b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n")

        def delta(content: str | None, finish: str | None = None) -> dict[str, Any]:
            d = {} if content is None else {"content": content}
            return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": owner.model,
                    "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}

        chunk(b": ping\n\n")
        event({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": owner.model,
               "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
        if kind in ("drop", "truncated", "bad_event"):
            for piece in pieces[:2]:
                event(delta(piece))
            if kind == "bad_event":
                chunk(b"data: {this is not json\n\n")
            elif kind == "drop":
                self.wfile.write(b"40\r\ndata: {\"choi")  # half a chunk, then the connection is cut
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True
            return
        for piece in pieces:
            event(delta(piece))
        event(delta(None, "stop"))
        if usage:
            event({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": owner.model, "choices": [],
                   "usage": usage})
        chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _endless(self, fault: Fault, body: dict[str, Any]) -> None:
        """Act out an ``ENDLESS`` fault until the client goes, ``release()`` or ``hang_limit``."""
        owner = self.server.owner
        interval = INTERVALS[fault.kind] if fault.interval is None else fault.interval
        until = time.monotonic() + owner.hang_limit

        def more() -> bool:  # wait one interval; False when it is time to stop
            if interval:
                return not owner._release.wait(interval) and time.monotonic() < until
            return not owner._release.is_set() and time.monotonic() < until

        out = self.wfile
        if fault.kind == "slow_head":
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 100_000:
                out.write(bytes([byte]))
                out.flush()
                if not more():
                    return
            return
        if fault.kind == "slow_body":
            text = owner.answer_text(body)
            data = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": owner.model,
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                            "finish_reason": "stop"}]}).encode("utf-8")
            data = b" " * 100_000 + data  # leading whitespace: the body stays valid, it only never ends in time
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for byte in data:
                out.write(bytes([byte]))
                out.flush()
                if not more():
                    return
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(payload: bytes) -> None:
            out.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            out.flush()

        def delta(content: str) -> None:
            chunk(b"data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": owner.model,
                                          "choices": [{"index": 0, "delta": {"content": content},
                                                       "finish_reason": None}]}).encode("utf-8") + b"\n\n")

        text = owner.answer_text(body)
        if fault.kind == "pings":
            while True:
                chunk(b": ping\n\n")
                if not more():
                    return
        if fault.kind == "empty_deltas":
            delta(text[:4])  # some text first: what arrived is shown, marked as cut
            while True:
                delta("")
                if not more():
                    return
        i = 0
        while True:  # trickle, endless: the answer's characters, then more of them, never a finish_reason
            delta(text[i % len(text)] if fault.kind == "trickle" else text)
            i += 1
            if not more():
                return

    def _raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(payload).encode("utf-8"), "application/json", headers)


ChatServer.handler = _Handler  # defined after the server class, which names it
