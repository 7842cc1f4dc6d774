"""`ragtui mcp` as a process: malformed lines get the JSON-RPC 2.0 error they call for; long lines cost bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_mcp import INIT, INITIALIZED, _call, make_index, protocol_cases


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    return make_index(tmp_path_factory.mktemp("mcp-wire"))


@pytest.mark.parametrize("case", params(protocol_cases(CI)))
def test_every_malformed_line_gets_exactly_one_answer(case, tmp_path):
    case(tmp_path)


def test_the_protocol_cases_are_many():
    assert len(protocol_cases(CI)) >= 32


def _high_water_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_a_huge_line_is_refused_in_bounded_memory_and_the_server_goes_on(art):
    proc = subprocess.Popen([sys.executable, "-m", "ragtui", "mcp", "--artifacts", str(art)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out = proc.stdout

        def send(line: bytes) -> None:
            proc.stdin.write(line + b"\n")
            proc.stdin.flush()

        send(json.dumps(INIT).encode())
        assert json.loads(out.readline())["id"] == "init"
        send(json.dumps(INITIALIZED).encode())
        send(_call(1, {"query": "cats"}).encode())  # the search's own memory counts before the long line
        assert json.loads(out.readline())["result"]["structuredContent"]["results"]
        before = _high_water_kib(proc.pid)
        # 256 MiB in one line, id first, written a MiB at a time (the server reads past it as it comes).
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", '
                         b'"arguments": {"query": "')
        block = b"a" * (1 << 20)
        for _ in range(256):
            proc.stdin.write(block)
        send(b'"}}}')
        answer = json.loads(out.readline())
        assert answer["id"] == 2 and answer["error"]["code"] == -32600
        assert "over the 4,194,304-byte limit" in answer["error"]["message"]
        send(_call(3, {"query": "cats"}).encode())
        answer = json.loads(out.readline())
        assert answer["id"] == 3 and answer["result"]["structuredContent"]["results"]
        grew = _high_water_kib(proc.pid) - before
        assert grew < 32 * 1024, f"the peak grew by {grew:,} KiB for a 256 MiB line"
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_input_ending_with_requests_still_running_gets_their_answers(art):
    lines = [json.dumps(INIT), json.dumps(INITIALIZED)] + [_call(n, {"query": "cats", "k": 1}) for n in range(20)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    proc = subprocess.run([sys.executable, "-m", "ragtui", "mcp", "--artifacts", str(art)], env=env,
                          input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=300)
    ids = sorted(a["id"] for a in map(json.loads, proc.stdout.splitlines()) if a["id"] != "init")
    assert ids == list(range(20)) and proc.returncode == 0
