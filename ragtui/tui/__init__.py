"""The Textual terminal UI of ragtui.

``ragtui.tui.app.create_app(settings, ...)`` builds the app (the CLI and the
tests use it); ``ragtui.tui.launch.launch(args)`` runs it for ``ragtui``
with no subcommand. The UI calls ``ragtui.core`` (``Retriever``, citations)
and ``ragtui.watch`` only, through ``ragtui.tui.backend``; it never reads
index files itself.
"""
