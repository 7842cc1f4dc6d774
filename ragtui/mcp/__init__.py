"""``ragtui mcp``: the index served to agents as MCP tools over stdio.

``tools`` holds the tools (schemas, the strict argument check, what each does through
``ragtui.app``) and needs no SDK; ``server`` wires them to the official ``mcp`` SDK.
"""
