"""What one sync did: ``SyncReport``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Progress", "SyncReport"]

Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stages "scan", "chunk", "embed", "write"."""


@dataclass
class SyncReport:
    """What one sync did. ``published`` is False when nothing was written."""

    index_id: str
    index_path: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks_total: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = 0
    published: bool = False
    incremental: bool = False
    """Whether the publish spliced the previous generation (only changed documents rebuilt)."""
    rebuilt: str | None = None
    """Why every document was re-chunked (settings changed, unreadable index), if it was."""
    warnings: list[str] = field(default_factory=list)
    """One line each: an ``--include``/``--exclude`` pattern that matched nothing (whole-folder syncs); an overlay
    that could not be written (the watch agent's saves: the save is searchable once published)."""
    seconds: dict[str, float] = field(default_factory=dict)
    bytes_written: int = 0
    embedding: dict[str, float] | None = None
    """The embedding server's requests of this run, with those that timed out or were retried and the work they
    cost (embedders that pace their requests: the HTTP one); None for the others."""

    def summary(self) -> str:
        files = f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, {self.unchanged} unchanged"
        chunks = f"{self.chunks_total} chunks (+{self.chunks_added} -{self.chunks_removed}, {self.chunks_embedded} embedded)"
        what = "published" if self.published else "nothing to write"
        skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
        return f"{self.index_id}: {files}{skipped}; {chunks}; {what} in {self.seconds.get('total', 0.0):.2f} s"

    def to_json(self) -> dict[str, Any]:
        return {
            "index_id": self.index_id,
            "index_path": self.index_path,
            "published": self.published,
            "incremental": self.incremental,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "chunks": {
                "total": self.chunks_total,
                "added": self.chunks_added,
                "removed": self.chunks_removed,
                "embedded": self.chunks_embedded,
            },
            "rebuilt": self.rebuilt,
            "warnings": self.warnings,
            "bytes_written": self.bytes_written,
            "embedding": self.embedding,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }
