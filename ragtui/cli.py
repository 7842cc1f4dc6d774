"""The ``ragtui`` command: parse arguments, call one function per subcommand, map errors to exit codes.

Exit codes (every command): 0 success · 1 nothing found · 2 bad usage or bad
input · 3 index or storage integrity failure, or an embedding backend that
failed. Errors are one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from ragtui.config import Settings, load_settings
from ragtui.core.errors import RagtuiError, UsageError
from ragtui.core.textsafe import json_text
from ragtui.progress import ProgressDisplay

__all__ = ["main"]

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_FAILURE = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one actionable line, exit 2
        self.exit(EXIT_USAGE, f"ragtui: error: {message} (see `{self.prog} --help`)\n")


def add_folder_options(p: argparse.ArgumentParser) -> None:
    """The walk and chunker flags shared by ``ingest`` and ``watch`` (the same flags give the same index)."""
    p.add_argument("--include", action="append", metavar="PATTERN",
                   help="gitignore-style pattern, relative to the folder, of files to index "
                   "(repeatable; replaces the default text-like names), e.g. '*.md' or 'docs/'")
    p.add_argument("--exclude", action="append", metavar="PATTERN",
                   help="gitignore-style pattern, relative to the folder, of files or folders to leave out "
                   "(repeatable; added to the defaults), e.g. 'docs/drafts', '/build', '**/tmp/'")
    p.add_argument("--no-ignore", action="store_true",
                   help="do not apply the folder's .gitignore and .ignore files")
    p.add_argument("--max-bytes", type=int, metavar="N", help="skip files larger than N bytes (default 16 MiB)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="chunk window in tokens (default 256)")
    p.add_argument("--overlap", type=int, metavar="N", help="tokens shared by consecutive chunks (default 32)")


def folder_settings(args, verb: str):
    """(settings, folder, index_id, WalkRules) from ``add_folder_options`` flags; UsageError when they are off."""
    from ragtui.core.patterns import check_patterns
    from ragtui.core.walk import DEFAULT_INCLUDE, DEFAULT_MAX_BYTES, WalkRules

    settings = load_settings(config=getattr(args, "config", None)).with_flags(
        artifacts=getattr(args, "artifacts", None), max_tokens=args.max_tokens, overlap=args.overlap
    )
    folder = Path(args.folder)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder: give the folder of documents to {verb}")
    if args.max_bytes is not None and args.max_bytes < 1:
        raise UsageError(f"--max-bytes must be at least 1 (got {args.max_bytes})")
    index_id = getattr(args, "index", None) or settings.index or Path(os.path.abspath(folder)).name
    # A pattern that is not one is bad usage (exit 2) before anything is read or written.
    check_patterns(tuple(args.include or ()), "--include")
    check_patterns(tuple(args.exclude or ()), "--exclude")
    rules = WalkRules(
        include=tuple(args.include) if args.include else DEFAULT_INCLUDE,
        exclude=tuple(args.exclude or ()),
        max_bytes=args.max_bytes or DEFAULT_MAX_BYTES,
        ignore_files=not args.no_ignore,
    )
    return settings, folder, index_id, rules


def add_rerank_options(p: argparse.ArgumentParser) -> None:
    """--rerank N, --rerank-budget-ms, --rerank-model (search, eval and the UI)."""
    p.add_argument("--rerank", type=int, metavar="N", default=argparse.SUPPRESS,
                   help="rerank the top N candidates with a cross-encoder (needs the onnx extra; 0: off; "
                   "default: [rerank] n, else off)")
    p.add_argument("--rerank-budget-ms", type=float, metavar="MS", default=argparse.SUPPRESS,
                   help="stop reranking a query after MS milliseconds and merge what was scored (default: no limit)")
    p.add_argument("--rerank-model", metavar="PRESET|DIR", default=argparse.SUPPRESS,
                   help="cross-encoder preset (ms-marco-minilm) or model folder (default: [rerank] model)")


def rerank_options(args, settings: Settings) -> tuple[int, float | None]:
    """(n, budget_ms) from the flags, else the [rerank] settings; n = 0 means off."""
    n = getattr(args, "rerank", None)
    n = settings.rerank.get("n", 0) if n is None else n
    budget = getattr(args, "rerank_budget_ms", None)
    budget = settings.rerank.get("budget_ms") if budget is None else budget
    if type(n) is not int or n < 0:
        raise UsageError(f"--rerank must be 0 (off) or a number of candidates (got {n})")
    if budget is not None and (budget != budget or budget < 0):
        raise UsageError(f"--rerank-budget-ms must be a number of milliseconds >= 0 (got {budget})")
    return n, (budget or None)


def with_rerank_flags(args, settings: Settings) -> Settings:
    """``settings`` whose ``[rerank]`` table holds the --rerank* flags (checked)."""
    from dataclasses import replace

    n, budget = rerank_options(args, settings)
    table = {**settings.rerank, "n": n, "budget_ms": budget or 0}
    model = getattr(args, "rerank_model", None)
    if model is not None:
        from ragtui.core.embedders.onnx_model import is_preset_name

        table.pop("model", None)
        table.pop("model_dir", None)
        table["model" if is_preset_name(model) else "model_dir"] = model
    return replace(settings, rerank=table)


def open_reranker(args, settings: Settings):
    from ragtui.core.rerank import make_reranker

    return make_reranker(settings.rerank, model=getattr(args, "rerank_model", None))


_CONFIG_HELP = ("a ragtui.toml to use instead of ./ragtui.toml, trusted to set base_url and api_key_env "
                "(default: ~/.config/ragtui/ragtui.toml, then ./ragtui.toml)")


def _common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps a value given before the subcommand (`ragtui --artifacts X search q`).
    p.add_argument("--artifacts", metavar="DIR", default=argparse.SUPPRESS,
                   help="artifacts root (default: $RAGTUI_ARTIFACTS or /artifacts)")
    p.add_argument("--index", metavar="ID", default=argparse.SUPPRESS,
                   help="index id (default: the only index, or the folder's name)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=_CONFIG_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ragtui",
        description="Local retrieval you can watch and look into. "
        "With no command, opens the terminal UI on an index.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--config", metavar="FILE", help=_CONFIG_HELP)
    parser.add_argument("--artifacts", metavar="DIR", help="artifacts root (default: $RAGTUI_ARTIFACTS or /artifacts)")
    parser.add_argument("--index", metavar="ID", help="the index to open in the UI")
    parser.add_argument("--watch", metavar="FOLDER", help="UI: also run the sync agent on FOLDER in-process")
    add_rerank_options(parser)  # the UI's; `x` turns reranking on and off there
    parser.add_argument("--version", action="version", version=f"ragtui {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("search", help="rank chunks for a query", description="Rank chunks for a query.")
    p.add_argument("query")
    p.add_argument("--mode", default="bm25", help="flat, ivf, bm25 or hybrid (default: bm25)")
    p.add_argument("-k", type=int, default=10, help="number of results (default: 10)")
    p.add_argument("--nprobe", type=int, help="IVF lists to probe")
    p.add_argument("--json", action="store_true", help="print the full hits as JSON")
    add_rerank_options(p)
    _common(p)
    p.set_defaults(func=cmd_search)

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
    _common(p)
    p.set_defaults(func=cmd_ingest)

    import importlib

    from ragtui.commands import COMMANDS

    for name in COMMANDS:
        try:
            module = importlib.import_module(f"ragtui.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"ragtui.commands.{name}":
                raise
            continue
        module.register(sub, _common)

    p = sub.add_parser("info", help="list indexes, or show one index's stats (validates it)")
    p.add_argument("--json", action="store_true")
    _common(p)
    p.set_defaults(func=cmd_info)
    return parser


def _version() -> str:
    from ragtui import __version__

    return __version__


# -- helpers ----------------------------------------------------------------------


def settings_from(args) -> Settings:
    return load_settings(config=getattr(args, "config", None)).with_flags(
        artifacts=getattr(args, "artifacts", None), index=getattr(args, "index", None)
    )


def list_indexes(settings: Settings) -> list[str]:
    from ragtui.core.publish import rag_root

    root = rag_root(settings.artifacts)
    try:
        return sorted(e.name for e in os.scandir(root) if not e.name.startswith(".") and e.is_dir())
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UsageError(f"cannot list {root}: {e.strerror}") from None


def resolve_index(settings: Settings) -> Path:
    """The index directory the command should use."""
    from ragtui.core.publish import index_dir

    if settings.index:
        return index_dir(settings.artifacts, settings.index)
    names = list_indexes(settings)
    if len(names) == 1:
        return index_dir(settings.artifacts, names[0])
    if not names:
        raise UsageError(
            f"no index under {settings.artifacts}/rag: build one with `ragtui ingest FOLDER` "
            "(or point --artifacts / RAGTUI_ARTIFACTS at an existing artifacts root)"
        )
    raise UsageError(f"several indexes under {settings.artifacts}/rag ({', '.join(names)}): choose one with --index")


def open_embedder(settings: Settings):
    from ragtui.core.embedders import make_embedder

    options = dict(settings.embedder)
    kind = options.pop("kind", "wordllama")
    return make_embedder(kind, **options)


def open_retriever(settings: Settings, *, need_embedder: bool):
    from ragtui.core.ivf import IVFParams
    from ragtui.core.publish import rag_root
    from ragtui.core.retriever import Retriever

    path = resolve_index(settings)
    embedder = open_embedder(settings) if need_embedder else None
    params = IVFParams(nlist=settings.nlist, nprobe=settings.nprobe) if (settings.nlist or settings.nprobe) else None
    retriever = Retriever.open(path, embedder=embedder, ivf_params=params, cache_dir=rag_root(settings.artifacts) / ".cache")
    if embedder is not None:
        retriever.check_embedder(embedder)
    return retriever


# -- commands ---------------------------------------------------------------------


def cmd_search(args) -> int:
    from ragtui.core.textsafe import one_line

    if args.k < 1:
        raise UsageError(f"-k must be at least 1 (got {args.k})")
    settings = settings_from(args)
    n_rerank, budget = rerank_options(args, settings)
    reranker = open_reranker(args, settings) if n_rerank else None
    retriever = open_retriever(settings, need_embedder=args.mode != "bm25")
    params = {"nprobe": args.nprobe} if args.nprobe else {}
    hits = retriever.search(args.query, mode=args.mode, k=max(args.k, n_rerank), **params)
    reranked = None
    if reranker is not None:
        from ragtui.core.rerank import rerank

        reranked = rerank(args.query, hits, reranker, n_rerank, budget_ms=budget)
        hits = list(reranked.hits)
    hits = hits[: args.k]
    if args.json:
        out = [
            {"rank": h.rank, "score": h.score, "chunk_id": h.chunk_id, "doc_id": h.doc_id, "row": h.row, "text": h.text}
            for h in hits
        ]
        if reranked is not None:  # which scores are the cross-encoder's, and where each hit was before
            for row, before in zip(out, reranked.first_stage_rank):
                row["reranked"] = before <= reranked.scored
                row["first_stage_rank"] = before
        sys.stdout.write(json_text(out, indent=1) + "\n")
    else:
        width = max(40, _term_width() - 40)
        for h in hits:
            print(f"{h.rank:>3}  {h.score:9.4f}  {one_line(h.chunk_id, 60)}  {one_line(h.text, width)}")
        ms = retriever.last_search_seconds * 1000
        extra = f"; {reranked.describe()} in {reranked.seconds * 1000:.0f} ms" if reranked is not None else ""
        print(f"{len(hits)} result(s), {args.mode}, {ms:.1f} ms{extra}", file=sys.stderr)
    return EXIT_OK if hits else EXIT_NOT_FOUND


def cmd_ingest(args) -> int:
    from ragtui.core.sync import sync

    settings, folder, index_id, rules = folder_settings(args, "index")
    embedder = open_embedder(settings)
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
    return EXIT_OK


def warn_truncation(embedder, max_tokens: int) -> None:
    """Say once when the chunks are longer than the embedding model reads (ONNX models have a maximum)."""
    notice = getattr(embedder, "truncation_notice", None)
    message = notice(max_tokens) if notice is not None else None
    if message:
        print(f"ragtui: note: {message}", file=sys.stderr)


def _warn(report) -> None:
    from ragtui.core.textsafe import one_line

    for warning in report.warnings:
        print(f"ragtui: warning: {one_line(warning, 2000)}", file=sys.stderr)


def cmd_info(args) -> int:
    from ragtui.core.index_format import read_index

    settings = settings_from(args)
    if not settings.index and len(list_indexes(settings)) != 1:
        names = list_indexes(settings)
        if args.json:
            print(json.dumps({"artifacts": str(settings.artifacts), "indexes": names}))
        elif names:
            print("\n".join(names))
        else:
            print(f"no index under {settings.artifacts}/rag (build one with `ragtui ingest FOLDER`)", file=sys.stderr)
        return EXIT_OK if names else EXIT_NOT_FOUND
    data = read_index(resolve_index(settings))
    info = {"path": str(data.path), **data.meta.to_json(), "n_documents": len({r.doc_id for r in data.records})}
    info["n_terms"] = data.bm25.n_terms
    if args.json:
        print(json_text(info, indent=1))
    else:
        for key, value in info.items():
            print(f"{key:>16}: {value}")
    return EXIT_OK


def _launch_tui(args) -> int:
    try:
        from ragtui.tui.launch import launch
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("ragtui.tui"):
            raise
        build_parser().print_help()
        return EXIT_OK
    return launch(args)


def _term_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 120


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False) or "--debug" in argv
    if args.command is None:
        args.func = _launch_tui
    try:
        return args.func(args)
    except RagtuiError as e:
        if debug:
            traceback.print_exc()
        from ragtui.core.textsafe import one_line

        # Messages may quote paths or text from documents: keep them to one safe line.
        print(f"ragtui: error: {one_line(str(e), 2000)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("ragtui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`); not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:  # a bug: still one line, and the traceback on request
        if debug:
            traceback.print_exc()
        print(f"ragtui: internal error: {type(e).__name__}: {e} (run with --debug for details)", file=sys.stderr)
        return EXIT_FAILURE
