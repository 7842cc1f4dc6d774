"""Flags that more than one subcommand takes (not a subcommand itself)."""

from __future__ import annotations

import argparse

__all__ = ["add_folder_options", "add_ranking_options", "add_rerank_options", "warn_truncation"]


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


def add_ranking_options(p: argparse.ArgumentParser) -> None:
    """The ranking flags of search and eval (spec/ranking.md); ``ragtui.app.search_params`` reads them.

    Each overrides the same key of ``[search]`` in ragtui.toml; the defaults are the search's own.
    """
    g = p.add_argument_group("ranking (defaults: [search] in ragtui.toml, else spec/ranking.md)")
    g.add_argument("--fusion", metavar="weighted|zscore|rrf",
                   help="how hybrid fuses BM25 and the vectors (default: fitted to the index's embedder, docs/quality.md)")
    g.add_argument("--weight", type=float, metavar="W", help="weighted and zscore fusion: the lexical share, 0..1 (default: fitted)")
    g.add_argument("--rrf-k", type=float, metavar="K", help="rrf fusion: the rank offset, 0..1e6 (default: 60)")
    g.add_argument("--depth", type=int, metavar="N",
                   help="hybrid: candidates fused from each list, whatever -k (1..100000, default: 100)")
    g.add_argument("--lexical", metavar="bm25doc|bm25|bm25stem", help="hybrid's lexical side (default: fitted)")
    g.add_argument("--chunk-weight", type=float, metavar="X",
                   help="bm25doc: a chunk's own BM25 added to its document's, 0..100 (default: 0.5)")
    g.add_argument("--mmr", type=float, metavar="LAMBDA",
                   help="diversify: MMR over chunk vectors, 0..1 (1: off; lower: more diverse)")
    g.add_argument("--min-score", type=float, metavar="S",
                   help="drop hits scoring below S (bm25: raw score; flat, ivf: cosine; hybrid: 0..1)")
    g.add_argument("--merge", action=argparse.BooleanOptionalAction, default=None,
                   help="merge neighbouring chunks of one document into one hit")


def warn_truncation(embedder: object, max_tokens: int) -> None:
    """Say once when the chunks are longer than the embedding model reads (ONNX models have a maximum)."""
    import sys

    notice = getattr(embedder, "truncation_notice", None)
    message = notice(max_tokens) if notice is not None else None
    if message:
        print(f"ragtui: note: {message}", file=sys.stderr)
