"""Flags that more than one subcommand takes (not a subcommand itself)."""

from __future__ import annotations

import argparse

__all__ = ["add_folder_options"]


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
