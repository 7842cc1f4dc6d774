"""The stdio wire of ``ragtui mcp``: one JSON-RPC 2.0 message per line, checked before the SDK sees it.

The SDK's own stdio reader drops what it cannot parse into its message types,
and a client waiting on such a request waits forever: a line that is not
JSON, ``[]``, ``42``, ``null``, ``"jsonrpc": "1.0"``, ``params`` that is a
string or an array, an id that is a float or a list, a string holding a lone
surrogate (``"caf\\ud800"``, valid JSON but no Unicode text). ``check_line``
decides for each line, before the SDK sees it, whether it is a message the SDK
will take (handed on unchanged) or the error JSON-RPC 2.0 names for it
(written back here):

* -32700 parse error, id null: not UTF-8, not JSON (``NaN`` and ``Infinity``
  included), or nested deeper than ``MAX_DEPTH``;
* -32600 invalid request: not an object (an empty array too), ``jsonrpc`` not
  ``"2.0"``, no method, a method or id of the wrong type (answered with the id
  when it can be read, else id null); a batch (an array) is answered with
  one -32600 per element, since MCP has no batches;
* -32602 invalid params: ``params`` not an object, a lone surrogate in the
  params, or params the SDK's message types refuse.

Every request with an id gets exactly one answer: what passes the checks is a
message the SDK parses, and the SDK answers the rest (-32601 for a method it
does not know, -32602 for the parameters of one it does). A notification that
is well-formed but unusable is dropped with a note on stderr (a notification
is never answered). At the end of input the server waits for the answers of
the requests still running (up to ``DRAIN_SECONDS``) before it stops, so a
client that closes its side after its last request still reads its answer.

A line is at most ``MAX_LINE_BYTES``: a longer one is read past without being
kept (memory stays under the limit plus one read) and answered with -32600,
with its id when the id comes before the first ``MAX_LINE_BYTES`` end; the
server goes on.

While serving, file descriptor 0 reads the null device and 1 writes to stderr,
so nothing a library prints can reach the wire.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["DRAIN_SECONDS", "MAX_DEPTH", "MAX_LINE_BYTES", "Checked", "LineReader", "Oversized", "check_line",
           "check_oversized", "claim_stdio", "write_all"]

MAX_LINE_BYTES = 4 << 20
"""The longest request line, without its newline: 4 MiB (a search, get or pack request is a few hundred bytes)."""

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects in a message (ragtui's tools take flat arguments)."""

DRAIN_SECONDS = 60.0
"""At the end of input, how long the server waits for the answers of requests still running."""

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602

RequestId = int | str
_NO_ID = object()
"""The id could not be read: answered as null."""


@dataclass(frozen=True)
class Checked:
    """What to do with one line: hand ``text`` to the SDK, and/or write ``reply`` back, and/or note ``note``."""

    text: str | None = None
    """The line, for the SDK (None: it was answered here, or dropped)."""
    reply: bytes | None = None
    """A JSON-RPC error (or an array of them, for a batch), one line with its newline."""
    note: str | None = None
    """One line for stderr."""
    request_id: RequestId | None = None
    """The id of a request handed to the SDK (its answer is awaited at the end of input)."""
    cancels: RequestId | None = None
    """The request a ``notifications/cancelled`` handed to the SDK cancels (it will not be answered)."""


@dataclass(frozen=True)
class Oversized:
    """A line over ``MAX_LINE_BYTES``: its first ``MAX_LINE_BYTES`` and how long it was."""

    prefix: bytes
    size: int


def _error(request_id: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None if request_id is _NO_ID else request_id,
            "error": {"code": code, "message": message}}


def _line(obj: object) -> bytes:
    # ensure_ascii: an id holding a lone surrogate goes back as the same escape it came as.
    return (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def _refuse(request_id: object, code: int, message: str) -> Checked:
    return Checked(reply=_line(_error(request_id, code, message)), note=message)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _parse(text: str) -> object:
    return json.loads(text, parse_constant=_no_constant)


def _bad_string(obj: object, where: str = "", depth: int = 0) -> tuple[str, str] | None:
    """(where, what) for the first lone surrogate or too-deep nesting in ``obj``, else None.

    ``where`` is the path to ``obj`` in the message ("params.arguments.query"; "" for the message).
    """
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")  # fails exactly on a lone surrogate, at C speed
        except UnicodeEncodeError as e:
            return where, f"holds a lone surrogate \\u{ord(obj[e.start]):04x} at character {e.start}, which is not Unicode text"
        return None
    if isinstance(obj, (dict, list)):
        if depth >= MAX_DEPTH:
            return where, f"is nested deeper than {MAX_DEPTH} levels"
        items: Iterator[tuple[str, object]]
        if isinstance(obj, dict):
            for key in obj:
                found = _bad_string(key, f"{where or 'the message'} (a key)", depth + 1)
                if found:
                    return found
            items = ((f"{where}.{k}" if where else k, v) for k, v in obj.items())
        else:
            items = ((f"{where}[{i}]", v) for i, v in enumerate(obj))
        for sub, value in items:
            found = _bad_string(value, sub, depth + 1)
            if found:
                return found
    return None


def _id_of(obj: dict[str, Any]) -> object:
    """The id to answer with: the request's when it is a number or a string, else ``_NO_ID`` (null)."""
    value = obj.get("id")
    if isinstance(value, bool) or value is None:
        return _NO_ID
    if isinstance(value, (int, str)) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return _NO_ID


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def check_line(raw: bytes) -> Checked | None:
    """What to do with one line (without its newline); None for a blank line (nothing to answer)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return _refuse(_NO_ID, PARSE_ERROR, f"Parse error: the line is not UTF-8 (byte {e.start}); "
                                            "send one JSON-RPC 2.0 message per line, in UTF-8")
    if not text.strip(" \t\r"):
        return None
    try:
        obj = _parse(text)
    except RecursionError:
        return _refuse(_NO_ID, PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH} levels")
    except ValueError as e:
        what = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
        where = f" at column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        return _refuse(_NO_ID, PARSE_ERROR, f"Parse error: not JSON ({what}{where}); "
                                            "send one JSON-RPC 2.0 message per line")
    if isinstance(obj, list):
        return _batch(obj)
    return _check_message(obj, text)


def _batch(items: list[object]) -> Checked:
    message = "Invalid Request: batches are not supported (MCP has none): send each message on its own line"
    if not items:
        return _refuse(_NO_ID, INVALID_REQUEST, "Invalid Request: an empty array; send one JSON-RPC 2.0 message per line")
    replies = []
    for item in items:
        if isinstance(item, dict) and "method" in item and "id" not in item and item.get("jsonrpc") == "2.0":
            continue  # a notification: never answered, even in a batch refused whole
        replies.append(_error(_id_of(item) if isinstance(item, dict) else _NO_ID, INVALID_REQUEST, message))
    return Checked(reply=_line(replies) if replies else None, note=f"{message} ({len(items)} elements)")


def _check_message(obj: object, text: str) -> Checked:
    from mcp_types import jsonrpc_message_adapter

    if not isinstance(obj, dict):
        return _refuse(_NO_ID, INVALID_REQUEST, f"Invalid Request: a message is a JSON object, not {_kind(obj)}")
    request_id = _id_of(obj)
    has_id = "id" in obj
    if obj.get("jsonrpc") != "2.0":
        got = json.dumps(obj["jsonrpc"], ensure_ascii=True)[:40] if "jsonrpc" in obj else "missing"
        return _refuse(request_id, INVALID_REQUEST, f'Invalid Request: "jsonrpc" must be "2.0" (got {got})')
    if has_id and not isinstance(obj["id"], (int, str)) or isinstance(obj.get("id"), bool):
        return _refuse(request_id, INVALID_REQUEST,
                       f"Invalid Request: an id is an integer or a string, not {_kind(obj['id'])}")
    if "method" not in obj:
        if has_id and ("result" in obj or "error" in obj):
            return _response(obj, text)
        return _refuse(request_id, INVALID_REQUEST, 'Invalid Request: a request needs a "method" (a string)')
    if not isinstance(obj["method"], str):
        return _refuse(request_id, INVALID_REQUEST,
                       f'Invalid Request: "method" must be a string, not {_kind(obj["method"])}')
    params = obj.get("params")
    if params is not None and not isinstance(params, (dict, list)):  # null is taken as absent, as the SDK does
        return _refuse(request_id, INVALID_REQUEST,
                       f'Invalid Request: "params" must be an object (or absent), not {_kind(params)}')
    problem: tuple[int, str] | None = None
    if isinstance(params, list):
        problem = INVALID_PARAMS, 'Invalid params: "params" must be an object: MCP methods take named parameters'
    else:
        found = _bad_string(obj)
        if found:
            where, what = found
            where = (where or "the message") if len(where) <= 80 else where[:80] + "..."
            code = INVALID_PARAMS if where.startswith("params") else INVALID_REQUEST
            problem = code, f"{'Invalid params' if code == INVALID_PARAMS else 'Invalid Request'}: {where} {what}"
    if problem is None:
        try:
            jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError as e:
            problem = INVALID_PARAMS, f"Invalid params: {_first_error(e)}"
    if problem is not None:
        code, message = problem
        if not has_id:
            return Checked(note=f"dropped the notification {obj['method'][:80]!r}: {message}")
        return _refuse(request_id, code, message)
    if not has_id:
        cancels = None
        if obj["method"] == "notifications/cancelled" and isinstance(params, dict):
            value = params.get("requestId")
            if isinstance(value, (int, str)) and not isinstance(value, bool):
                cancels = value
        return Checked(text=text, cancels=cancels)
    return Checked(text=text, request_id=obj["id"])


def _response(obj: dict[str, Any], text: str) -> Checked:
    """A client's answer to a request of the server's: handed on when the SDK takes it, else noted (never answered)."""
    from mcp_types import jsonrpc_message_adapter

    if _bad_string(obj) is None:
        try:
            jsonrpc_message_adapter.validate_json(text, by_name=False)
            return Checked(text=text)
        except ValueError:
            pass
    return Checked(note=f"dropped a malformed response to id {json.dumps(obj.get('id'), ensure_ascii=True)[:40]}")


def _first_error(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return f"{where}: {first.get('msg', '')}"[:300]
        except (IndexError, TypeError, ValueError):
            pass
    return str(e).splitlines()[0][:300]


def check_oversized(line: Oversized) -> Checked:
    """The answer to a line over ``MAX_LINE_BYTES``: -32600, with the id when it comes before the cut."""
    return _refuse(_leading_id(line.prefix), INVALID_REQUEST,
                   f"Invalid Request: the line is {line.size:,} bytes, over the {MAX_LINE_BYTES:,}-byte limit "
                   "(read past, not kept); send smaller requests")


def _leading_id(prefix: bytes) -> object:
    """The top-level ``id`` of an object whose start is ``prefix``, when it comes whole before the cut."""
    text = prefix.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    ws = " \t\r\n"
    i = len(text) - len(text.lstrip(ws))
    if not text.startswith("{", i):
        return _NO_ID
    i += 1
    try:
        while True:
            while i < len(text) and text[i] in ws:
                i += 1
            key, i = decoder.raw_decode(text, i)
            while i < len(text) and text[i] in ws:
                i += 1
            if not text.startswith(":", i):
                return _NO_ID
            i += 1
            while i < len(text) and text[i] in ws:
                i += 1
            value, i = decoder.raw_decode(text, i)
            if key == "id":
                ok = isinstance(value, (int, str)) and not isinstance(value, bool) and _bad_string(value) is None
                return value if ok else _NO_ID
            while i < len(text) and text[i] in ws:
                i += 1
            if not text.startswith(",", i):
                return _NO_ID
            i += 1
    except (ValueError, RecursionError):
        return _NO_ID


class LineReader:
    """Lines of a file descriptor, each at most ``limit`` bytes kept: ``next()`` -> bytes, ``Oversized`` or None (end)."""

    def __init__(self, fd: int, limit: int = MAX_LINE_BYTES, block: int = 1 << 16) -> None:
        self.fd, self.limit, self.block = fd, limit, block
        self._buf = bytearray()
        self._pos = 0
        """Where the next line starts in ``_buf``."""
        self._scanned = 0
        """How far past ``_pos`` holds no newline."""
        self._eof = False

    def _read(self, n: int) -> bytes:
        while True:
            try:
                return os.read(self.fd, n)
            except InterruptedError:
                continue

    def next(self) -> bytes | Oversized | None:
        while True:
            end = self._buf.find(b"\n", self._pos + self._scanned)
            if end >= 0:
                line: bytes | Oversized
                if end - self._pos > self.limit:
                    line = Oversized(bytes(self._buf[self._pos:self._pos + self.limit]), end - self._pos)
                else:
                    line = bytes(self._buf[self._pos:end])
                self._pos, self._scanned = end + 1, 0
                if self._pos > len(self._buf) // 2:
                    del self._buf[:self._pos]
                    self._pos = 0
                return line
            self._scanned = len(self._buf) - self._pos
            if self._scanned > self.limit:
                return self._skip()
            if self._eof:
                if self._scanned == 0:
                    return None
                line = bytes(self._buf[self._pos:])
                self._buf.clear()
                self._pos = self._scanned = 0
                return line
            chunk = self._read(self.block)
            if not chunk:
                self._eof = True
            else:
                self._buf += chunk

    def _skip(self) -> Oversized:
        """Read past the rest of a line already over the limit, keeping only its first ``limit`` bytes."""
        prefix = bytes(self._buf[self._pos:self._pos + self.limit])
        size = len(self._buf) - self._pos
        self._buf.clear()
        self._pos = self._scanned = 0
        while not self._eof:
            chunk = self._read(1 << 20)
            if not chunk:
                self._eof = True
                break
            end = chunk.find(b"\n")
            if end >= 0:
                size += end
                self._buf += chunk[end + 1:]
                break
            size += len(chunk)
        return Oversized(prefix, size)


@contextmanager
def claim_stdio() -> Iterator[tuple[int, int]]:
    """(the wire's input, its output) as private descriptors; meanwhile fd 0 reads /dev/null and fd 1 writes to stderr."""
    sys.stdout.flush()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield wire_in, wire_out
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        # The wire descriptors stay open: a reading thread may still be blocked on one at exit.


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a pipe may take it in parts)."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]
