"""Ingest: bring an index up to date with a folder, writing nothing when nothing changed.

``sync(folder, ...)`` is the one-call form of ``IndexWriter(folder, ...).sync()``
(see ``ragtui.core.ingest.writer``): it walks the folder (or re-examines just
the paths it is given), decides per file whether its content changed, chunks
and embeds only what is new, reuses the stored vectors of every chunk whose
fingerprint it already has, and publishes the four files atomically under
the index lock. When no document changed it writes nothing at all.

A long-running writer (the watch agent) keeps one ``IndexWriter`` instead,
so that each sync starts from what the previous one published.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ragtui.core.embedders.base import Embedder
from ragtui.core.ingest.publish import index_dir, rag_root
from ragtui.core.ingest.report import Progress, SyncReport
from ragtui.core.ingest.state_store import load_state, read_state
from ragtui.core.ingest.walk import WalkRules
from ragtui.core.ingest.writer import IndexWriter, open_published

__all__ = ["IndexWriter", "Progress", "SyncReport", "load_state", "prepare", "sync"]


def sync(
    folder: str | os.PathLike[str],
    *,
    artifacts: str | os.PathLike[str],
    embedder: Embedder,
    index_id: str | None = None,
    max_tokens: int = 256,
    overlap: int = 32,
    k1: float = 1.2,
    b: float = 0.75,
    rules: WalkRules | None = None,
    paths: Iterable[str | os.PathLike[str]] | None = None,
    progress: Progress | None = None,
    replace: bool = False,
) -> SyncReport:
    """Bring ``<artifacts>/rag/<index_id>`` up to date with ``folder``.

    ``paths`` limits the work to those files (and folders: everything under
    them) — the watch agent passes what its events named; every other
    document is taken as unchanged — only while the published generation is
    provably the one the writer's state describes; otherwise (and whenever the
    previous index cannot be read) every file of the folder is read.

    A file that exists but cannot be read now (permissions, I/O) keeps the
    chunks it had, and is reported in ``skipped`` with the reason.

    The index of another folder (by resolved path, as the writer's state
    records it) is never replaced unless ``replace``: ``UsageError`` instead.

    Raises ``UsageError`` for a bad folder,
    ``LockedError`` when another writer holds the index, ``EmbeddingError``
    when the embedder fails (nothing is published then) and ``StorageError``
    when publishing fails (the previous index stays intact). After either
    failure the vectors already embedded are kept (``EmbedJournal``), so the
    next sync does not ask the embedder for them again.
    """
    writer = IndexWriter(folder, artifacts=artifacts, embedder=embedder, index_id=index_id, max_tokens=max_tokens,
                         overlap=overlap, k1=k1, b=b, rules=rules)
    return writer.sync(paths, progress=progress, replace=replace)


def prepare(artifacts: str | os.PathLike[str], index_id: str) -> bool:
    """Whether the published generation of ``index_id`` is the one its writer state describes (reads only).

    True means a sync could splice it rather than rebuild. A long-running
    writer opens it ahead of time with ``IndexWriter.prepare``.
    """
    artifacts = Path(os.path.abspath(artifacts))
    return open_published(index_dir(artifacts, index_id), read_state(artifacts, index_id),
                          rag_root(artifacts) / ".cache") is not None
