"""The query history: what a person searched for, newest last, optionally kept in a file.

The file (one query per line, UTF-8) lives in ``$XDG_STATE_HOME/ragtui/history``
by default. Reading or writing it never fails loudly: a history is a
convenience, so an unreadable file just means an empty history (``problem``
says why, for a note). It is read as state ragtui writes itself
(``core.files.read_file``): a regular file, not a link, at most
``MAX_HISTORY_BYTES``; a FIFO, a device or a folder there is never opened,
and the next query saved replaces it with a regular file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragtui.core.files import read_file, replace_file

__all__ = ["MAX_HISTORY_BYTES", "QueryHistory", "default_history_path"]

MAX_HISTORY_BYTES = 4 << 20
"""The largest history file read: 4 MiB (200 entries of a long query each take a few KiB at most)."""


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
        self.problem: str | None = None
        """Why the file could not be read (None when it was, or was not there)."""

    def load(self) -> QueryHistory:
        """Read the file, if there is one (call from a worker: it touches the disk)."""
        if self.path is None:
            return self
        try:
            lines = read_file(self.path, MAX_HISTORY_BYTES, follow=False, what="the query history").decode(
                "utf-8").splitlines()
        except FileNotFoundError:
            return self
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else "not UTF-8 text"
            self.problem = f"ignored the query history {self.path}: {why} (the next query saved replaces it)"
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
            replace_file(self.path, "".join(e + "\n" for e in self.entries).encode("utf-8"))
        except OSError:
            pass  # a read-only home must not break searching
