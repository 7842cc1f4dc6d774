"""``ragtui`` with no subcommand: open the terminal UI (called by ``ragtui.cli``; settings from ``ragtui.app``)."""

from __future__ import annotations

from pathlib import Path

from ragtui.core.errors import UsageError

__all__ = ["launch"]


def launch(args) -> int:
    """Run the app for the parsed ``args`` (artifacts, index, watch, debug) until the person quits.

    Returns the exit code. Problems the UI can show (no index, a broken
    index, no embedder) are shown there; only no terminal on stdin or stdout,
    a bad ``--watch`` folder or a bad configuration file stops it before it
    starts (``UsageError``).
    """
    import os

    from ragtui.app import settings_from, with_rerank
    from ragtui.request import rerank_values
    from ragtui.tui.ragtui_app import create_app

    settings = settings_from(config=getattr(args, "config", None), artifacts=getattr(args, "artifacts", None),
                             index=getattr(args, "index", None))
    n, budget = rerank_values(settings, getattr(args, "rerank", None), getattr(args, "rerank_budget_ms", None))
    settings = with_rerank(settings, n, budget, getattr(args, "rerank_model", None))
    watch = getattr(args, "watch", None)
    if watch is not None and not Path(watch).is_dir():
        raise UsageError(f"--watch {watch}: not a folder (give the folder of documents to keep indexed)")
    # Without a terminal on both ends the UI cannot read keys or draw, and would wait for ever.
    missing = [name for fd, name in ((0, "stdin"), (1, "stdout")) if not os.isatty(fd)]
    if missing:
        raise UsageError(f"the terminal UI needs a terminal, but {' and '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not one: in scripts and pipes use "
                         "`ragtui search QUERY` (and `ragtui info` to list the indexes)")
    app = create_app(settings, watch=watch, debug=bool(getattr(args, "debug", False)))
    app.run()
    return app.return_code or 0
