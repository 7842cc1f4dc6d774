"""One module per subcommand, each with ``register(sub, common)`` and ``run(args) -> int``.

``COMMANDS`` names them, in the order ``ragtui --help`` lists them, with the
one line it shows for each (the same ``help=`` the module gives its parser; a
test checks that they agree). ``cli.py`` imports a command's module only when
that command runs, so ``--help`` and ``--version`` import none of them. A
module adds its parser with ``sub.add_parser(...)``, calls
``common(parser)`` for --artifacts/--index/--debug/--config, and sets
``func=run``. What settings, index, embedder or agent a command uses comes
from ``ragtui.app``; ``options`` holds flags several commands share.
"""

COMMANDS = {
    "search": "rank chunks for a query",
    "pack": "pack the chunks for a query into a token budget, with [path:Lstart-Lend] labels",
    "ask": "answer a question from the index with a chat model; every citation is checked",
    "ingest": "build or update the index of a folder",
    "inspect": "show a chunk's source lines and freshness; check an answer's citations",
    "watch": "keep the index of a folder up to date as its files change",
    "eval": "measure retrieval quality on a labelled dataset (nDCG, recall, latency), or compare two reports",
    "info": "which artifacts root is in use, the indexes there, or one index's stats (validates it)",
    "rm": "delete an index (with its writer state and cache)",
    "export": "write an index as a static Seekite search folder (index.html + search/)",
    "mcp": "serve the indexes to an MCP client over stdio (tools: search, get, pack, list_indexes)",
    "doctor": "check what ragtui depends on (root, embedder, extras, [llm] server, chromium, inotify)",
    "completion": "print a shell completion script (bash, zsh or fish)",
}
