"""The texts a scan read, by doc_id: held in memory up to a bound, the rest in a file.

A sync reads every new or changed document before it chunks any (which
documents changed decides how the index is made). A full ingest reads them
all: about 1.1 KiB of text a chunk, more than the rest of the rebuild holds.
``Texts`` keeps the first ``HOLD`` characters of them in memory, as a dict
would, and writes the others to a temporary file in the writer's state
folder as they are read, holding only where each is (24 bytes a document);
a text is read back when it is asked for, exactly as it was read. The file
has no name (or one ending in ``.tmp``, unlinked at once, where the system
cannot make nameless files): it is gone when ``close``d or when the process
ends, however it ends.
"""

from __future__ import annotations

import array
import os
import tempfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import BinaryIO

__all__ = ["HOLD", "Texts"]

HOLD = 1 << 24
"""Characters of text held in memory before the rest goes to the file (a sync of a few documents never writes it)."""


class Texts(MutableMapping[str, str]):
    """A dict of doc_id -> text whose texts past ``hold`` characters are kept in a file under ``spool`` (see the
    module docstring). Without ``spool`` it is a plain dict."""

    def __init__(self, spool: Path | None = None, hold: int | None = None) -> None:
        self._spool_dir, self._hold = spool, HOLD if hold is None else hold
        self._where: dict[str, str | int] = {}
        """Each text, or the number of its place in the file."""
        self._held = 0
        self._file: BinaryIO | None = None
        self._offset = array.array("q")
        self._nbytes = array.array("q")
        self._nchars = array.array("q")
        self._end = 0
        self.spooled = 0
        """Texts written to the file so far."""

    def stash(self, text: str) -> str | int:
        """Keep ``text`` for a document named later (``adopt``): the text itself while under the bound, else the
        number of its place in the file, written now."""
        if self._spool_dir is None or self._held + len(text) <= self._hold:
            self._held += len(text)
            return text
        if self._file is None:
            self._spool_dir.mkdir(parents=True, exist_ok=True)
            self._file = tempfile.TemporaryFile(dir=self._spool_dir, prefix="texts-", suffix=".tmp")
        raw = text.encode("utf-8", "surrogatepass")
        os.pwrite(self._file.fileno(), raw, self._end)
        self._offset.append(self._end)
        self._nbytes.append(len(raw))
        self._nchars.append(len(text))
        self._end += len(raw)
        self.spooled += 1
        return len(self._offset) - 1

    def adopt(self, doc_id: str, handle: str | int) -> None:
        """Name what ``stash`` kept as the text of ``doc_id``."""
        self._where[doc_id] = handle

    def chars(self, doc_id: str) -> int:
        """The length of the text of ``doc_id`` (``KeyError`` if there is none), without reading it back."""
        where = self._where[doc_id]
        return len(where) if isinstance(where, str) else self._nchars[where]

    def close(self) -> None:
        """Drop every text (and the file)."""
        self._where.clear()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __getitem__(self, doc_id: str) -> str:
        where = self._where[doc_id]
        if isinstance(where, str):
            return where
        assert self._file is not None
        n = self._nbytes[where]
        raw = os.pread(self._file.fileno(), n, self._offset[where])
        if len(raw) != n:
            raise OSError(f"the texts read were cut short in {self._spool_dir}")
        return raw.decode("utf-8", "surrogatepass")

    def __setitem__(self, doc_id: str, text: str) -> None:
        self.adopt(doc_id, self.stash(text))

    def __delitem__(self, doc_id: str) -> None:
        where = self._where.pop(doc_id)
        if isinstance(where, str):
            self._held -= len(where)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._where
