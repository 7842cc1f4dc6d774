"""Subcommands that live in their own module: each has ``register(sub, common)`` and ``run(args) -> int``.

``cli.py`` registers them in ``COMMANDS`` order; a module adds its parser with
``sub.add_parser(...)``, calls ``common(parser)`` for --artifacts/--index/--debug,
and sets ``func=run``.
"""

COMMANDS = ("inspect", "watch", "eval")
