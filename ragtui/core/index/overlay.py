"""The overlay of a generation: the next generation's layout, written before that generation is published.

A save under ``ragtui watch`` plans the next generation as runs of rows
(``segments``): stretches of the current generation's rows kept as they are
("old") and the new chunks ("new"), in the next generation's order. Before
the full publish, the watch agent's writer writes that plan, with the new
chunks' docs.jsonl lines and vectors, as one file beside the generation it
layers on::

    <artifacts>/rag/.gen/<index_id>/<generation>.overlay

The four files of the generation are never touched: the overlay is named by
the generation directory's own path (generation names are never reused), so
it can only ever be read with the base it was planned against. A reader that
finds a sound overlay can search the next generation before it is published
(``ragtui.core.search``); any other program reads the four files as always.

File layout (little-endian)::

    "TLOV"  u32 version (1)  u64 header length
    header  JSON: n_chunks, dim, base_chunks, segments [["old"|"new", lo, hi], ...], n_new,
            docs_bytes, vectors_bytes
    docs    the new chunks' docs.jsonl lines, exactly the bytes the next generation holds for them
    vectors their rows, float32, n_new x dim
    SHA-256 of everything before it (32 bytes)

"old" ranges are rows of the base generation; "new" ranges are positions in
the overlay's own lines. Read in segment order they tile the next
generation's rows 0..n_chunks.

Writing (``write_overlay``) follows the publish's durability order: a
temporary name in the same directory, written and flushed, renamed over the
overlay's name (a later save of the same base replaces it the same way), then
the directory flushed. Reading (``read_overlay``) treats the file as
untrusted: a regular file only, opened without blocking; every size bounded
by the header and the file's real size before anything is read or allocated;
the checksum; the segments' tiling; every line checked as a docs.jsonl line
is; every vector a finite unit vector. Anything wrong and the overlay is
ignored (None, with the reason for ``--debug`` and tests): never an error.

Why an overlay is never a lie about the folder
----------------------------------------------

An overlay describes files that were saved: the documents of the folder as
the save read them, chunked and embedded. That stays the truth about those
files until something later is published, whatever happens to the publish
that follows the overlay:

* The publish succeeds: the overlay's base is no longer current. Readers that
  resolve the link open the new generation (which holds exactly what the
  overlay described); a reader still on the base layers the overlay and sees
  the same rows. The writer's tidy after the publish removes the old
  generation and its overlay together (``remove_stale_generations`` removes
  every entry of ``.gen/<index_id>/`` but the current generation).
* The publish fails, or the writer is killed after the rename of the overlay:
  the base stays current and its overlay still describes the folder as it
  was saved, as a generation describes the folder as it was when published.
* The next sync of any writer starts by removing leftovers, the current
  generation's overlay among them: from then on readers see the base alone
  until that sync writes an overlay of its own or publishes. That matters
  when the folder went back to what the base holds (an edit undone): that
  sync finds nothing to write, and an overlay kept from the failed save would
  describe files the folder no longer holds.
* A writer killed while writing the overlay leaves at most a temporary name,
  which no reader opens and the next writer's tidy removes; ``remove_index``
  removes the whole ``.gen/<index_id>/`` folder, overlays included.

About 600 lines on purpose: one format, its writer and its strict reader, which share their checks (the
writer refuses what a reader would ignore); split, each half would have to be read with the other.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragtui.core import fsops
from ragtui.core.errors import IndexFormatError
from ragtui.core.files import kind_of
from ragtui.core.fsops import FsOps
from ragtui.core.index.docs_file import MAX_DOCS_LINE_BYTES, DocsFile
from ragtui.core.index.index_format import (
    MAX_DIM,
    MAX_META_BYTES,
    MAX_N_CHUNKS,
    META,
    IndexData,
    _parse_meta,
    bad_vector_rows,
    vector_row_problem,
)
from ragtui.core.index.records import ChunkRecord, IndexMeta

__all__ = [
    "MAX_HEADER_BYTES",
    "OVERLAY_SUFFIX",
    "OverlayContent",
    "OverlayError",
    "generation_dir_of",
    "load_overlay",
    "overlay_identity",
    "overlay_path",
    "read_overlay",
    "read_overlay_of",
    "write_overlay",
]

MAGIC = b"TLOV"
VERSION = 1
OVERLAY_SUFFIX = ".overlay"
_HEAD = 16
"""Magic, version and header length."""
_DIGEST = 32
MAX_HEADER_BYTES = 1 << 20
"""The header JSON is at most 1 MiB (a segment takes about 20 bytes: some 50,000 runs)."""
_HEADER_KEYS = ("n_chunks", "dim", "base_chunks", "segments", "n_new", "docs_bytes", "vectors_bytes")
_READ_BLOCK = 1 << 22


class OverlayError(Exception):
    """Why an overlay was ignored (``reason``): absent, unreadable, or not a sound overlay of its base."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, eq=False)
class OverlayContent:
    """A sound overlay, as read: the next generation's rows in terms of its base's rows and its own.

    Row ``r`` of the next generation lies in the segment whose cumulative
    span holds it: an "old" segment ``(lo, hi)`` gives base rows ``lo..hi-1``,
    a "new" one gives ``records[lo:hi]`` and ``vectors[lo:hi]``.
    """

    path: Path
    identity: str
    """``overlay_identity`` of the file read (path, inode, mtime, size): another value means another file."""
    base_chunks: int
    n_chunks: int
    """Rows of the next generation."""
    dim: int
    segments: tuple[tuple[str, int, int], ...]
    """``("old" | "new", lo, hi)`` in the next generation's order, each non-empty."""
    records: list[ChunkRecord]
    """The new chunks, checked as docs.jsonl lines are, in order."""
    docs_lines: bytes
    """Their docs.jsonl lines, newlines included: the bytes the next generation holds for them."""
    line_ends: np.ndarray
    """int64: the offset of each line's newline in ``docs_lines``."""
    vectors: np.ndarray
    """(n_new, dim) float32, read-only: the new chunks' rows, each a finite unit vector."""

    @property
    def n_new(self) -> int:
        return len(self.records)

    def starts(self) -> list[int]:
        """The next generation's row where each segment begins."""
        out, at = [], 0
        for _source, lo, hi in self.segments:
            out.append(at)
            at += hi - lo
        return out


# -- where it lives ----------------------------------------------------------------------------------


def overlay_path(generation_dir: str | os.PathLike[str]) -> Path:
    """``<generation_dir>.overlay``: the overlay of that generation directory.

    ``generation_dir`` must be the generation directory itself (``.gen/<index_id>/<g>``, as
    ``generation_dir_of(data)`` gives it), never the link ``rag/<index_id>``: the link may name
    another generation by the time the overlay is opened.
    """
    path = Path(os.fspath(generation_dir))
    return path.with_name(path.name + OVERLAY_SUFFIX)


def _temporary_prefix(generation_dir: str | os.PathLike[str]) -> str:
    """The start of the names the overlay is written under before its rename (``<g>.overlay.<pid>.tmp``)."""
    return overlay_path(generation_dir).name + "."


def generation_dir_of(data: IndexData) -> Path:
    """The generation directory ``data`` was read from (resolved), whatever link it was opened through;
    ``ValueError`` when ``data`` names none (``IndexData.generation`` empty)."""
    real, _ino, _mtime = data.generation.rsplit(":", 2)
    if not real:
        raise ValueError("no generation directory")
    return Path(real)


def overlay_identity(generation_dir: str | os.PathLike[str]) -> str | None:
    """Which overlay file ``generation_dir`` has now (None when none): cheap, a ``stat``; equal to
    ``OverlayContent.identity`` while the overlay read is still the one there."""
    path = overlay_path(generation_dir)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return _identity(path, st)


def _identity(path: Path, st: os.stat_result) -> str:
    return f"{path}:{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


# -- writing -----------------------------------------------------------------------------------------


def write_overlay(
    generation_dir: str | os.PathLike[str],
    *,
    base_chunks: int,
    dim: int,
    segments: Sequence[tuple[str, int, int]],
    docs_lines: bytes | Sequence[bytes],
    vectors: np.ndarray,
    ops: FsOps | None = None,
) -> Path:
    """Write the overlay of ``generation_dir`` atomically; returns its path.

    ``segments``: ``(source, lo, hi)`` in the next generation's order;
    ``docs_lines``: the new chunks' docs.jsonl lines (one buffer, or pieces
    written one after another), ``vectors`` their rows (n_new x dim). The
    arguments are checked as a reader checks the file (``ValueError`` when
    they disagree): a writer never leaves an overlay a reader would ignore.

    A temporary name in the same directory is created, written, flushed and
    closed, renamed over the overlay's name, and the directory flushed. On
    ``OSError`` the temporary name is removed and the error raised; an overlay
    already there is then left as it was.
    """
    ops = ops or fsops.OS_OPS  # looked up at call time: tests may replace it
    pieces = [docs_lines] if isinstance(docs_lines, (bytes, bytearray, memoryview)) else list(docs_lines)
    docs_bytes = sum(memoryview(p).nbytes for p in pieces)
    n_lines = sum(bytes(p).count(b"\n") for p in pieces)
    rows = np.ascontiguousarray(vectors, dtype="<f4")
    segs = tuple((str(s), int(lo), int(hi)) for s, lo, hi in segments)
    n_chunks, n_new = _check_segments(segs, base_chunks)
    if n_lines != n_new or rows.shape != (n_new, dim) or (docs_bytes and bytes(pieces[-1])[-1:] != b"\n"):
        raise ValueError(f"the overlay's segments hold {n_new} new rows, but there are {n_lines} lines "
                         f"and vectors of shape {rows.shape} (dim {dim})")
    header = json.dumps({
        "n_chunks": n_chunks, "dim": dim, "base_chunks": base_chunks, "segments": [list(s) for s in segs],
        "n_new": n_new, "docs_bytes": docs_bytes, "vectors_bytes": rows.nbytes,
    }, separators=(",", ":")).encode("ascii")
    if len(header) > MAX_HEADER_BYTES:
        raise ValueError(f"the overlay's header would be {len(header):,} bytes, over {MAX_HEADER_BYTES:,}")
    head = MAGIC + VERSION.to_bytes(4, "little") + len(header).to_bytes(8, "little")
    body: list[bytes | bytearray | memoryview] = [head, header, *pieces, _bytes_of(rows)]
    digest = hashlib.sha256()
    for part in body:
        digest.update(part)
    body.append(digest.digest())

    final = overlay_path(generation_dir)
    tmp = final.with_name(f"{_temporary_prefix(generation_dir)}{os.getpid()}.tmp")
    try:
        _remove(ops, tmp)  # a writer of the same pid killed before (a pid is reused only after it died)
        fd = ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            for part in body:
                view = memoryview(part)  # each part is bytes or a byte view
                while view:
                    view = view[ops.write(fd, view):]
            ops.fsync(fd)
        finally:
            ops.close(fd)
        ops.rename(tmp, final)
        dir_fd = ops.open(final.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            ops.fsync(dir_fd)
        finally:
            ops.close(dir_fd)
    except OSError:
        _remove(ops, tmp)
        raise
    return final


def _bytes_of(rows: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, without copying (writable when the array is)."""
    return rows.reshape(-1).view(np.uint8).data


def _remove(ops: FsOps, path: Path) -> None:
    try:
        ops.unlink(path)
    except OSError:
        pass


# -- reading -----------------------------------------------------------------------------------------


def read_overlay(
    generation_dir: str | os.PathLike[str],
    *,
    base_chunks: int,
    dim: int,
    max_tokens: int | None = None,
    base_records: Sequence[ChunkRecord] | None = None,
    reasons: list[str] | None = None,
) -> OverlayContent | None:
    """The sound overlay of ``generation_dir``, or None (none there, or not sound): never raises.

    When it returns None and ``reasons`` is given, why is appended to it
    (``load_overlay``'s ``OverlayError.reason``).
    """
    try:
        return load_overlay(generation_dir, base_chunks=base_chunks, dim=dim, max_tokens=max_tokens,
                            base_records=base_records)
    except OverlayError as e:
        reason = e.reason
    except MemoryError:
        reason = "out of memory while reading it"
    except Exception as e:  # noqa: BLE001 - an overlay only saves readers time: whatever goes wrong, the base stands
        reason = f"{type(e).__name__}: {str(e)[:200]}"
    if reasons is not None:
        reasons.append(reason)
    return None


def read_overlay_of(data: IndexData, reasons: list[str] | None = None) -> OverlayContent | None:
    """``read_overlay`` for the generation ``data`` was read from, checked against its records too."""
    try:
        gen = generation_dir_of(data)
    except ValueError:
        if reasons is not None:
            reasons.append("the index read names no generation directory")
        return None
    return read_overlay(gen, base_chunks=data.n_chunks, dim=data.meta.dim, max_tokens=data.meta.max_tokens,
                        base_records=data.records, reasons=reasons)


def load_overlay(
    generation_dir: str | os.PathLike[str],
    *,
    base_chunks: int,
    dim: int,
    max_tokens: int | None = None,
    base_records: Sequence[ChunkRecord] | None = None,
) -> OverlayContent:
    """The overlay of ``generation_dir``, read and checked; ``OverlayError`` says why it cannot be used.

    ``base_chunks`` and ``dim``: the base generation's. ``max_tokens``: its
    meta.json's chunker bound, which every line's n_tokens must respect (read
    from the generation's meta.json when not given). ``base_records``: its
    docs.jsonl, when the caller has it open; then each "old" segment must
    hold whole documents and the documents must ascend across every segment
    boundary (without it only the new lines' own order is checked).
    """
    path = overlay_path(generation_dir)
    if max_tokens is None:
        max_tokens = _base_max_tokens(Path(os.fspath(generation_dir)), path, base_chunks, dim)
    fd = _open(path)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OverlayError(path, f"is {kind_of(st.st_mode) or 'not a regular file'} (never read)")
        return _parse(path, fd, st, base_chunks, dim, max_tokens, base_records)
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    """The overlay opened for reading: a regular file, not through a link, never blocking."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise OverlayError(path, "absent") from None
    except OSError as e:
        raise OverlayError(path, f"cannot be looked at: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise OverlayError(path, "is a symbolic link, not a regular file (never opened)")
    if not stat.S_ISREG(st.st_mode):
        raise OverlayError(path, f"is {kind_of(st.st_mode) or 'a directory'}, not a regular file (never opened)")
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as e:
        raise OverlayError(path, f"cannot be opened: {e.strerror}") from None


def _base_max_tokens(gen: Path, path: Path, base_chunks: int, dim: int) -> int:
    """The base generation's chunker bound, from its meta.json (read bounded, checked as readers check it)."""
    where = gen / META
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise OverlayError(path, f"its base's meta.json cannot be opened: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_META_BYTES:
            raise OverlayError(path, "its base's meta.json is not a regular file of at most 1 MiB")
        raw = _read_exact(fd, 0, st.st_size, path)
    finally:
        os.close(fd)
    try:
        meta = _parse_meta(raw, str(where), gen.parent.name)
    except IndexFormatError as e:
        raise OverlayError(path, f"its base's meta.json is not sound ({e})") from None
    if meta.n_chunks != base_chunks or meta.dim != dim:
        raise OverlayError(path, "its base's meta.json is not the generation given (n_chunks or dim differ)")
    return meta.max_tokens


def _read_exact(fd: int, offset: int, size: int, path: Path) -> bytes:
    """``size`` bytes of ``fd`` from ``offset`` (``OverlayError`` if the file is shorter now)."""
    return bytes(_read_into(fd, offset, bytearray(size), path))


def _read_into(fd: int, offset: int, buf: bytearray | memoryview, path: Path) -> bytearray | memoryview:
    """Fill ``buf`` with the bytes of ``fd`` from ``offset`` (``OverlayError`` if the file is shorter now)."""
    view = memoryview(buf)
    size, got = view.nbytes, 0
    while got < size:
        try:
            n = os.preadv(fd, [view[got : got + _READ_BLOCK]], offset + got)
        except OSError as e:
            raise OverlayError(path, f"cannot be read: {e.strerror}") from None
        if n <= 0:
            raise OverlayError(path, f"ended after {offset + got:,} bytes while being read (cut short meanwhile?)")
        got += n
    return buf


def _parse(path: Path, fd: int, st: os.stat_result, base_chunks: int, dim: int, max_tokens: int,
           base_records: Sequence[ChunkRecord] | None) -> OverlayContent:
    size = st.st_size
    if size < _HEAD + _DIGEST:
        raise OverlayError(path, f"is {size} bytes, shorter than any overlay")
    head = _read_exact(fd, 0, _HEAD, path)
    if head[:4] != MAGIC:
        raise OverlayError(path, "does not start with TLOV")
    version = int.from_bytes(head[4:8], "little")
    if version != VERSION:
        raise OverlayError(path, f"is version {version}; this reader knows {VERSION}")
    header_len = int.from_bytes(head[8:16], "little")
    if header_len > MAX_HEADER_BYTES or _HEAD + header_len + _DIGEST > size:
        raise OverlayError(path, f"claims a header of {header_len:,} bytes (at most {MAX_HEADER_BYTES:,}, "
                                 f"and within the file's {size:,})")
    header_raw = _read_exact(fd, _HEAD, header_len, path)
    header = _header(path, header_raw)
    n_chunks, n_new, docs_bytes, vectors_bytes = (header[k] for k in ("n_chunks", "n_new", "docs_bytes",
                                                                      "vectors_bytes"))
    assert isinstance(n_chunks, int) and isinstance(n_new, int)
    assert isinstance(docs_bytes, int) and isinstance(vectors_bytes, int)
    if header["dim"] != dim or header["base_chunks"] != base_chunks:
        raise OverlayError(path, f"is of a base of {header['base_chunks']} chunks of dim {header['dim']}, "
                                 f"not {base_chunks} of dim {dim}")
    if not 0 <= n_chunks <= MAX_N_CHUNKS or not 0 <= n_new <= n_chunks or not 1 <= dim <= MAX_DIM:
        raise OverlayError(path, f"n_chunks {n_chunks}, n_new {n_new} or dim {dim} is out of range")
    if vectors_bytes != n_new * dim * 4:
        raise OverlayError(path, f"vectors_bytes {vectors_bytes} is not n_new {n_new} x dim {dim} x 4")
    if not 2 * n_new <= docs_bytes <= n_new * (MAX_DOCS_LINE_BYTES + 1):
        raise OverlayError(path, f"docs_bytes {docs_bytes} cannot hold {n_new} lines")
    expected = _HEAD + header_len + docs_bytes + vectors_bytes + _DIGEST
    if size != expected:
        raise OverlayError(path, f"is {size:,} bytes; its header says {expected:,}")
    segs = header["segments"]
    assert isinstance(segs, tuple)
    try:
        tiled = _check_segments(segs, base_chunks)
    except ValueError as e:
        raise OverlayError(path, str(e)) from None
    if tiled != (n_chunks, n_new):
        raise OverlayError(path, f"its segments hold {tiled[0]} rows, {tiled[1]} of them new; "
                                 f"the header says {n_chunks} and {n_new}")

    # Every size is now known to be the file's own: the bodies are read, and the checksum checked.
    at = _HEAD + header_len
    docs_lines = bytes(_read_into(fd, at, bytearray(docs_bytes), path))
    vectors = np.empty((n_new, dim), dtype="<f4")
    _read_into(fd, at + docs_bytes, _bytes_of(vectors), path)
    stored = _read_exact(fd, at + docs_bytes + vectors_bytes, _DIGEST, path)
    digest = hashlib.sha256(head)
    digest.update(header_raw)
    digest.update(docs_lines)
    digest.update(_bytes_of(vectors))
    if digest.digest() != stored:
        raise OverlayError(path, "its checksum does not match its content")
    if os.pread(fd, 1, size):
        raise OverlayError(path, "grew while being read")
    vectors.flags.writeable = False

    meta = IndexMeta("", "", n_new, dim, "", "", max_tokens, 0)
    try:
        docs = DocsFile(docs_lines, str(path), meta)
        records = list(docs.stream())
        line_ends = docs.line_ends(0, n_new)
    except IndexFormatError as e:
        raise OverlayError(path, f"a new line is not a sound docs.jsonl line ({e})") from None
    _check_new_documents(path, segs, records)
    if base_records is not None:
        _check_boundaries(path, segs, records, base_records, base_chunks)

    bad = bad_vector_rows(vectors)
    if bad.size:
        raise OverlayError(path, f"new {vector_row_problem(vectors, int(bad[0]))}")
    return OverlayContent(path, _identity(path, st), base_chunks, n_chunks, dim, segs, records, docs_lines,
                          line_ends.astype(np.int64, copy=False), vectors)


def _header(path: Path, raw: bytes) -> dict[str, object]:
    """The header JSON: the seven keys, each of its type (``segments`` as a tuple of triples)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise OverlayError(path, f"its header is not valid JSON ({type(e).__name__})") from None
    if type(obj) is not dict or any(k not in obj for k in _HEADER_KEYS):
        raise OverlayError(path, f"its header lacks one of {', '.join(_HEADER_KEYS)}")
    for key in _HEADER_KEYS:
        if key != "segments" and type(obj[key]) is not int:
            raise OverlayError(path, f"its header's {key} is not an integer")
    segs = obj["segments"]
    if type(segs) is not list:
        raise OverlayError(path, "its header's segments is not a list")
    out = []
    for seg in segs:
        if (type(seg) is not list or len(seg) != 3 or seg[0] not in ("old", "new")
                or type(seg[1]) is not int or type(seg[2]) is not int):
            raise OverlayError(path, f"segment {str(seg)[:80]} is not [\"old\"|\"new\", lo, hi]")
        out.append((str(seg[0]), int(seg[1]), int(seg[2])))
    obj["segments"] = tuple(out)
    return obj


def _check_segments(segs: Sequence[tuple[str, int, int]], base_chunks: int) -> tuple[int, int]:
    """(n_chunks, n_new) the segments tile; ``ValueError`` naming the first breach.

    Each is non-empty; "old" ranges lie in 0..base_chunks, ascending and
    disjoint; "new" ranges follow one another from 0 (they cover 0..n_new
    in order).
    """
    n_chunks = n_new = old_end = 0
    for i, (source, lo, hi) in enumerate(segs):
        if not lo < hi:
            raise ValueError(f"segment {i} ({source} {lo}..{hi}) is empty or reversed")
        if source == "old":
            if lo < old_end or hi > base_chunks:
                raise ValueError(f"segment {i} (old {lo}..{hi}) overlaps an earlier one, goes back, or lies "
                                 f"outside the base's rows 0..{base_chunks}")
            old_end = hi
        elif source == "new":
            if lo != n_new:
                raise ValueError(f"segment {i} (new {lo}..{hi}) does not follow the new rows before it (at {n_new})")
            n_new = hi
        else:
            raise ValueError(f"segment {i}'s source {source!r} is neither old nor new")
        n_chunks += hi - lo
    return n_chunks, n_new


def _check_new_documents(path: Path, segs: Sequence[tuple[str, int, int]], records: list[ChunkRecord]) -> None:
    """Each "new" segment holds whole documents: it starts at a chunk #0 and the next new line (if any) is one."""
    for source, lo, hi in segs:
        if source == "new" and (records[lo].k != 0 or (hi < len(records) and records[hi].k != 0)):
            raise OverlayError(path, f"new rows {lo}..{hi} do not hold whole documents")


def _check_boundaries(path: Path, segs: Sequence[tuple[str, int, int]], records: list[ChunkRecord],
                      base: Sequence[ChunkRecord], base_chunks: int) -> None:
    """With the base's records: every "old" run holds whole documents, and documents ascend across boundaries."""
    if len(base) != base_chunks:
        raise OverlayError(path, f"its base holds {len(base)} rows, not {base_chunks}")
    try:
        prev: bytes | None = None
        for source, lo, hi in segs:
            if source == "old":
                first, last = base[lo], base[hi - 1]
                if first.k != 0 or (hi < base_chunks and base[hi].k != 0):
                    raise OverlayError(path, f"old rows {lo}..{hi} do not hold whole documents")
            else:
                first, last = records[lo], records[hi - 1]
            here = first.doc_id.encode("utf-8")
            if prev is not None and here <= prev:
                raise OverlayError(path, f"documents do not ascend where rows {lo}..{hi} ({source}) begin")
            prev = last.doc_id.encode("utf-8")
    except IndexFormatError as e:
        raise OverlayError(path, f"its base's line cannot be read ({e})") from None
