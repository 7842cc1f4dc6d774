"""The query history: what a person searched for, newest last, optionally kept in a file.

The file (one query per line, UTF-8) lives in ``$XDG_STATE_HOME/ragtui/history``
by default. Reading or writing it never fails loudly: a history is a
convenience, so an unreadable file just means an empty history.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["QueryHistory", "default_history_path"]


def default_history_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "ragtui" / "history"


class QueryHistory:
    """Queries in the order they were used, without repeats (a repeat moves to the end).

    ``older(current)`` and ``newer()`` walk the entries like a shell's up and
    down arrows; ``add`` resets the walk. Not thread-safe: use it from the UI thread.
    """

    def __init__(self, path: Path | None = None, limit: int = 200) -> None:
        self.path = path
        self.limit = limit
        self.entries: list[str] = []
        """Oldest first."""
        self._cursor: int | None = None
        self._draft = ""

    def load(self) -> QueryHistory:
        """Read the file, if there is one (call from a worker: it touches the disk)."""
        if self.path is None:
            return self
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return self
        seen: dict[str, None] = {}
        for line in lines:
            if line.strip():
                seen.pop(line, None)
                seen[line] = None
        self.entries = list(seen)[-self.limit :]
        return self

    def add(self, query: str) -> None:
        """Record ``query`` as the newest entry (blank queries are ignored)."""
        query = " ".join(query.split())
        self._cursor = None
        if not query:
            return
        if query in self.entries:
            self.entries.remove(query)
        self.entries.append(query)
        del self.entries[: -self.limit]
        self._save()

    def older(self, current: str) -> str | None:
        """The entry before the one shown (None at the oldest); remembers ``current`` as the draft."""
        if not self.entries:
            return None
        if self._cursor is None:
            self._draft = current
            self._cursor = len(self.entries)
        if self._cursor == 0:
            return None
        self._cursor -= 1
        return self.entries[self._cursor]

    def newer(self) -> str | None:
        """The entry after the one shown; the draft after the newest; None when not walking."""
        if self._cursor is None:
            return None
        self._cursor += 1
        if self._cursor >= len(self.entries):
            self._cursor = None
            return self._draft
        return self.entries[self._cursor]

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text("".join(e + "\n" for e in self.entries), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only home must not break searching
