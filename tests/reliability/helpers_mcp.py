"""Malformed lines sent to a real ``ragtui mcp`` process: every one gets exactly one JSON-RPC 2.0 answer.

One server reads every case, then a valid search, then the end of input. Each
case is a line a client could send (or a broken one could) and the answer the
specification names for it: -32700 (id null) for what is not JSON, -32600 for
what is not a request, -32602 for bad params, -32601 for an unknown method.
Cases with an id are matched to their answer by id (each case has its own);
cases whose id cannot be read are answered with id null, in the order sent
(their answers are written before the next line is read). A case passes when
it got exactly one answer of the expected code; the run passes when nothing
else came back and the search after the cases was answered with results.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from ragtui.mcp.wire import MAX_LINE_BYTES
from tests.reliability.cases import Case

INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call(request_id: object, arguments: object, name: str = "search") -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}})


def cases() -> list[tuple[str, bytes, int, object]]:
    """(name, line without its newline, expected error code, expected id: a value, or None for null)."""
    big = MAX_LINE_BYTES + (1 << 20)
    return [
        ("a lone surrogate in the query", _call(1, {}).replace("{}", '{"query": "caf\\ud800"}').encode(), -32602, 1),
        ("params given as a string", b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "search"}',
         -32600, 2),
        ('"jsonrpc": "1.0"', b'{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}', -32600, 3),
        ("no jsonrpc member", b'{"id": 4, "method": "tools/list"}', -32600, 4),
        ("not JSON", b"this is not json", -32700, None),
        ("an empty array", b"[]", -32600, None),
        ("a number", b"42", -32600, None),
        ("null", b"null", -32600, None),
        ("a string", b'"tools/list"', -32600, None),
        ("not UTF-8", b'{"jsonrpc": "2.0", "id": 5, "method": "tools/\xff"}', -32700, None),
        ("NaN", b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"x": NaN}}', -32700, None),
        ("trailing garbage", b'{"jsonrpc": "2.0", "id": 7, "method": "ping"} x', -32700, None),
        ("a byte order mark", b'\xef\xbb\xbf{"jsonrpc": "2.0", "id": 8, "method": "ping"}', -32700, None),
        ("nested 100,000 deep", b"[" * 100_000, -32700, None),
        ("params nested 100 deep", _call(9, {"query": "x", "k": 1}).replace('"k": 1', '"k": ' + "[" * 100 + "]" * 100)
         .encode(), -32602, 9),
        ("params given as an array", b'{"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": []}',
         -32602, 10),
        ("a method that is a number", b'{"jsonrpc": "2.0", "id": 11, "method": 5}', -32600, 11),
        ("an id and no method", b'{"jsonrpc": "2.0", "id": 12}', -32600, 12),
        ("a float id", b'{"jsonrpc": "2.0", "id": 13.5, "method": "ping"}', -32600, 13.5),
        ("a boolean id", b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600, None),
        ("an array id", b'{"jsonrpc": "2.0", "id": [14], "method": "ping"}', -32600, None),
        ("a null id", b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None),
        ("a lone surrogate in the id", b'{"jsonrpc": "2.0", "id": "s\\udc00", "method": "ping"}', -32600,
         "s\udc00"),
        ("a lone surrogate in a key", _call(15, {}).replace("{}", '{"q\\ud800": 1}').encode(), -32602, 15),
        ("an unknown method", b'{"jsonrpc": "2.0", "id": 16, "method": "resources/nope"}', -32601, 16),
        ("arguments given as a string", _call(17, "cats").encode(), -32602, 17),
        ("a batch of two requests", b'[{"jsonrpc": "2.0", "id": 18, "method": "ping"}, '
                                     b'{"jsonrpc": "2.0", "id": 19, "method": "ping"}]', -32600, [18, 19]),
        ("a line over the limit, id first", b'{"jsonrpc": "2.0", "id": 20, "method": "tools/call", "params": '
                                            b'{"name": "search", "arguments": {"query": "' + b"a" * big + b'"}}}',
         -32600, 20),
        ("a line over the limit, id after the cut", b'{"jsonrpc": "2.0", "method": "tools/call", "params": '
                                                    b'{"name": "search", "arguments": {"query": "' + b"a" * big
         + b'"}}, "id": 21}', -32600, None),
        ("a line over the limit of no JSON", b"\x00" * big, -32600, None),
    ]


def make_index(base: Path) -> Path:
    """``base/art``: the artifacts of an index of one document about cats (what the cases search)."""
    from ragtui import cli

    docs = base / "docs"
    docs.mkdir(parents=True)
    (docs / "cats.md").write_text("# Cats\n\nCats are small domesticated carnivorous mammals.\n", encoding="utf-8")
    with contextlib.redirect_stdout(sys.stderr):  # bench/reliability.py's stdout is its table
        code = cli.main(["ingest", str(docs), "--artifacts", str(base / "art"), "--quiet"])
    if code != 0:
        raise RuntimeError("could not index the folder the MCP cases search")
    return base / "art"


def _key(value: object) -> str:
    return json.dumps(value, ensure_ascii=True)


def protocol_verdicts(art: Path) -> dict[str, str | None]:
    """Every case of ``cases()`` sent to one ``ragtui mcp --artifacts art`` (an index of cats.md must be
    there): for each case's name, None when it got exactly its one answer, else what went wrong; then
    the search after the malformed lines, and nothing else answered."""
    verdicts: dict[str, str | None] = {}
    listed = cases()
    lines = [json.dumps(INIT).encode(), json.dumps(INITIALIZED).encode()]
    lines += [line for _, line, _, _ in listed]
    lines.append(_call("last", {"query": "cats"}).encode())
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    proc = subprocess.run([sys.executable, "-m", "ragtui", "mcp", "--artifacts", str(art)],
                          input=b"".join(line + b"\n" for line in lines), capture_output=True, env=env, timeout=300)
    answers: list[object] = []
    not_json = []
    for raw in proc.stdout.splitlines():
        try:
            answers.append(json.loads(raw.decode("utf-8")))
        except ValueError:
            not_json.append(raw[:200])
    by_id: dict[str, list[dict]] = {}
    nulls: list[dict] = []
    batches: list[list] = []
    for a in answers:
        if isinstance(a, list):
            batches.append(a)
        elif isinstance(a, dict) and a.get("id") is None:
            nulls.append(a)
        elif isinstance(a, dict):
            by_id.setdefault(_key(a["id"]), []).append(a)
    for name, _, code, want in listed:
        if isinstance(want, list):
            got = [b for b in batches if sorted(_key(e.get("id")) for e in b) == sorted(_key(w) for w in want)]
            ok = len(got) == 1 and all(e.get("error", {}).get("code") == code for e in got[0])
            verdicts[name] = None if ok else f"{name}: {len(got)} batch answers"
            continue
        if want is None:
            got1 = nulls.pop(0) if nulls else None
            ok = got1 is not None and got1.get("error", {}).get("code") == code
            verdicts[name] = None if ok else f"{name}: answered {got1}"
            continue
        got_all = by_id.pop(_key(want), [])
        ok = len(got_all) == 1 and got_all[0].get("error", {}).get("code") == code
        verdicts[name] = None if ok else f"{name}: {len(got_all)} answers: {str(got_all)[:300]}"
    last = by_id.pop(_key("last"), [])
    results = last[0].get("result", {}).get("structuredContent", {}).get("results") if len(last) == 1 else None
    verdicts[SEARCH_AFTER] = None if results else f"the search after the malformed lines: {str(last)[:300]}"
    by_id.pop(_key("init"), None)
    leftover = nulls + [a for v in by_id.values() for a in v]
    ok = not leftover and not not_json and proc.returncode == 0 and b"Traceback" not in proc.stderr
    verdicts[NOTHING_ELSE] = None if ok else (f"extra answers {str(leftover)[:300]}, not JSON-RPC {not_json[:3]}, "
                                              f"exit {proc.returncode}, stderr {proc.stderr[-300:]!r}")
    return verdicts


SEARCH_AFTER, NOTHING_ELSE = "then a search it still answers", "nothing else answered, exit 0"


def protocol_cases(size: str = "ci") -> list[Case]:
    """One server for every malformed line (lines over 4 MiB included), then a search it must still answer."""
    names = [name for name, _, _, _ in cases()] + [SEARCH_AFTER, NOTHING_ELSE]
    return [Case(_slug(name), functools.partial(_protocol_case, name)) for name in names]


def _slug(name: str) -> str:
    out = "".join(c if c.isascii() and c.isalnum() else "-" for c in name.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _protocol_case(name: str, _tmp: Path) -> None:
    from tests.reliability.cases import once

    verdict = once("mcp-protocol", lambda base: protocol_verdicts(make_index(base)))[name]
    assert verdict is None, verdict
