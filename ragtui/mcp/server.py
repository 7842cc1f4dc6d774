"""The MCP server of ``ragtui mcp``: ``mcp.tools`` served over stdio with the official ``mcp`` SDK.

It uses the SDK's low-level ``Server`` so that ragtui, not the SDK, decides what an argument may be:
``tools/list`` gives every tool's JSON Schema (``additionalProperties: false``), and ``tools/call``
checks the arguments strictly (``tools.check_arguments``) before anything runs. A failing tool
answers a result with ``is_error`` set and one line saying what failed and what to do, as the CLI
would print it; the server goes on. Tools run in a worker thread, so a slow search does not stall
the protocol. Nothing is ever written to stdout but the protocol (notes go to stderr). Every line is
checked by ``mcp.wire`` before the SDK reads it: a malformed one gets the JSON-RPC 2.0 error the
specification names, and a request line is at most 4 MiB.
"""

from __future__ import annotations

import json
import sys
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from ragtui.config import Settings
from ragtui.core.errors import RagtuiError
from ragtui.core.textsafe import json_text, one_line
from ragtui.mcp import wire
from ragtui.mcp.tools import TOOLS, Toolbox

__all__ = ["build_server", "serve_stdio"]


def build_server(settings: Settings, version: str) -> Server[Any]:
    """The low-level SDK server with ragtui's tools, over the indexes of ``settings``."""
    toolbox = Toolbox(settings)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in TOOLS
        ])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result = await anyio.to_thread.run_sync(toolbox.call, params.name, params.arguments)
        except RagtuiError as e:
            return _error(f"error: {one_line(str(e), 2000)}")
        except Exception as e:  # noqa: BLE001 - a bug: one line to the client, the server goes on
            print(f"ragtui mcp: internal error in {params.name}: {type(e).__name__}: {e}", file=sys.stderr)
            return _error(f"internal error: {type(e).__name__}: {one_line(str(e), 500)}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=json_text(result, indent=1))],
                                    structured_content=result)

    return Server("ragtui", version=version, instructions=(
        "Search a local ragtui index (search), fetch chunks or source lines with their freshness (get), pack a "
        "token-budgeted context with [path:Lstart-Lend] labels (pack), and list the indexes (list_indexes)."),
        on_list_tools=list_tools, on_call_tool=call_tool)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def serve_stdio(settings: Settings, version: str) -> None:
    """Serve until the client closes stdin, every line checked by ``mcp.wire`` before the SDK reads it."""
    server = build_server(settings, version)

    async def main() -> None:
        with wire.claim_stdio() as (fd_in, fd_out):
            out = _WireOut(fd_out)
            stdin = _WireIn(wire.LineReader(fd_in), out)
            async with stdio_server(stdin=cast(Any, stdin), stdout=cast(Any, out)) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


class _WireOut:
    """The wire's output, shared by the SDK's answers and the errors ``_WireIn`` writes; notes each answered id."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = anyio.Lock()
        self.pending: dict[tuple[type, object], int] = {}
        """Requests handed to the SDK and not answered yet, by (type, id): a count (a client may reuse an id)."""
        self.settled = anyio.Event()

    async def write(self, text: str) -> None:
        await self.write_bytes(text.encode("utf-8", errors="replace"))
        self._answered(text)

    async def write_bytes(self, data: bytes) -> None:
        async with self._lock:  # one whole line at a time
            await anyio.to_thread.run_sync(wire.write_all, self.fd, data)

    async def flush(self) -> None:
        pass

    def expect(self, request_id: object) -> None:
        key = (type(request_id), request_id)
        self.pending[key] = self.pending.get(key, 0) + 1

    def forget(self, request_id: object) -> None:
        key = (type(request_id), request_id)
        left = self.pending.pop(key, 0) - 1
        if left > 0:
            self.pending[key] = left
        if not self.pending:
            self.settled.set()

    def _answered(self, text: str) -> None:
        if not self.pending:
            return
        try:
            message = json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict) and "method" not in message and "id" in message:
            self.forget(message["id"])


class _WireIn:
    """The lines the SDK reads: only those ``wire.check_line`` hands on; it answers the others itself."""

    def __init__(self, reader: wire.LineReader, out: _WireOut) -> None:
        self.reader, self.out = reader, out

    def __aiter__(self) -> _WireIn:
        return self

    async def __anext__(self) -> str:
        while True:
            item = await anyio.to_thread.run_sync(self.reader.next, abandon_on_cancel=True)
            if item is None:
                await self._drain()
                raise StopAsyncIteration
            checked = wire.check_oversized(item) if isinstance(item, wire.Oversized) else wire.check_line(item)
            if checked is None:
                continue
            if checked.note:
                print(f"ragtui mcp: {one_line(checked.note, 300)}", file=sys.stderr, flush=True)
            if checked.reply:
                await self.out.write_bytes(checked.reply)
            if checked.cancels is not None:
                self.out.forget(checked.cancels)  # a cancelled request is never answered
            if checked.text is not None:
                if checked.request_id is not None:
                    self.out.expect(checked.request_id)
                return checked.text

    async def _drain(self) -> None:
        """At the end of input, wait (a bounded time) for the answers of the requests still running."""
        if not self.out.pending:
            return
        self.out.settled = anyio.Event()
        with anyio.move_on_after(wire.DRAIN_SECONDS):
            while self.out.pending:
                await self.out.settled.wait()
                self.out.settled = anyio.Event()
        if self.out.pending:
            print(f"ragtui mcp: input ended; {len(self.out.pending)} request(s) still unanswered after "
                  f"{wire.DRAIN_SECONDS:.0f} s", file=sys.stderr, flush=True)
