"""Flags that more than one subcommand takes (not a subcommand itself)."""

from __future__ import annotations

import argparse

__all__ = ["add_folder_options", "add_rerank_options", "warn_truncation"]


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


def warn_truncation(embedder: object, max_tokens: int) -> None:
    """Say once when the chunks are longer than the embedding model reads (ONNX models have a maximum)."""
    import sys

    notice = getattr(embedder, "truncation_notice", None)
    message = notice(max_tokens) if notice is not None else None
    if message:
        print(f"ragtui: note: {message}", file=sys.stderr)
