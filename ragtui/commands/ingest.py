"""``ragtui ingest FOLDER``: build or update the folder's index (writes nothing when nothing changed)."""

from __future__ import annotations

import sys

from ragtui import app
from ragtui.commands.options import add_folder_options, folder_values, warn_truncation
from ragtui.core.textsafe import json_text
from ragtui.progress import ProgressDisplay

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser(
        "ingest",
        help="build or update the index of a folder",
        description="Build or update <artifacts>/rag/<index_id>/ from a folder of documents. "
        "Writes nothing when nothing changed.",
    )
    p.add_argument("folder", help="the folder of documents (its name is the default index id)")
    add_folder_options(p)
    p.add_argument("--replace", action="store_true",
                   help="replace the index of another folder that has the same index id (default: refuse)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ragtui.core.ingest.sync import sync

    settings, folder, index_id, rules = app.folder_settings(args.folder, "index", **folder_values(args))
    embedder = app.open_embedder(settings, warm=False)  # its model files are read only if something changed
    app.prepare_root(settings)  # a root that cannot be written fails now, not after the walk and embedding
    warn_truncation(embedder, settings.max_tokens)
    show = not args.quiet and not args.json and sys.stderr.isatty()
    with ProgressDisplay(show) as progress:
        report = sync(
            folder,
            artifacts=settings.artifacts,
            embedder=embedder,
            index_id=index_id,
            max_tokens=settings.max_tokens,
            overlap=settings.overlap,
            rules=rules,
            progress=progress.update,
            replace=args.replace,
        )
    app.remember_index(settings, index_id)  # the next search without --index means this one
    if args.json:
        print(json_text(report.to_json(), indent=1))
        _warn(report)
    else:
        from ragtui.core.textsafe import neutralize

        for path, reason in report.skipped:
            print(f"skipped {neutralize(path)}: {reason}", file=sys.stderr)
        _warn(report)
        if report.rebuilt:
            print(f"note: {report.rebuilt}", file=sys.stderr)
        print(report.summary())
    return 0


def _warn(report) -> None:
    from ragtui.core.textsafe import one_line

    for warning in report.warnings:
        print(f"ragtui: warning: {one_line(warning, 2000)}", file=sys.stderr)
