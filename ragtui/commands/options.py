"""Flags that more than one subcommand takes (not a subcommand itself)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragtui.config import Settings
    from ragtui.request import SearchRequest

__all__ = [
    "add_folder_options", "add_mode_option", "add_query_options", "add_ranking_options", "add_rerank_options",
    "folder_values", "ranking_values", "request_of", "settings_of", "warn_truncation",
]


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings for the global flags (--config, --artifacts, --index), through ``ragtui.app``."""
    from ragtui import app

    return app.settings_from(config=getattr(args, "config", None), artifacts=getattr(args, "artifacts", None),
                             index=getattr(args, "index", None))


def folder_values(args: argparse.Namespace) -> dict[str, Any]:
    """The values of ``add_folder_options``' flags (and the global ones), for ``ragtui.app.folder_settings``."""
    return {"config": getattr(args, "config", None), "artifacts": getattr(args, "artifacts", None),
            "index": getattr(args, "index", None), "max_tokens": args.max_tokens, "overlap": args.overlap,
            "include": args.include, "exclude": args.exclude, "max_bytes": args.max_bytes,
            "ignore_files": not args.no_ignore, "no_documents": getattr(args, "no_documents", False)}


def ranking_values(args: argparse.Namespace) -> dict[str, Any]:
    """The ranking flags given (``add_ranking_options``), by option name; absent ones are None."""
    from ragtui.core.search.ranking_options import NAMES

    return {name: getattr(args, name, None) for name in NAMES}


def request_of(args: argparse.Namespace, settings: Settings, query: str, *, default_mode: str, default_k: int,
               literal: bool = False, strict_options: bool = True) -> SearchRequest:
    """The ``SearchRequest`` for a command's flags (``ragtui.request.build_request``: the one place that decides)."""
    from ragtui.request import build_request

    return build_request(
        settings, query, mode=getattr(args, "mode", None), k=getattr(args, "k", None), options=ranking_values(args),
        nprobe=getattr(args, "nprobe", None), index=settings.index, every=getattr(args, "all", False),
        rerank=getattr(args, "rerank", None), rerank_budget_ms=getattr(args, "rerank_budget_ms", None),
        strict=getattr(args, "strict", False), literal=literal, style="flag", default_mode=default_mode,
        default_k=default_k, strict_options=strict_options)


def add_mode_option(p: argparse.ArgumentParser, default: str) -> None:
    """--mode, its help listing the modes of ``core.search.modes`` (checked, with a did-you-mean, by the request)."""
    from ragtui.core.search.modes import MODE_TABLE, modes_text

    lines = "; ".join(f"{m.name}: {m.help}" for m in MODE_TABLE)
    p.add_argument("--mode", default=None, metavar="MODE",
                   help=f"{modes_text(default=default)}. {lines}")


def add_query_options(p: argparse.ArgumentParser) -> None:
    """--strict: refuse a query that cannot be read as query syntax (default: search it as plain text, with a note)."""
    p.add_argument("--strict", action="store_true",
                   help="refuse a query whose syntax is malformed, or that names an unknown filter (default: "
                   "search it as plain text and say so)")


def add_folder_options(p: argparse.ArgumentParser) -> None:
    """The walk and chunker flags shared by ``ingest`` and ``watch`` (the same flags give the same index).

    ``ragtui.app.folder_settings`` turns them into settings and ``WalkRules``.
    """
    p.add_argument("--include", action="append", metavar="PATTERN",
                   help="gitignore-style pattern, relative to the folder, of files to index "
                   "(repeatable; replaces the default text-like names), e.g. '*.md' or 'docs/'")
    p.add_argument("--exclude", action="append", metavar="PATTERN",
                   help="gitignore-style pattern, relative to the folder, of files or folders to leave out "
                   "(repeatable; added to the defaults), e.g. 'docs/drafts', '/build', '**/tmp/'")
    p.add_argument("--no-documents", action="store_true",
                   help="read text files only: no PDF, HTML, Word, EPUB or OpenDocument files "
                   "(the [ingest] kinds setting chooses kinds one by one)")
    p.add_argument("--no-ignore", action="store_true",
                   help="do not apply the folder's .gitignore and .ignore files")
    p.add_argument("--max-bytes", type=int, metavar="N", help="skip files larger than N bytes (default 16 MiB)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="chunk window in tokens (default 256)")
    p.add_argument("--overlap", type=int, metavar="N", help="tokens shared by consecutive chunks (default 32)")


def add_rerank_options(p: argparse.ArgumentParser) -> None:
    """--rerank N, --rerank-budget-ms, --rerank-model (search, eval and the UI); ``ragtui.app.rerank_options`` reads them."""
    p.add_argument("--rerank", type=int, metavar="N", default=argparse.SUPPRESS,
                   help="rerank the top N candidates with a cross-encoder (needs the onnx extra; 0: off; "
                   "default: [rerank] n, else off)")
    p.add_argument("--rerank-budget-ms", type=float, metavar="MS", default=argparse.SUPPRESS,
                   help="stop reranking a query after MS milliseconds and merge what was scored (default: no limit)")
    p.add_argument("--rerank-model", metavar="PRESET|DIR", default=argparse.SUPPRESS,
                   help="cross-encoder preset (ms-marco-minilm) or model folder (default: [rerank] model)")


def add_ranking_options(p: argparse.ArgumentParser) -> None:
    """The ranking flags of search and eval (spec/ranking.md); ``ragtui.app.search_params`` reads them.

    Each overrides the same key of ``[search]`` in ragtui.toml; the defaults are the search's own.
    """
    from ragtui.core.search.ranking_options import BOOLEANS, DESCRIPTIONS, NAMES, RANGES

    g = p.add_argument_group("ranking (defaults: [search] in ragtui.toml, else spec/ranking.md)")
    metavars = {"fusion": "weighted|zscore|rrf", "weight": "W", "rrf_k": "K", "depth": "N",
                "lexical": "bm25doc|bm25|bm25stem", "chunk_weight": "X", "mmr": "LAMBDA", "min_score": "S"}
    for name in NAMES:
        flag = "--" + name.replace("_", "-")
        if name in BOOLEANS:
            g.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=DESCRIPTIONS[name])
            continue
        kind = int if name == "depth" else float if name in RANGES else str
        g.add_argument(flag, type=kind, metavar=metavars[name], help=DESCRIPTIONS[name])


def warn_truncation(embedder: object, max_tokens: int) -> None:
    """Say once when the chunks are longer than the embedding model reads (ONNX models have a maximum)."""
    import sys

    notice = getattr(embedder, "truncation_notice", None)
    message = notice(max_tokens) if notice is not None else None
    if message:
        print(f"ragtui: note: {message}", file=sys.stderr)
