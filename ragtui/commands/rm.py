"""``ragtui rm INDEX``: delete an index, its writer state and its cached arrays (under its writer lock).

Asks first on a terminal; elsewhere it needs --yes (a script that forgot it
gets exit 2 and a hint, not a deletion). Exit 2 for a name that is not an
index, 3 while a writer holds it.
"""

from __future__ import annotations

import sys

from ragtui import app
from ragtui.commands.options import settings_of
from ragtui.core.errors import UsageError
from ragtui.core.textsafe import one_line

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser(
        "rm",
        help="delete an index (with its writer state and cache)",
        description="Delete <artifacts>/rag/INDEX: the index, its generations, its writer state and its cached "
        "arrays, under the index's writer lock (refused while ingest or watch is writing it). The documents "
        "it was built from are not touched. Asks for confirmation on a terminal; elsewhere pass --yes.",
    )
    p.add_argument("index_id", metavar="INDEX", help="the index id (see `ragtui info`)")
    p.add_argument("-y", "--yes", action="store_true", help="delete without asking")
    common(p)
    p.set_defaults(func=run)


def _confirm(question: str) -> bool:
    sys.stderr.write(question)
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def run(args) -> int:
    from ragtui.core.citations import source_folder
    from ragtui.core.ingest.publish import index_dir
    from ragtui.core.ingest.remove import index_kind, remove_index

    settings = settings_of(args)
    index_id = args.index_id
    names, _broken = app.scan_indexes(settings)
    listed = ", ".join(names) if names else "none"
    try:
        index_kind(index_dir(settings.artifacts, index_id))
    except UsageError as e:
        raise UsageError(f"{e} (indexes under {settings.artifacts}/rag: {listed}; {app.root_hint(settings)})") from None
    if not args.yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise UsageError(f"not deleting index {index_id!r} without a confirmation: no terminal to ask on; "
                             "pass --yes to delete it")
        folder = source_folder(settings.artifacts, index_id)
        built = f", built from {folder}" if folder is not None else ""
        if not _confirm(one_line(f"Delete index {index_id!r} under {settings.artifacts}/rag{built}? [y/N] ", 2000)):
            print("ragtui: nothing deleted", file=sys.stderr)
            return 1
    report = remove_index(settings.artifacts, index_id)
    parts = [f"{report.generations} generation(s)"]
    if report.state:
        parts.append("writer state")
    parts.append(f"{len(report.cache_entries)} cache entr{'y' if len(report.cache_entries) == 1 else 'ies'}")
    print(f"deleted index {index_id} from {settings.artifacts}/rag ({report.link}; {', '.join(parts)})")
    return 0
