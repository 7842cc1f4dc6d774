"""A real OpenAI-compatible embedding server on 127.0.0.1, for tests.

It serves REAL embeddings and tokens from the in-process wordllama embedder:

    POST /v1/embeddings   {"model", "input": str | [str]} -> {"data": [{"index", "embedding"}], ...}
    POST /v1/tokenize     ragtui's native style: {"model", "input", "return_offsets"}
                          -> {"tokens": [...], "offsets": [[s, e], ...]} (raw, possibly overlapping)
    POST /tokenize        llama.cpp ({"content", "with_pieces"}), vLLM ({"prompt",
                          "return_token_strs"}) or TEI ({"inputs"}), told apart by the body
    POST /extras/tokenize llama-cpp-python: {"input"} -> {"tokens": [ids]} (no offsets)
    POST /extras/detokenize  {"tokens"} -> {"text"}; HTTP 500 when the bytes are not
                          UTF-8, as llama-cpp-python does (/detokenize: llama.cpp's, {"content"})
    GET  /v1/models       {"data": [{"id": model, "owned_by", "created": now, "meta": model_meta}]}

and a fault script: ``queue(Fault(...), ...)`` makes the next matching requests
misbehave, one fault per request, in order. Every request is recorded in
``seen``. Use it in-process (``with EmbedServer() as server:``) or as a
separate process (``python -m tests.helpers.embed_server`` prints ``PORT n``
and then obeys ``/_admin/faults``, ``/_admin/seen``, ``/_admin/release``
until its stdin closes).

Bounds: a ``hang`` waits for ``release()`` (called by ``stop``) or
``hang_limit`` seconds, whichever comes first; idle keep-alive connections
time out after ``idle_timeout``; ``stop`` closes every open connection and
joins every handler thread.
"""

from __future__ import annotations

import json
import math
import select
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from tests.helpers.loopback import LoopbackHandler, LoopbackServer, Seen

FAULT_KINDS = (
    "status",     # answer `status` with an OpenAI-style error body and optional Retry-After
    "hang",       # never answer (until release/hang_limit), then drop the connection
    "drop",       # send headers and half a body, then close the connection
    "garbage",    # 200 with a body that is not JSON
    "wrong_dim",  # embeddings one component short
    "nan",        # first embedding's first component is NaN
    "zero",       # first embedding all zeros
    "short",      # one embedding fewer than inputs
    "bad_index",  # every item claims index 0
    "reorder",    # valid, but data listed in reverse order
    "no_pieces",  # tokenize answers ids only (no offsets / pieces / token_strs)
    "per_token",  # a server without pooling: each embedding is a list of vectors, one per token
    "slow_head",  # the status line and headers, one byte every `interval` seconds, never finished
    "trickle",    # headers at once, then a 30,000-byte body one byte every `interval` seconds
    "endless",    # a chunked body that never ends, as fast as the client reads it
    "oversized",  # a body declared (Content-Length) and sent at 64 MiB
)
"""The last four never end on their own: until the client closes, ``release()``, or ``hang_limit``."""


@dataclass
class Fault:
    """One scripted misbehaviour; ``path`` limits it to requests for that path."""

    kind: str
    status: int = 500
    retry_after: str | None = None
    message: str = "injected fault"
    echo_auth: bool = False  # put the received Authorization header in the error message
    path: str | None = None
    interval: float = 0.2  # slow_head, trickle: seconds between bytes

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")



class EmbedServer(LoopbackServer):
    """The server; see the module docstring."""

    thread_name = "embed-server"

    def __init__(self, embedder: Any = None, *, model: str | None = None,
                 hang_limit: float = 30.0, idle_timeout: float = 10.0) -> None:
        super().__init__(idle_timeout=idle_timeout)
        if embedder is None:
            from ragtui.core.embedders.wordllama import WordLlamaEmbedder

            embedder = WordLlamaEmbedder()
        self.embedder = embedder
        self.model = model or embedder.model
        self.hang_limit = hang_limit
        self.tei_byte_offsets = False  # report TEI offsets in UTF-8 bytes instead of characters
        self.model_meta: dict[str, Any] = {"n_vocab": 32000}
        """What ``GET /v1/models`` says of the model (llama.cpp's ``meta``): its identity for caches."""
        self.hang_above_bytes: int | None = None
        """Embedding requests whose inputs hold more UTF-8 bytes than this hang (a server too slow for them)."""
        self.work_per_byte = 0.0
        """Seconds of ``virtual_clock`` each embedded input byte costs (a one-slot server's work)."""
        self.work_exponent = 1.0
        """A request of n input bytes costs ``work_per_byte * n ** work_exponent``: above 1, work grows faster than
        the batch (as attention's does, or a batch past the server's own batch size)."""
        self.hang_above_work: float | None = None
        """Embedding requests that would cost more virtual seconds than this hang (a server too slow for them)."""
        self._virtual = 0.0
        self.abandoned = threading.Semaphore(0)
        """Released once for each hanging request whose client closed the connection."""
        self._faults: deque[Fault] = deque()
        self._seen: list[Seen] = []

    # --- script and record -------------------------------------------------------
    def queue(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def virtual_clock(self) -> float:
        """A clock that moves only by the work this server did (``work_per_byte``): inject it as ``monotonic``."""
        with self._lock:
            return self._virtual

    def release(self) -> None:
        self._release.set()

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def seen_bodies(self, path: str) -> list[Any]:
        return [s.body for s in self.seen if s.path == path]

    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.path is None or fault.path == path:
                    del self._faults[i]
                    return fault
        return None

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self._seen.append(seen)

    # --- answers -----------------------------------------------------------------
    def embeddings(self, body: dict[str, Any], fault: Fault | None) -> dict[str, Any]:
        inputs = body["input"]
        if isinstance(inputs, str):
            inputs = [inputs]
        with self._lock:
            self._virtual += self.work(inputs)
        vectors = self.embedder.embed(inputs).tolist()
        kind = fault.kind if fault else None
        if kind == "wrong_dim":
            vectors = [v[:-1] for v in vectors]
        elif kind == "nan":
            vectors[0][0] = math.nan
        elif kind == "zero":
            vectors[0] = [0.0] * len(vectors[0])
        elif kind == "per_token":
            vectors = [[v, v] for v in vectors]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        if kind == "short":
            data = data[:-1]
        elif kind == "bad_index":
            for item in data:
                item["index"] = 0
        elif kind == "reorder":
            data.reverse()
        n_tokens = sum(self.embedder.tokenizer.count_many(inputs))
        return {"object": "list", "data": data, "model": self.model,
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}

    def work(self, inputs: list[Any]) -> float:
        """The virtual seconds embedding ``inputs`` costs (see ``work_per_byte``)."""
        return self.work_per_byte * sum(len(str(t).encode("utf-8")) for t in inputs) ** self.work_exponent

    def detokenize(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """What llama.cpp's detokenize gives for a SentencePiece vocab: the pieces' bytes, one leading space dropped."""
        ids = body["tokens"]
        vocab = self.embedder.tokenizer
        raw = b"".join(_piece_bytes(vocab._tk.id_to_token(int(i)) or "") for i in ids)
        raw = raw[1:] if raw.startswith(b" ") else raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return 500, {"error": {"message": str(exc), "type": "internal_server_error"}}
        return 200, {"text": text} if path == "/extras/detokenize" else {"content": text}

    def tokenize(self, path: str, body: dict[str, Any], fault: Fault | None) -> Any:
        plain = fault is not None and fault.kind == "no_pieces"
        tok = self.embedder.tokenizer
        if path == "/extras/tokenize":
            return {"tokens": tok.encode(body["input"]).ids}
        if path == "/v1/tokenize":
            enc = tok.encode(body["input"])
            answer: dict[str, Any] = {"tokens": enc.ids}
            if body.get("return_offsets") and not plain:
                answer["offsets"] = [list(o) for o in enc.offsets]
            return answer
        if "content" in body:  # llama.cpp
            enc = tok.encode(body["content"])
            if not body.get("with_pieces") or plain:
                return {"tokens": enc.ids}
            return {"tokens": [{"id": i, "piece": _llamacpp_piece(t)}
                               for i, t in zip(enc.ids, enc.tokens)]}
        if "prompt" in body:  # vLLM
            enc = tok.encode(body["prompt"])
            answer = {"count": len(enc.ids), "max_model_len": 8192, "tokens": enc.ids,
                      "token_strs": None}
            if body.get("return_token_strs") and not plain:
                answer["token_strs"] = list(enc.tokens)
            return answer
        text = body["inputs"]  # TEI
        enc = tok.encode(text)
        out = []
        for i, (s, e) in zip(enc.ids, enc.offsets):
            item = {"id": i, "text": text[s:e], "special": False, "start": s, "stop": e}
            if self.tei_byte_offsets:
                item["start"] = len(text[:s].encode("utf-8"))
                item["stop"] = len(text[:e].encode("utf-8"))
            if plain:
                item["start"] = item["stop"] = None
            out.append(item)
        return [out]


def _piece_bytes(token: str) -> bytes:
    # "▁" becomes a space, "<0xNN>" the raw byte.
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        return bytes([int(token[3:5], 16)])
    return token.replace("▁", " ").encode("utf-8")


def _llamacpp_piece(token: str) -> str | list[int]:
    # What llama.cpp's common_token_to_piece gives for a SentencePiece vocab:
    # "▁" becomes a space, "<0xNN>" the raw byte; not-UTF-8 goes out as byte values.
    raw = _piece_bytes(token)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


class _Handler(LoopbackHandler):
    server: Any

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path == "/_admin/seen":
            self._json(200, [asdict(s) for s in owner.seen])
        elif self.path == "/v1/models":
            owner._record(Seen(self.path, None, dict(self.headers.items())))
            self._json(200, {"object": "list", "data": [{"id": owner.model, "object": "model", "owned_by": "test",
                                                         "created": int(time.time()), "meta": owner.model_meta}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        if length > 64 * 1024 * 1024:
            self._json(413, {"error": {"message": "body too large"}})
            return
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        if self.path.startswith("/_admin/"):
            self._admin(body)
            return
        owner._record(Seen(self.path, body, dict(self.headers.items())))
        fault = owner._take_fault(self.path)
        if (fault is None and self.path == "/v1/embeddings" and owner.hang_above_bytes is not None
                and isinstance(body, dict) and isinstance(body.get("input"), list)
                and sum(len(str(t).encode("utf-8")) for t in body["input"]) > owner.hang_above_bytes):
            fault = Fault("hang")
        if (fault is None and self.path == "/v1/embeddings" and owner.hang_above_work is not None
                and isinstance(body, dict) and isinstance(body.get("input"), list)
                and owner.work(body["input"]) > owner.hang_above_work):
            fault = Fault("hang")
        if fault is not None and self._transport_fault(fault):
            return
        try:
            if self.path == "/v1/embeddings":
                answer = owner.embeddings(body, fault)
            elif self.path in ("/v1/tokenize", "/tokenize", "/extras/tokenize"):
                answer = owner.tokenize(self.path, body, fault)
            elif self.path in ("/extras/detokenize", "/detokenize"):
                status, answer = owner.detokenize(self.path, body)
                self._json(status, answer)
                return
            else:
                self._json(404, {"error": {"message": f"File Not Found: {self.path}"}})
                return
        except (KeyError, TypeError, ValueError) as exc:
            self._json(400, {"error": {"message": f"bad request: {exc!r}"}})
            return
        self._json(200, answer)

    def _admin(self, body: Any) -> None:
        owner = self.server.owner
        if self.path == "/_admin/faults":
            owner.queue(*(Fault(**f) for f in body))
        elif self.path == "/_admin/release":
            owner.release()
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        self._json(200, {"ok": True})

    def _transport_fault(self, fault: Fault) -> bool:
        """Act out ``fault`` if it is about the transport; True if the request is done."""
        if fault.kind == "status":
            message = fault.message
            if fault.echo_auth:
                message += f" (you sent Authorization: {self.headers.get('Authorization')})"
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            self._json(fault.status, {"error": {"message": message, "type": "injected"}}, headers)
            return True
        if fault.kind == "hang":
            self._hang()
            self.close_connection = True
            return True
        if fault.kind == "drop":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "4096")
            self.end_headers()
            self.wfile.write(b'{"object": "list", "data": [{"ind')
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return True
        if fault.kind in ("slow_head", "trickle", "endless", "oversized"):
            self._endless(fault)
            self.close_connection = True
            return True
        if fault.kind == "garbage":
            payload = b"<html>502 Bad Gateway</html> {not json"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return True
        return False

    def _endless(self, fault: Fault) -> None:
        """An answer that does not end (see FAULT_KINDS); returns when the client is gone or time is up."""
        owner = self.server.owner
        out = self.wfile
        try:
            if fault.kind == "slow_head":
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 100_000
                for byte in head:
                    out.write(bytes([byte]))
                    out.flush()
                    if owner._release.wait(fault.interval):
                        return
                return
            if fault.kind == "trickle":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "30000")
                self.end_headers()
                out.flush()
                for _ in range(30000):
                    out.write(b" ")  # JSON allows leading whitespace: the body is never wrong, only unfinished
                    out.flush()
                    if owner._release.wait(fault.interval):
                        return
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            block = b"x" * (64 << 10)
            if fault.kind == "oversized":
                size = 64 << 20
                self.send_header("Content-Length", str(size + 12))
                self.end_headers()
                out.write(b'{"pad": "')
                for _ in range(size // len(block)):
                    out.write(block)
                out.write(b'"}\n')
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            out.write(b'9\r\n{"pad": "\r\n')
            chunk = b"%x\r\n%s\r\n" % (len(block), block)
            while not owner._release.is_set():
                out.write(chunk)
        except OSError:
            return  # the client closed the connection: what a bounded client does

    def _hang(self) -> None:
        """Wait for release (or hang_limit), watching whether the client closes the connection."""
        owner = self.server.owner
        waited = 0.0
        while waited < owner.hang_limit and not owner._release.wait(0.05):
            waited += 0.05
            try:
                ready, _, _ = select.select([self.connection], [], [], 0)
                if ready and self.connection.recv(1, socket.MSG_PEEK) == b"":
                    owner.abandoned.release()  # the client gave up and closed: stop "working"
                    return
            except OSError:
                owner.abandoned.release()
                return

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")  # allow_nan: the "nan" fault needs NaN
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


EmbedServer.handler = _Handler  # defined after the server class, which names it


def main() -> None:
    """Serve until stdin closes; print ``PORT <n>`` once listening."""
    with EmbedServer() as server:
        print(f"PORT {server.port}", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
