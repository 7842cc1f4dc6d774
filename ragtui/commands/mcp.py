"""``ragtui mcp``: serve the indexes to an MCP client (an agent) over stdio.

Tools: search, get, pack, list_indexes (``ragtui.mcp.tools``). The settings (--artifacts, --index,
--config, ragtui.toml) are read once at start; a bad one exits 2 before serving. Needs the ``mcp``
package (a dependency of ragtui).
"""

from __future__ import annotations

from ragtui.commands.options import settings_of

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve the indexes to an MCP client over stdio (tools: search, get, pack, list_indexes)",
        description="An MCP server over stdio: an agent can search the index, fetch chunks or source lines with "
        "their freshness, pack a budgeted context, and list the indexes. Configure your MCP client to run "
        "`ragtui mcp --artifacts DIR`.",
    )
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from importlib.metadata import PackageNotFoundError, version

    from ragtui.core.errors import UsageError

    settings = settings_of(args)
    try:
        from ragtui.mcp.server import serve_stdio
    except ImportError as e:
        raise UsageError(f"ragtui mcp needs the mcp package ({e}): pip install 'mcp>=2.3,<3'") from None
    try:
        ours = version("ragtui")
    except PackageNotFoundError:  # run from a source tree that is not installed
        ours = "0+unknown"
    serve_stdio(settings, ours)
    return 0
