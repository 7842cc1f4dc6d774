"""The MCP server of ``ragtui mcp``: ``mcp.tools`` served over stdio with the official ``mcp`` SDK.

It uses the SDK's low-level ``Server`` so that ragtui, not the SDK, decides what an argument may be:
``tools/list`` gives every tool's JSON Schema (``additionalProperties: false``), and ``tools/call``
checks the arguments strictly (``tools.check_arguments``) before anything runs. A failing tool
answers a result with ``is_error`` set and one line saying what failed and what to do, as the CLI
would print it; the server goes on. Tools run in a worker thread, so a slow search does not stall
the protocol. Nothing is ever written to stdout but the protocol (notes go to stderr).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from ragtui.config import Settings
from ragtui.core.errors import RagtuiError
from ragtui.core.textsafe import json_text, one_line
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
    """Serve until the client closes stdin."""
    server = build_server(settings, version)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
