"""``ragtui export --format seekite OUT``: publish an index's search as static files with a browser page.

``ragtui export --verify OUT`` checks an export against every rule of
spec/seekite-export.md (exit 3 naming the file when one is broken) and, with
``--query``, answers a BM25F query from it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ragtui import app
from ragtui.commands.options import settings_of
from ragtui.core.errors import UsageError
from ragtui.core.textsafe import json_text

__all__ = ["register", "run"]


def register(sub, common) -> None:
    p = sub.add_parser(
        "export", help="write an index as a static Seekite search folder (index.html + search/)",
        description="Write the index as a Seekite v2 export: OUT/index.html, a page that searches in the "
        "browser, and OUT/search/, the files it reads. Serve OUT with any web server. OUT must be new, "
        "empty, or a previous export (which is replaced as a whole, in one step); not the current directory, "
        "a folder holding it, or a mount point.",
    )
    p.add_argument("out", metavar="OUT", help="the folder to write (or, with --verify, to check)")
    p.add_argument("--format", default="seekite", help="the export format (only seekite, version 2)")
    p.add_argument("--vectors", default="i8", help="vectors.bin as i8 (default), f32, or none")
    p.add_argument("--generated-at", metavar="TIME",
                   help="the manifest's generatedAt (default: now), e.g. 2026-10-09T12:00:00Z: "
                        "with it, the same index gives the same bytes")
    p.add_argument("--with-sources", action="store_true",
                   help="also copy the indexed documents into OUT, where the results' links point, so that a "
                        "static host serves them (only regular files inside the ingested folder)")
    p.add_argument("--verify", action="store_true", help="check the export at OUT instead of writing one")
    p.add_argument("--query", help="with --verify: answer this BM25F query from the export")
    p.add_argument("-k", type=int, default=10, help="with --query: number of results (default: 10)")
    p.add_argument("--json", action="store_true", help="print the summary (or the hits) as JSON")
    common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.format != "seekite":
        raise UsageError(f"unknown export format {args.format!r}: the only one is seekite")
    if args.k < 1:
        raise UsageError(f"-k must be at least 1 (got {args.k})")
    if args.with_sources and args.verify:
        raise UsageError("--with-sources goes with writing an export, not with --verify")
    if args.verify:
        return _verify(args)
    if args.query is not None:
        raise UsageError("--query goes with --verify (it searches an export)")
    from ragtui.core.export.writer import Written, check_generated_at, check_target, export_to, write_export
    from ragtui.core.index.index_format import read_index
    from ragtui.core.ingest.publish import rag_root

    if args.generated_at is not None:
        check_generated_at(args.generated_at)
    if args.vectors not in ("i8", "f32", "none"):
        raise UsageError(f"--vectors must be i8, f32 or none (got {args.vectors!r})")
    settings = settings_of(args)
    keep_clear = (rag_root(settings.artifacts),)
    replacing = check_target(args.out, keep_clear=keep_clear).replacing  # refused before any work
    path = app.resolve_index(settings)
    started = time.perf_counter()
    # Opened lazily: the export's one pass over docs.jsonl checks every line and the order rules as
    # full=True would, without holding every record (a bad line stops it; nothing is written to OUT).
    data = read_index(path, full=False, cache_dir=rag_root(settings.artifacts) / ".cache")
    folder = _source_folder(settings, path) if args.with_sources else None
    written: list[Written] = []
    copied: list = []

    def write(sink) -> None:
        written.append(write_export(data, sink, generated_at=args.generated_at, vectors=args.vectors))
        if folder is not None:
            from ragtui.core.export.sources import write_sources

            copied.append(write_sources(data, folder, sink))

    out = export_to(args.out, write, keep_clear=keep_clear)
    seconds = time.perf_counter() - started
    files = written[0]
    summary = {"out": str(out), "index_id": data.meta.index_id, "chunks": data.meta.n_chunks,
               "files": files.files, "bytes": files.bytes, "replaced": replacing,
               "seconds": round(seconds, 3)}
    if copied:
        c = copied[0]
        summary["sources"] = {"folder": c.folder, "documents": c.documents, "bytes": c.bytes,
                              "skipped": [{"doc_id": d, "why": w} for d, w in c.skipped]}
        _say_skipped(c.skipped)
    if args.json:
        print(json_text(summary, indent=1))
    else:
        from ragtui.core.textsafe import one_line

        print(f"exported {data.meta.n_chunks} chunks of {one_line(data.meta.index_id, 80)} to "
              f"{one_line(str(out), 200)}: {files.files} files, {summary['bytes']:,} bytes in {seconds:.2f} s"
              f"{' (replaced the previous export)' if replacing else ''}")
        if copied:
            print(f"copied {copied[0].documents} documents ({copied[0].bytes:,} bytes) into "
                  f"{one_line(str(out / copied[0].folder), 200)}, where the results link")
        print(f"serve it with: python3 -m http.server -d {one_line(str(out), 200)} 8000, then open "
              "http://localhost:8000/", file=sys.stderr)
    return 0


def _source_folder(settings, path: Path) -> Path:
    """The folder the index was ingested from, as its writer state records it (``UsageError`` when it does not)."""
    from ragtui.core.citations import source_folder

    folder = source_folder(settings.artifacts, path.name)
    if folder is None:
        raise UsageError(f"index {path.name!r} does not record the folder it was ingested from, so --with-sources "
                         "has nothing to copy: ingest the folder again, or export without --with-sources")
    return folder


def _say_skipped(skipped: list[tuple[str, str]], shown: int = 10) -> None:
    from ragtui.core.textsafe import one_line

    for doc_id, why in skipped[:shown]:
        print(f"ragtui: note: not copied: {one_line(doc_id, 200)}: {why}", file=sys.stderr)
    if len(skipped) > shown:
        print(f"ragtui: note: {len(skipped) - shown} more documents not copied (--json lists them)", file=sys.stderr)


def _verify(args) -> int:
    from ragtui.core.export.reader import read_export
    from ragtui.core.search.retriever import check_query
    from ragtui.core.textsafe import one_line

    if args.query is not None:
        check_query(args.query)
    export = read_export(args.out)
    export.verify_text()
    if args.query is not None:
        hits = export.search(args.query, args.k)
        if args.json:
            print(json_text([{"rank": h.rank, "score": h.score, "chunk": h.chunk, "chunk_id": h.chunk_id,
                              "url": h.url, "title": h.title, "heading": h.heading, "content": h.content}
                             for h in hits], indent=1))
        else:
            for h in hits:
                print(f"{h.rank:>3}  {h.score:9.4f}  {one_line(h.chunk_id, 60)}  {one_line(h.content, 60)}")
        return 0 if hits else 1
    summary = {name: {"chunks": c.n_chunks, "terms": len(c.terms), "files": len(c.files),
                      "bytes": sum(c.files.values()), "vectors": c.vector_dtype}
               for name, c in export.corpora.items()}
    if args.json:
        print(json_text({"ok": True, "generatedAt": export.generated_at, "corpora": summary}, indent=1))
    else:
        for name, s in summary.items():
            print(f"ok: {one_line(name, 80)}: {s['chunks']} chunks, {s['terms']} terms, {s['files']} files, "
                  f"{s['bytes']:,} bytes, vectors {s['vectors'] or 'none'}")
    return 0
