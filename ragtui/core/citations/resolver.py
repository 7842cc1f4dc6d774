"""Citations: from a chunk reference back to the lines of the source file it came from.

``resolve(data, ref)`` turns a reference into a ``Citation``: the chunk's
record, its document's absolute path, where the chunk's exact text sits in
the file as it is now (1-based lines and character offsets) and a freshness
verdict. spec/citations.md is the normative description; in short:

- ``ref`` is a chunk_id (``docs/c4/containers.d2#3``, split at its last
  ``#``), matched exactly; failing that, ``<index_id>#<n>`` names row n.
- The source is found at ``root / doc_id``, where ``root`` is the parent of
  the ingested folder that ingest recorded in its writer state
  (``source_folder``), or the ``root`` given. Nothing outside that folder is
  ever opened: a doc_id that is absolute, holds ``..``, a hidden component
  below the folder (ingest never takes one) or whose first component is not
  the recorded folder's name raises ``IndexFormatError`` before any read; a
  file whose real path leads out of the folder's real path gives
  ``path=None``, ``missing``. With no recorded folder and no ``root`` given,
  sources are not read at all (``UsageError``: pass ``--root``), never looked
  for in the current directory. Files are read by ``core.files.read_file``
  (``O_NONBLOCK``, regular files only, size-bounded, the opened descriptor
  checked to lie inside the folder).
- The document's chunks are located in order (each search starts after the
  previous chunk's start). ``fresh``: found by that ordered search;
  ``moved``: not found in order but present elsewhere in the file;
  ``changed``: the file no longer contains the text; ``missing``: the file is
  gone.

Errors: ``UsageError`` for a malformed reference or a source with no known
folder, ``NotFoundError`` for one that names no chunk, ``IndexFormatError``
for a doc_id that escapes the folder, ``StorageError`` for a source that
exists but cannot be read.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import re
import stat
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ragtui.core.citations.refs import split_ref
from ragtui.core.documents import HEAD_BYTES, PAGE_BREAK, Kind, Unreadable, detect, page_of
from ragtui.core.documents.worker import shared
from ragtui.core.errors import IndexFormatError, NotFoundError, StorageError, UsageError
from ragtui.core.files import read_file
from ragtui.core.index.index_format import IndexView
from ragtui.core.index.records import ChunkRecord
from ragtui.core.textsafe import neutralize

__all__ = [
    "CHANGED",
    "FRESH",
    "MISSING",
    "MOVED",
    "MAX_SOURCE_BYTES",
    "STATUSES",
    "Citation",
    "Resolver",
    "resolve",
    "resolve_many",
    "source_folder",
    "source_root",
]

FRESH, MOVED, CHANGED, MISSING = "fresh", "moved", "changed", "missing"
STATUSES = (FRESH, MOVED, CHANGED, MISSING)
"""Every value ``Citation.status`` takes."""

MAX_SOURCE_BYTES = 1 << 28
"""A source larger than this (256 MiB) is not read; its chunks are reported ``changed``."""


@dataclass(frozen=True)
class Citation:
    """Where one chunk came from, as the source file stands now."""

    ref: str
    """The reference as given."""
    index_id: str
    row: int
    """The chunk's number in the index (its line in docs.jsonl, from 0)."""
    record: ChunkRecord
    path: Path | None
    """Absolute path of the source file; None when it cannot be located safely inside the folder."""
    status: str
    """One of ``STATUSES``."""
    start_line: int | None
    """1-based, inclusive; None when ``changed`` or ``missing``."""
    end_line: int | None
    """1-based, inclusive: the line holding the chunk's last character."""
    start_char: int | None
    """Offset of the chunk's first character in the current decoded text (code points, BOM dropped)."""
    end_char: int | None
    """Offset just past the chunk's last character: ``source[start_char:end_char] == record.text``."""
    page: int | None = None
    """For a paged document (PDF), located: the 1-based page the chunk starts on (page breaks before it,
    plus one); None otherwise."""
    page_end: int | None = None
    """The page holding the chunk's last character (a chunk may span pages)."""
    page_line: int | None = None
    """The 1-based line within ``page`` on which the chunk starts."""
    page_end_line: int | None = None
    """The line within ``page_end`` holding the chunk's last character."""
    positional: bool = False
    """True when ``ref`` was the short form ``INDEX#N``: a row number, which names another chunk once the
    index is rebuilt with documents added or removed before it (the chunk_id names this chunk for good)."""

    @property
    def chunk_id(self) -> str:
        return self.record.chunk_id

    @property
    def doc_id(self) -> str:
        return self.record.doc_id

    @property
    def place(self) -> str:
        """Where the chunk is, as people cite it: ``p.12 L3–9`` in a paged document (lines within the
        page; ``p.12 L40–p.13 L2`` across a page break), ``L3–9`` in any other; "" when not located."""
        if self.start_line is None:
            return ""
        if self.page is None:
            return f"L{self.start_line}–{self.end_line}"
        if self.page_end == self.page:
            return f"p.{self.page} L{self.page_line}–{self.page_end_line}"
        return f"p.{self.page} L{self.page_line}–p.{self.page_end} L{self.page_end_line}"

    @property
    def located(self) -> bool:
        """Whether line and character ranges are known (``fresh`` or ``moved``)."""
        return self.start_line is not None

    def to_json(self) -> dict[str, object]:
        """Every field, with the record's fields flattened in, for JSON output (``page`` and ``page_end``
        only for a paged document)."""
        out: dict[str, object] = {
            "ref": self.ref,
            "index_id": self.index_id,
            "row": self.row,
            **self.record.to_json(),
            "path": None if self.path is None else str(self.path),
            "status": self.status,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "start_char": self.start_char,
            "end_char": self.end_char,
            "positional": self.positional,
        }
        if self.page is not None:
            out["page"], out["page_end"] = self.page, self.page_end
        return out


def source_folder(artifacts: str | os.PathLike[str], index_id: str) -> Path | None:
    """The absolute folder ingest read for ``index_id``, as its writer state records it (None when not)."""
    from ragtui.core.ingest.state_store import state_path  # the writer owns where its state lives

    try:
        st = os.stat(state_path(Path(artifacts), index_id))
    except OSError:
        return None
    # The state holds every file's hashes (large for a large folder): parse it
    # again only when it was rewritten, not on every resolve().
    return _state_folder(os.path.abspath(artifacts), index_id, st.st_ino, st.st_mtime_ns, st.st_size)


def source_root(artifacts: str | os.PathLike[str], index_id: str) -> Path | None:
    """The parent of ``source_folder`` (what doc_ids are relative to), or None."""
    folder = source_folder(artifacts, index_id)
    return None if folder is None else folder.parent


@functools.lru_cache(maxsize=16)
def _state_folder(artifacts: str, index_id: str, *_stamp: int) -> Path | None:
    from ragtui.core.ingest.state_store import recorded_folder

    folder = recorded_folder(Path(artifacts), index_id)
    if isinstance(folder, str) and os.path.isabs(folder) and "\0" not in folder:
        folder = os.path.normpath(folder)
        if os.path.dirname(folder) != folder:  # ingest never takes the filesystem's root
            return Path(folder)
    return None


def _recorded_folder(data: IndexView) -> Path | None:
    # An index opened as <artifacts>/rag/<id> has its writer state beside it.
    if data.path.parent.name == "rag":
        return source_folder(data.path.parent.parent, data.meta.index_id)
    return None


@dataclass
class _Doc:
    """One document's source and the ordered search through its chunks (grown on demand)."""

    first_row: int
    path: Path | None
    text: str | None  # None: the file is missing, unsafe or no longer text
    present: bool  # False: "missing" (gone, not a file, or a link out of the folder)
    starts: list[int]  # per chunk k: where the ordered search found it, or -1
    cursor: int = 0  # the next search starts here (previous find + 1)
    prev_end: int = 0  # end of the previous chunk found
    newlines: list[int] | None = None
    paged: bool = False  # the text's pages are joined by PAGE_BREAK


class Resolver:
    """Resolves references against one index, reading each source document at most once.

    Holds the documents it has read; make a new one to see later edits.
    ``root`` (the parent of the ingested folder) defaults to the one the
    writer state records; with neither, ``resolve`` refuses to read sources.
    """

    def __init__(self, data: IndexView, root: str | os.PathLike[str] | None = None) -> None:
        self.data = data
        recorded = _recorded_folder(data)
        self.folder_name: str | None = None if recorded is None else recorded.name
        """The ingested folder's name, every doc_id's first component (None: not recorded)."""
        self.root: Path | None = None
        """The parent of the ingested folder; None when neither recorded nor given."""
        if root is not None:
            self.root = Path(os.path.abspath(root))
        elif recorded is not None:
            self.root = recorded.parent
        self._docs: dict[str, _Doc] = {}
        self._docs_path = data.path / "docs.jsonl"

    def row_of(self, ref: str) -> int:
        """The row ``ref`` names (exact chunk_id first, then the short form); raises as ``resolve``."""
        return self._find(ref)[0]

    def _find(self, ref: str) -> tuple[int, bool]:
        """(row, positional): the row ``ref`` names and whether it named it by the short form ``INDEX#N``."""
        head, n = split_ref(ref)
        records = self.data.records
        row = records.find(ref)
        if row >= 0:
            return row, False
        index_id = self.data.meta.index_id
        if head == index_id:
            if n < len(records):
                return n, True
            if len(records) == 0:
                raise NotFoundError(f"index {index_id!r} is empty (it holds no chunk): there is no chunk {n}")
            raise NotFoundError(
                f"index {index_id!r} has {len(records)} chunk(s) (0..{len(records) - 1}); there is no chunk {n}"
            )
        hint = f" (the short form is {index_id}#<n>)" if "/" not in head else ""
        raise NotFoundError(f"no chunk_id {ref!r} in index {index_id!r}{hint}")

    def resolve(self, ref: str) -> Citation:
        """The ``Citation`` for ``ref`` (see the module docstring for the errors)."""
        row, positional = self._find(ref)
        record = self.data.records[row]
        doc = self._doc(record, row)
        k = row - doc.first_row
        start, status = self._locate(doc, k), FRESH
        if start < 0 and doc.text is not None:
            start, status = doc.text.find(record.text), MOVED
        if start < 0 or doc.text is None:  # (a start >= 0 was found in the text)
            status = CHANGED if doc.present else MISSING
            return Citation(ref, self.data.meta.index_id, row, record, doc.path, status, None, None, None, None,
                            positional=positional)
        end = start + len(record.text)
        if doc.newlines is None:
            doc.newlines = [m.start() for m in re.finditer("\n", doc.text)]
        # A line is numbered by the "\n" before it, so CRLF counts once and a lone CR not at all.
        start_line = bisect_left(doc.newlines, start) + 1
        last = max(start, end - 1)
        end_line = bisect_left(doc.newlines, last) + 1
        if doc.paged:
            text = doc.text
            page, page_end = page_of(text, start), page_of(text, last)
            first_line = bisect_left(doc.newlines, text.rfind(PAGE_BREAK, 0, start) + 1) + 1
            end_first = bisect_left(doc.newlines, text.rfind(PAGE_BREAK, 0, last) + 1) + 1
            return Citation(ref, self.data.meta.index_id, row, record, doc.path, status, start_line, end_line, start,
                            end, page, page_end, start_line - first_line + 1, end_line - end_first + 1,
                            positional=positional)
        return Citation(ref, self.data.meta.index_id, row, record, doc.path, status, start_line, end_line, start, end,
                        positional=positional)

    def source_text(self, citation: Citation) -> str | None:
        """The decoded source text ``citation`` was located in, as this resolver read it.

        None when the file is missing, could not be located safely, or is no
        longer text. Offsets and lines of the citation refer to this text.
        """
        doc = self._docs.get(citation.doc_id)
        return None if doc is None else doc.text

    def doc_citations(self, doc_id: str) -> list[Citation]:
        """Every chunk of ``doc_id``, resolved in order ([] when the index holds no such document)."""
        records = self.data.records
        first = records.find(f"{doc_id}#0")
        out: list[Citation] = []
        row = first
        while 0 <= row < len(records) and records[row].doc_id == doc_id:
            out.append(self.resolve(records[row].chunk_id))
            row += 1
        return out

    def document_line(self, doc_id: str, page: int, line: int) -> int | None:
        """The line of ``doc_id``'s text that is line ``line`` of its page ``page`` (1-based), or None when
        the document is not paged, cannot be read, or has no such page or line."""
        row = self.data.records.find(f"{doc_id}#0")
        if row < 0 or page < 1 or line < 1:
            return None
        doc = self._doc(self.data.records[row], row)
        if doc.text is None or not doc.paged:
            return None
        text = doc.text
        at = 0
        for _ in range(page - 1):
            at = text.find(PAGE_BREAK, at) + 1
            if at == 0:
                return None
        end = text.find(PAGE_BREAK, at)
        lines_on_page = text.count("\n", at, len(text) if end < 0 else end) + 1
        if line > lines_on_page:
            return None
        return text.count("\n", 0, at) + line

    def chunks_at(self, doc_id: str, start_line: int, end_line: int) -> list[Citation]:
        """The chunks of ``doc_id`` located (fresh or moved) on lines that meet ``start_line..end_line``."""
        return [c for c in self.doc_citations(doc_id)
                if c.start_line is not None and c.end_line is not None
                and c.start_line <= end_line and start_line <= c.end_line]

    def _doc(self, record: ChunkRecord, row: int) -> _Doc:
        doc = self._docs.get(record.doc_id)
        if doc is None:
            first_row = row - record.k
            records = self.data.records
            if first_row < 0 or records[first_row].chunk_id != f"{record.doc_id}#0":
                raise IndexFormatError(
                    self._docs_path, f"line {row + 1}: {record.chunk_id!r} does not follow its document's chunk 0"
                )
            path, text, present, paged = self._read_source(record.doc_id, row)
            doc = self._docs[record.doc_id] = _Doc(first_row, path, text, present, [], paged=paged)
        return doc

    def _locate(self, doc: _Doc, k: int) -> int:
        """Where the ordered search finds chunk ``k`` of ``doc`` (-1 when it does not)."""
        if doc.text is None:
            return -1
        records = self.data.records
        while len(doc.starts) <= k:
            text = records[doc.first_row + len(doc.starts)].text
            # Chunk starts and ends both strictly increase (spec/chunker.md), so
            # the next chunk starts after the previous start and ends after the
            # previous end; using both bounds keeps repeated passages in place.
            lo = max(doc.cursor, doc.prev_end - len(text) + 1)
            at = doc.text.find(text, lo)
            doc.starts.append(at)
            if at >= 0:
                doc.cursor, doc.prev_end = at + 1, at + len(text)
        return doc.starts[k]

    def _refuse(self, doc_id: str, row: int, why: str) -> IndexFormatError:
        return IndexFormatError(
            self._docs_path,
            f"line {row + 1}: doc_id {doc_id!r} {why}; it is not read (rebuild the index with `ragtui ingest FOLDER`)",
        )

    def _read_source(self, doc_id: str, row: int) -> tuple[Path | None, str | None, bool, bool]:
        """(path, the document's text or None, present, paged) for ``doc_id``, never reading outside its folder."""
        parts = doc_id.split("/")
        if (
            doc_id.startswith("/")
            or "\0" in doc_id
            or len(parts) < 2
            or any(p in ("", ".", "..") for p in parts)
        ):
            raise self._refuse(doc_id, row, "would point outside the indexed folder or is not a plain relative path")
        # The walk never takes a hidden file or folder (walk.WalkRules), so no
        # index ingest wrote has one below the folder: .git, .ssh, .env stay unread.
        hidden = [p for p in parts[1:] if p.startswith(".")]
        if self.folder_name is None and parts[0].startswith("."):
            hidden.insert(0, parts[0])
        if hidden:
            raise self._refuse(doc_id, row, f"holds the hidden component {hidden[0]!r}, which ingest never takes")
        if self.folder_name is not None and parts[0] != self.folder_name:
            raise self._refuse(doc_id, row, f"is not in the ingested folder {self.folder_name!r}")
        if self.root is None:
            raise UsageError(
                f"index {self.data.meta.index_id!r} does not record the folder it was ingested from (no writer "
                "state beside it), and sources are never looked for in the current directory: pass --root DIR, "
                "the folder that holds the ingested folder (or ingest the folder again)"
            )
        path = self.root.joinpath(*parts)
        folder_real = os.path.realpath(self.root / parts[0])
        real = os.path.realpath(path)
        if not _inside(real, folder_real):
            return None, None, False, False  # a link out of the folder: never followed
        try:
            st = os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            return path, None, False, False
        except OSError as e:
            if e.errno == errno.ELOOP:
                return None, None, False, False  # a link loop: never followed
            raise StorageError(f"cannot read {neutralize(str(path))}: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            return path, None, False, False  # a folder or device where the file was: never opened
        if st.st_size > MAX_SOURCE_BYTES:
            return path, None, True, False
        try:
            # Opens without blocking, refuses a non-regular file, reads at most the bound, and checks the
            # opened descriptor's own path, so a component swapped for a link after the checks above is caught.
            data = read_file(Path(real), MAX_SOURCE_BYTES, inside=folder_real)
        except FileNotFoundError:
            return path, None, False, False  # deleted just now
        except OSError as e:
            if e.errno in (errno.EXDEV, errno.ELOOP):
                return None, None, False, False  # swapped for a link leading out: never followed
            if e.errno == 0:  # swapped for a non-regular file, or grew past the bound, since the stat
                return path, None, "regular" not in (e.strerror or ""), False
            raise StorageError(f"cannot read {neutralize(str(path))}: {e.strerror}") from None
        # The document's text is what its reader makes of the bytes now, as ingest made it.
        kind = detect(doc_id, data[:HEAD_BYTES])
        if not kind.isolated:
            try:
                return path, kind.read(data, shared().limits).text, True, kind.paged
            except Unreadable:
                return path, None, True, False
        text, paged = _extracted(kind, data)
        return path, text, True, paged


_EXTRACTED: OrderedDict[tuple[str, str], tuple[str | None, bool]] = OrderedDict()
_EXTRACTED_CHARS = 1 << 27
"""The most characters of extracted text kept for later resolvers (128 Mi)."""
_extracted_lock = threading.Lock()


def _extracted(kind: Kind, data: bytes) -> tuple[str | None, bool]:
    """(text or None, paged) of a document of an isolated kind, kept by its bytes' SHA-256 for later
    resolvers of this process: the TUI resolves a hit's citation again on every query, and a long PDF
    takes seconds to extract."""
    key = (kind.name, hashlib.sha256(data).hexdigest())
    with _extracted_lock:
        got = _EXTRACTED.get(key)
        if got is not None:
            _EXTRACTED.move_to_end(key)
            return got
    try:
        doc = shared().read(kind, data)
        got = (doc.text, doc.paged)
    except Unreadable:
        got = (None, False)
    with _extracted_lock:
        _EXTRACTED[key] = got
        total = sum(len(t or "") for t, _ in _EXTRACTED.values())
        while total > _EXTRACTED_CHARS and len(_EXTRACTED) > 1:
            (_k, (t, _p)) = _EXTRACTED.popitem(last=False)
            total -= len(t or "")
    return got


def _inside(real: str, folder_real: str) -> bool:
    return real != folder_real and os.path.commonpath([real, folder_real]) == folder_real


def resolve(data: IndexView, ref: str, *, root: str | os.PathLike[str] | None = None) -> Citation:
    """The ``Citation`` for one reference into ``data``.

    ``root`` is the parent of the ingested folder (doc_ids are relative to
    it); by default the one ingest recorded beside the index (with none
    recorded, resolving a source raises ``UsageError``).
    """
    return Resolver(data, root).resolve(ref)


def resolve_many(data: IndexView, refs: Iterable[str], *, root: str | os.PathLike[str] | None = None) -> list[Citation]:
    """``resolve`` for each reference, in order, reading each source document once.

    Raises at the first reference that fails; use ``Resolver`` to handle each one.
    """
    resolver = Resolver(data, root)
    return [resolver.resolve(ref) for ref in refs]
