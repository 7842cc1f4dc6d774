"""One module per subcommand, each with ``register(sub, common)`` and ``run(args) -> int``.

``cli.py`` registers them in ``COMMANDS`` order (the order ``ragtui --help``
lists them); a module adds its parser with ``sub.add_parser(...)``, calls
``common(parser)`` for --artifacts/--index/--debug/--config, and sets
``func=run``. What settings, index, embedder or agent a command uses comes
from ``ragtui.app``; ``options`` holds flags several commands share.
"""

COMMANDS = ("search", "pack", "ask", "ingest", "inspect", "watch", "eval", "info", "rm", "export", "mcp")
