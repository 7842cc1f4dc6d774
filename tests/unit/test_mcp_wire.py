"""The MCP wire's line reader and line checks, over a real pipe."""

from __future__ import annotations

import json
import os
import threading

from ragtui.mcp.wire import Checked, LineReader, Oversized, check_line, check_oversized


def _lines(data: bytes, limit: int, block: int = 7) -> list:
    r, w = os.pipe()

    def feed() -> None:
        os.write(w, data) if len(data) < 60000 else [os.write(w, data[i:i + 4096]) for i in range(0, len(data), 4096)]
        os.close(w)

    t = threading.Thread(target=feed)
    t.start()
    reader = LineReader(r, limit=limit, block=block)
    out = []
    while (item := reader.next()) is not None:
        out.append(item)
    t.join()
    os.close(r)
    return out


def test_lines_at_and_over_the_limit():
    ten = b"0123456789"
    got = _lines(ten + b"\n" + ten + b"x\n" + b"a\r\n" + b"\n" + b"last", limit=10)
    assert got == [ten, Oversized(ten, 11), b"a\r", b"", b"last"]


def test_an_oversized_line_is_read_past_whatever_its_length():
    data = b"y" * 100_000 + b"\nnext\n" + b"z" * 100_000
    got = _lines(data, limit=1000, block=512)
    assert got == [Oversized(b"y" * 1000, 100_000), b"next", Oversized(b"z" * 1000, 100_000)]


def _reply(line: bytes) -> dict:
    checked = check_line(line)
    assert checked is not None and checked.text is None and checked.reply is not None
    return json.loads(checked.reply)


def test_good_messages_are_handed_on_unchanged():
    line = '{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}'
    checked = check_line(line.encode())
    assert checked is not None and checked.text == line and checked.reply is None and checked.request_id == 7
    cancel = '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r1"}}'
    checked = check_line(cancel.encode())
    assert checked is not None and checked.text == cancel and checked.cancels == "r1" and checked.request_id is None
    assert check_line(b"  \r") is None
    null = '{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": null}'  # taken as absent, as the SDK takes it
    assert check_line(null.encode()) == Checked(text=null, request_id=8)


def test_each_bad_line_gets_the_code_and_id_the_specification_names():
    assert _reply(b"{") == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": _reply(b"{")["error"]
                                                                    ["message"]}}
    assert _reply(b'{"jsonrpc": "2.0", "id": "q", "method": "x", "params": "s"}')["id"] == "q"
    assert _reply(b'{"jsonrpc": "2.0", "id": 4, "method": "x", "params": [1]}')["error"]["code"] == -32602
    message = _reply(b'{"jsonrpc": "2.0", "id": 4, "method": "x", "params": {"a": {"b": "\\udfff"}}}')["error"]
    assert message == {"code": -32602, "message": "Invalid params: params.a.b holds a lone surrogate \\udfff at "
                                                  "character 0, which is not Unicode text"}


def test_a_notification_that_cannot_be_used_is_dropped_unanswered():
    checked = check_line(b'{"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1]}')
    assert checked is not None and checked.text is None and checked.reply is None and "dropped" in checked.note


def test_an_oversized_line_is_answered_with_the_id_before_the_cut():
    assert json.loads(check_oversized(Oversized(b'{"jsonrpc": "2.0", "id": 5, "params": {"q": "aaa', 10**9)).reply
                      )["id"] == 5
    assert json.loads(check_oversized(Oversized(b'{"params": {"q": "aaa', 10**9)).reply)["id"] is None
    assert json.loads(check_oversized(Oversized(b'{"params": {"id": 3, "q": "aaa', 10**9)).reply)["id"] is None
