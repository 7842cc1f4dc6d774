"""docs.jsonl as read from an index: ``DocsFile``, each line parsed and checked on first use.

``index_format.read_index`` opens it; a writer that knows the lines' offsets may open one too.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator, Sequence
from hashlib import sha256
from typing import overload

import numpy as np

from ragtui.core.errors import IndexFormatError
from ragtui.core.index.arraycache import drop_pages
from ragtui.core.index.records import _DOC_KEYS, ChunkRecord, IndexMeta

__all__ = ["MAX_DOCS_LINE_BYTES", "DocsFile", "ends_fit", "find_chunk"]

MAX_DOCS_LINE_BYTES = 256 << 20
"""One docs.jsonl line holds one chunk of one document: at most 256 MiB, newline excluded."""
_COUNT_BLOCK = 4 << 20
CACHED_RECORDS = 1 << 13
"""Parsed records a ``DocsFile`` keeps for the next look at the same line, at most; then it starts over."""
_FP_BLOCK_LINES = 1 << 16
"""``written_fingerprints`` reads this many lines' fingerprints at a time."""
VERIFY_BLOCK_BYTES = 4 << 20
"""``verify`` and ``stream`` parse this many bytes of lines at a time (one line at least)."""


_FP_HEAD = b',"fingerprint":"'
_FP_HEAD_ARRAY = np.frombuffer(_FP_HEAD, dtype=np.uint8)
_FP_TAIL_ARRAY = np.frombuffer(b'"}', dtype=np.uint8)
_HEX = np.zeros(256, dtype=bool)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = True


class DocsFile(Sequence[ChunkRecord]):
    """docs.jsonl, parsed a line at a time on first use.

    Opening counts the lines (it must equal n_chunks). Indexing parses the
    line and checks the record on its own; ``verify`` parses every line and
    checks what spans lines (order, contiguity, chunk numbering). A bad line
    raises ``IndexFormatError`` naming the file and the line.
    """

    def __init__(self, raw: bytes | mmap.mmap, where: str, meta: IndexMeta, ends: np.ndarray | None = None) -> None:
        """``ends`` (each line's newline offset) may be passed by a writer that knows them; they are not checked then."""
        self._raw = raw
        self._where = where
        self._max_tokens = meta.max_tokens
        size = len(raw)
        if size and raw[size - 1 : size] != b"\n":
            raise IndexFormatError(where, "the last line does not end in a newline (truncated?)")
        if ends is None:
            ends = _line_ends(raw, meta.n_chunks, where)
        if ends.size != meta.n_chunks:
            raise IndexFormatError(where, f"has {ends.size} lines, but meta.json says n_chunks {meta.n_chunks}")
        self._ends = ends  # a line's start is the previous line's end + 1: found per read, never stored
        self._cache: dict[int, ChunkRecord] = {}  # at most CACHED_RECORDS, then started over
        self._verified = False
        # Each document's first line and doc_id, once a whole pass has checked them (not the records).
        self._doc_starts: np.ndarray | None = None
        self._doc_ids: list[str] = []

    def __len__(self) -> int:
        return int(self._ends.size)

    @overload
    def __getitem__(self, i: int) -> ChunkRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[ChunkRecord]: ...

    def __getitem__(self, i: int | slice) -> ChunkRecord | list[ChunkRecord]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        rec = self._cache.get(i)
        if rec is None:
            rec = self._parse(i)
            if len(self._cache) >= CACHED_RECORDS:
                self._cache.clear()
            self._cache[i] = rec
        return rec

    def _parse(self, i: int) -> ChunkRecord:
        """Line ``i`` read and checked (not cached)."""
        line = self._raw[self._start(i) : int(self._ends[i])]
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise IndexFormatError(
                self._where, f"line {i + 1} is not valid JSON ({type(e).__name__}: {str(e)[:200]})"
            ) from None
        return self._record(obj, i + 1)

    def _start(self, i: int) -> int:
        """Where line ``i`` starts in the file."""
        return int(self._ends[i - 1]) + 1 if i else 0

    def _record(self, obj: object, line: int) -> ChunkRecord:
        where = self._where
        if type(obj) is not dict or any(k not in obj for k in _DOC_KEYS):
            raise IndexFormatError(where, f"line {line} lacks one of the fields {', '.join(_DOC_KEYS)}")
        chunk_id, doc_id, source, uri, text, n_tokens, fp = (obj[k] for k in _DOC_KEYS)
        if not (type(chunk_id) is str and type(doc_id) is str and type(source) is str and type(uri) is str
                and type(text) is str and type(fp) is str):
            raise IndexFormatError(where, f"line {line}: a text field has the wrong type")
        if type(n_tokens) is not int or not 1 <= n_tokens <= self._max_tokens:
            raise IndexFormatError(where, f"line {line}: n_tokens {n_tokens!r} is not in 1..{self._max_tokens}")
        try:
            for value in (chunk_id, doc_id, source, uri, fp):
                value.encode("utf-8")
            text_bytes = text.encode("utf-8")
        except UnicodeEncodeError:
            # A \ud800-style escape decodes to a lone surrogate, which no UTF-8 text holds.
            raise IndexFormatError(where, f"line {line}: a text field holds a lone surrogate (not UTF-8)") from None
        # Checked per line, not only in verify(): a lazily opened index must not show damaged text.
        if sha256(text_bytes).hexdigest() != fp:
            raise IndexFormatError(where, f"line {line}: fingerprint is not the SHA-256 of the chunk's text")
        head, sep, k = chunk_id.rpartition("#")
        if (head != doc_id or not sep or not k.isdigit() or not k.isascii() or (k != "0" and k[0] == "0")
                or len(k) > 19):  # more digits than any chunk count; int() refuses beyond 4300
            raise IndexFormatError(where, f"line {line}: chunk_id {chunk_id[:200]!r} is not {doc_id[:200]!r} + '#<n>'")
        return ChunkRecord(chunk_id, doc_id, source, uri, text, n_tokens, fp)

    def verify(self) -> None:
        """Parse every line and check the order rules; raise ``IndexFormatError`` at the first breach.

        A block of lines at a time, keeping none of them: memory stays that of
        one block (``VERIFY_BLOCK_BYTES``) however large the file.
        """
        if self._verified:
            return
        for _rec in self._checked():
            pass
        self._verified = True

    def stream(self) -> Iterator[ChunkRecord]:
        """Every record in order, each line checked as ``self[i]`` checks it and the order rules as
        ``verify`` checks them, keeping none: memory stays that of one block of lines however large the file.

        Raises ``IndexFormatError`` at the first breach (after yielding the records before it); after
        a complete pass the file counts as verified.
        """
        yield from self._checked()
        self._verified = True

    def _checked(self) -> Iterator[ChunkRecord]:
        """Every record in order, checked; the lines parsed a block at a time (one ``json.loads`` of the
        block's lines as one array), a block that does not parse so parsed a line at a time to name the line."""
        order = _Order(self._where)
        n = len(self)
        starts: list[int] = []
        ids: list[str] = []
        released = 0
        for lo, hi in self.blocks(VERIFY_BLOCK_BYTES):
            for i, obj in enumerate(self._block_objects(lo, hi), lo):
                rec = self._record(obj, i + 1) if obj is not None else self._parse(i)
                if order.check(rec, i + 1):
                    starts.append(i)
                    ids.append(rec.doc_id)
                yield rec
            released = self.release_pages(self._start(hi) if hi < n else len(self._raw), released)
        self._doc_starts, self._doc_ids = np.array(starts, dtype=np.int64), ids

    def doc_starts(self) -> np.ndarray:
        """The first line (chunk number) of each document, in order (int64). A checked pass over the file
        (``verify``) finds them and each document's doc_id (``doc_ids``), which are kept: a few bytes per
        document, never the records."""
        self.verify()  # a complete pass leaves them
        assert self._doc_starts is not None
        return self._doc_starts

    def doc_ids(self) -> list[str]:
        """Each document's doc_id, in order (found with ``doc_starts``)."""
        self.doc_starts()
        return list(self._doc_ids)

    def blocks(self, size: int) -> Iterator[tuple[int, int]]:
        """The lines in ranges [lo, hi) of whole lines, in order, each at most ``size`` bytes (one line at least)."""
        lo, n = 0, len(self)
        while lo < n:
            hi = int(np.searchsorted(self._ends, self._start(lo) + size, side="right"))
            hi = min(max(hi, lo + 1), n)
            yield lo, hi
            lo = hi

    def _block_objects(self, lo: int, hi: int) -> list[object] | list[None]:
        """The JSON values of lines ``lo`` to ``hi - 1`` parsed together, or a None for each (parse them one by one)."""
        raw = bytes(self.raw_lines(lo, hi))
        try:
            objs = json.loads(b"[" + raw[:-1].replace(b"\n", b",") + b"]")
        except (ValueError, RecursionError):
            return [None] * (hi - lo)
        if not isinstance(objs, list) or len(objs) != hi - lo:
            # A line holding two values (``{..},{..}``) parses as two items: each line on its own says which.
            for i in range(lo, hi):
                self._parse(i)
            raise IndexFormatError(self._where, "a line holds more than one JSON value")
        return objs

    def release_pages(self, upto: int | None = None, start: int = 0) -> int:
        """Tell the kernel this process no longer needs the pages of the file map read so far (after a
        pass such as ``stream``; ``upto``: only the whole pages from ``start``, page-aligned, to that offset):
        the map is read-only, so a later read faults them back in. Returns where the pages released end."""
        return _release(self._raw, len(self._raw) if upto is None else upto, start)

    def byte_range(self, lo: int, hi: int) -> tuple[int, int]:
        """Where lines ``lo`` to ``hi - 1`` (newlines included) lie in the file: [start, end)."""
        if lo >= hi:
            return 0, 0
        return self._start(lo), int(self._ends[hi - 1]) + 1

    def raw_lines(self, lo: int, hi: int) -> memoryview:
        """The bytes of lines ``lo`` to ``hi - 1``, newlines included, without copying or parsing them."""
        start, end = self.byte_range(lo, hi)
        return memoryview(self._raw)[start:end] if end > start else memoryview(b"")

    def line_ends(self, lo: int, hi: int) -> np.ndarray:
        """The newline offsets of lines ``lo`` to ``hi - 1``, counted from the start of line ``lo``."""
        if lo >= hi:
            return np.zeros(0, dtype=np.int64)
        return self._ends[lo:hi] - self._start(lo)

    def written_fingerprints(self) -> np.ndarray | None:
        """Every line's fingerprint as ASCII bytes (dtype S64), read straight from the file.

        Only for a file whose every line ends the way ``encode_docs`` writes
        it (``,"fingerprint":"<64 lowercase hex>"}``); returns None for any
        other file. The values are not checked against the texts: callers
        use this on a generation they wrote themselves.
        """
        n = len(self)
        if n == 0:
            return np.zeros(0, dtype="S64")
        tail = len(_FP_HEAD) + 64 + 2
        if int(self._ends[0]) < tail or not _gaps_within(self._ends, tail + 1, 1 << 62):
            return None
        raw = np.frombuffer(self._raw, dtype=np.uint8)
        out = np.empty(n, dtype="S64")
        hexes = out.view(np.uint8).reshape(n, 64)
        released = 0
        # A block of lines at a time, the pages read dropped after each: the bytes looked at lie on
        # every page of the file, which would otherwise all stay in this process's resident size.
        for lo in range(0, n, _FP_BLOCK_LINES):
            hi = min(n, lo + _FP_BLOCK_LINES)
            block = raw[self._ends[lo:hi, None] + np.arange(-tail, 0)]
            if not (block[:, : len(_FP_HEAD)] == _FP_HEAD_ARRAY).all() or not (block[:, -2:] == _FP_TAIL_ARRAY).all():
                return None
            hexes[lo:hi] = block[:, len(_FP_HEAD) : -2]
            if not _HEX[hexes[lo:hi]].all():
                return None
            released = self.release_pages(int(self._ends[hi - 1]) + 1 - (1 if hi < n else 0), released)
        return out

    def find(self, chunk_id: str) -> int:
        """The line (chunk number) holding ``chunk_id``, or -1. Bisects the ordered file."""
        return find_chunk(self, chunk_id)


def find_chunk(records: Sequence[ChunkRecord], chunk_id: str) -> int:
    """The row of ``records`` (in docs.jsonl's order: by doc_id's bytes, then chunk number) holding ``chunk_id``,
    or -1; by bisection, so only a few records are read."""
    head, sep, k = chunk_id.rpartition("#")
    if not sep or not k.isdigit() or not k.isascii() or len(k) > 19:
        return -1
    key = (head.encode("utf-8"), int(k))
    lo, hi = 0, len(records)
    while lo < hi:
        mid = (lo + hi) // 2
        rec = records[mid]
        here = (rec.doc_id.encode("utf-8"), rec.k)
        if here < key:
            lo = mid + 1
        elif here > key:
            hi = mid
        else:
            return mid if rec.chunk_id == chunk_id else -1
    return -1


def _release(raw: bytes | mmap.mmap, upto: int, start: int = 0) -> int:
    """``DocsFile.release_pages`` for the map ``raw`` (nothing for bytes): the whole pages from ``start``
    (page-aligned) to ``upto`` (``arraycache.drop_pages``); returns where the pages released end."""
    if not isinstance(raw, mmap.mmap):
        return start
    end = upto - upto % mmap.PAGESIZE
    if end > start:
        drop_pages(np.frombuffer(raw, dtype=np.uint8), end, start)
    return max(start, end)


def _line_ends(raw: bytes | mmap.mmap, n_chunks: int, where: str) -> np.ndarray:
    """The offset of every newline of docs.jsonl, found a block at a time.

    Stops at the first line longer than ``MAX_DOCS_LINE_BYTES``, and keeps
    the offsets of at most ``n_chunks`` + 1 lines: the memory used is bounded
    by what meta.json promises, whatever the file holds. A map's pages are let
    go as they are counted.
    """
    size = len(raw)
    if not size:
        return np.zeros(0, dtype=np.int64)
    whole = np.frombuffer(raw, dtype=np.uint8)
    parts: list[np.ndarray] = []
    count, line_start, released = 0, 0, 0
    for lo in range(0, size, _COUNT_BLOCK):
        ends = np.flatnonzero(whole[lo : lo + _COUNT_BLOCK] == 10)
        released = _release(raw, min(size, lo + _COUNT_BLOCK), released)  # counted: a search reads few lines
        if ends.size:
            ends += lo
            lengths = np.diff(ends, prepend=line_start - 1) - 1
            long = np.flatnonzero(lengths > MAX_DOCS_LINE_BYTES)
            if long.size:
                raise IndexFormatError(where, f"line {count + int(long[0]) + 1} is longer than the "
                                              f"{MAX_DOCS_LINE_BYTES:,} bytes a line may hold")
            line_start = int(ends[-1]) + 1
            if count <= n_chunks:  # past that the file is refused: count on, keep nothing
                parts.append(ends[: n_chunks + 1 - count])
            count += int(ends.size)
        if min(size, lo + _COUNT_BLOCK) - line_start > MAX_DOCS_LINE_BYTES:
            raise IndexFormatError(where, f"line {count + 1} is longer than the {MAX_DOCS_LINE_BYTES:,} bytes a line may hold")
    if count != n_chunks:
        raise IndexFormatError(where, f"has {count} lines, but meta.json says n_chunks {n_chunks}")
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


ENDS_SAMPLE = 1 << 12
"""Lines whose ends ``ends_fit`` looks at in the file, at most (spread over it)."""


def ends_fit(raw: bytes | mmap.mmap, ends: np.ndarray, n_chunks: int, fd: int | None = None) -> bool:
    """Whether ``ends`` (int64, from a writer's record) can stand in for ``_line_ends(raw, n_chunks)``.

    A look at a few bytes per line instead of a scan of the file: there are
    ``n_chunks`` ends, strictly increasing, the last at the file's last byte,
    every line at most ``MAX_DOCS_LINE_BYTES``, and each end a newline with
    ``}`` before it and ``{`` after it (the start of the next line). The
    bytes are looked at for every line up to ``ENDS_SAMPLE`` lines, and for
    that many spread evenly over a larger file (its first and last included):
    three bytes of every line fault in every page of the file, which at a
    million chunks was most of an open. A line whose end was not looked at is
    still checked when it is read: an end off its newline cuts a line short
    or runs two together, and that fails to parse as one JSON object (an
    ``IndexFormatError``); it never shows another line's text. Every file a
    ragtui writer lays out passes; one that does not is counted instead.
    What this cannot see is a newline the ends skip: a ragtui writer never
    writes one inside a line (JSON escapes them in text), and the record's
    stamps tie it to the file as that writer wrote it.

    ``fd``, the file ``raw`` maps: the spread lines' bytes are read from it
    (``pread``) instead of through the map, where the kernel maps a whole
    folio of the file around every byte touched (at a million chunks,
    4,096 touches mapped 648 of docs.jsonl's 937 MiB into the reader's
    resident size).
    """
    size = len(raw)
    if ends.dtype != np.int64 or ends.ndim != 1 or ends.size != n_chunks:
        return False
    if n_chunks == 0:
        return size == 0
    if size < 3 or int(ends[-1]) != size - 1 or int(ends[0]) < 1:
        return False
    if not 2 <= int(ends[0]) <= MAX_DOCS_LINE_BYTES or not _gaps_within(ends, 3, MAX_DOCS_LINE_BYTES + 1):
        return False  # also: not strictly increasing (a line of at least "{}")
    if n_chunks > ENDS_SAMPLE:
        # Lines 0 .. n_chunks - 1, evenly: strictly increasing, since the step is at least one line.
        ends = ends[np.arange(ENDS_SAMPLE, dtype=np.int64) * (n_chunks - 1) // (ENDS_SAMPLE - 1)]
        if fd is not None:
            return _ends_read_fit(fd, ends.tolist(), size)
    whole = np.frombuffer(raw, dtype=np.uint8)
    return bool(
        (whole[ends] == 10).all()
        and (whole[ends - 1] == 0x7D).all()  # "}"
        and whole[0] == 0x7B  # "{"
        and (whole[ends[:-1] + 1] == 0x7B).all()
    )


_GAPS_BLOCK = 1 << 16


def _gaps_within(ends: np.ndarray, low: int, high: int) -> bool:
    """Whether every step between consecutive ``ends`` is in ``low..high``, looked at a block at a
    time (no whole array of line lengths: 8 MB per array at a million lines)."""
    for lo in range(0, max(0, ends.size - 1), _GAPS_BLOCK):
        gaps = np.diff(ends[lo : lo + _GAPS_BLOCK + 1])
        if int(gaps.min()) < low or int(gaps.max()) > high:
            return False
    return True


def _ends_read_fit(fd: int, ends: list[int], size: int) -> bool:
    """``ends_fit``'s look at the bytes around ``ends`` (ascending, the last the file's last byte), by ``pread``."""
    try:
        if os.pread(fd, 1, 0) != b"{":
            return False
        last = ends.pop()
        if os.pread(fd, 2, last - 1) != b"}\n":
            return False
        return all(os.pread(fd, 3, end - 1) == b"}\n{" for end in ends) and last == size - 1
    except OSError:
        return False


class _Order:
    """The order rules of docs.jsonl, checked one record at a time: documents by the bytes of their
    doc_id, each contiguous, its chunks numbered 0, 1, 2, ... (spec/index-format.md)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.prev_doc: str | None = None
        self.prev_bytes = b""
        self.next_k = 0

    def check(self, rec: ChunkRecord, line: int) -> bool:
        """Raise ``IndexFormatError`` if ``rec`` may not follow the records before it; return whether it
        starts a document."""
        doc_id = rec.doc_id
        first = doc_id != self.prev_doc
        if first:
            doc_bytes = doc_id.encode("utf-8")
            if self.prev_doc is not None and doc_bytes <= self.prev_bytes:
                raise IndexFormatError(
                    self.where,
                    f"line {line}: documents are out of order or not contiguous ({doc_id!r} after {self.prev_doc!r})",
                )
            self.prev_doc, self.prev_bytes, self.next_k = doc_id, doc_bytes, 0
        if rec.k != self.next_k:
            raise IndexFormatError(self.where, f"line {line}: chunk_id {rec.chunk_id!r} should be "
                                               f"{doc_id + '#' + str(self.next_k)!r}")
        self.next_k += 1
        return first
