"""A real OpenAI-compatible chat server on 127.0.0.1, for tests of ``ragtui ask`` and ``core.llm``.

``POST /v1/chat/completions`` answers ``reply`` (default: a sentence citing
the first ``Source n: [label]`` of the last user message, so a citation check has
something to verify), as one JSON body or, when the request says
``"stream": true``, as server-sent events in chunked encoding, with a
``usage`` object unless told not to. ``GET /v1/models`` lists ``model``; ``GET /props``
answers ``n_ctx`` as llama.cpp's server does, when one is given.

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
)

_SOURCE = re.compile(r"^Source \d+: \[([^\[\]\n]+)\]$", re.MULTILINE)
_LABEL = re.compile(r"\[([^\[\]\n]+?(?::L\d+-\d+|#\d+))\]")


@dataclass
class Fault:
    kind: str
    status: int = 500
    retry_after: str | None = None
    message: str = "injected fault"
    echo_auth: bool = False

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
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.server.owner.model, "object": "model"}]})
        elif self.path == "/props" and self.server.owner.n_ctx is not None:
            self._json(200, {"default_generation_settings": {"n_ctx": self.server.owner.n_ctx}, "total_slots": 1})
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
