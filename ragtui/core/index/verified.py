"""What a writer checked of the generation it published, kept for readers in the cache: it only saves time.

A reader opening a generation (``index_format.read_index``) finds where each
line of docs.jsonl ends by scanning the whole file, checks every row of
vectors.f32 for unit length, and hashes bm25.idx to find its decoded arrays
in the cache. At 100k chunks those three passes are most of a reload. The
writer that published the generation knows all three already: it laid out
the lines, every row it wrote passed the same norm check (embedder output,
the journal, rows of a generation it read checked), and it stored the
decoded BM25 arrays under their key. So just before it makes the generation
current it records a *verified entry* (``record``): an arraycache entry
``verified-<index_id>-<key>/`` whose key is the hash of the four files'
stamps (size, mtime, ctime, inode, device), holding

* ``head.npy`` (int64): the entry format, which facts it vouches for
  (``FACT_*``), when it was recorded (ns since the epoch, taken before the
  files were stamped) and the stamps themselves;
* ``ends.npy`` (int64): the offset of every newline of docs.jsonl;
* ``bm25_key.npy`` (uint8): the ``BM25Index.cache_key`` of bm25.idx;
* ``doclex_key.npy`` (uint8): the key of the generation's document-level
  BM25 entry (``docaware.doclex_key``), when the writer stored one.

A reader (``lookup``) takes an entry only when the stamps of the files it
opened (``fstat``) are exactly the recorded ones and the entry is not
*racy*: every file's ctime is older than the recording time by more than
the filesystem's timestamp granularity (git's rule for its index). A file
changed after it was stamped gets a later ctime, which no user can set back;
within one granularity step of the stamp a change could keep the same ctime,
so such an entry is not used. A generation copied from elsewhere has other
inodes and never matches.

What an entry holds is input like any other file: ``lookup`` returns only
values of the right shapes, and the reader still checks what is cheap
(``docs_file.ends_fit``: each stored end is a newline closing a ``{...}``
line and the last is the file's end; the BM25 arrays against bm25.idx's
header and doc_len). Anything else (no entry, another format, damage)
means the full checks, with the same result, only slower.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

import numpy as np

from ragtui.core.index.arraycache import evict, load_entry, store_arrays

__all__ = [
    "FACT_BM25_KEY", "FACT_DOCLEX_KEY", "FACT_ENDS", "FACT_UNIT_ROWS", "FileStamp", "Verified", "entry_key", "file_stamp",
    "granularity_ns", "is_racy", "lookup", "record", "reader_saving_ns",
]

KIND = "verified"
FORMAT = 1
FACT_ENDS = 1
"""``ends.npy`` holds docs.jsonl's newline offsets."""
FACT_UNIT_ROWS = 2
"""Every row of vectors.f32 passed the unit-norm check."""
FACT_BM25_KEY = 4
"""``bm25_key.npy`` holds bm25.idx's ``BM25Index.cache_key``."""
FACT_DOCLEX_KEY = 8
"""``doclex_key.npy`` holds the key of the document-level BM25 entry the writer stored (``docaware``)."""
_ALL_FACTS = FACT_ENDS | FACT_UNIT_ROWS | FACT_BM25_KEY | FACT_DOCLEX_KEY

FINE_GRANULARITY_NS = 20_000_000
"""A filesystem whose timestamps have sub-millisecond digits stamps from the kernel's clock, which lags
real time by at most one tick (10 ms at HZ=100, the coarsest Linux runs with); twice that to be safe."""
COARSE_GRANULARITY_NS = 2_000_000_000
"""Timestamps in whole milliseconds or seconds (FAT has 2 s): assume the coarsest."""

FileStamp = tuple[int, int, int, int, int]
"""size, mtime_ns, ctime_ns, inode, device."""

_HEAD = 3
"""head.npy: FORMAT, facts, recorded_ns, then the stamps (5 per file)."""
_STAMP_FIELDS = 5
_BM25_KEY = re.compile(r"v\d+[a-z]*-[0-9a-f]{40}")
_DOCLEX_KEY = re.compile(r"v\d+-[0-9a-f]{40}")
_U64 = (1 << 64) - 1


def file_stamp(st: os.stat_result) -> FileStamp:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _as_i64(stamps: Sequence[FileStamp]) -> list[int]:
    """The stamps flattened into int64 values (an inode above 2^63 as its two's complement)."""
    out = []
    for s in stamps:
        for v in s:
            v &= _U64
            out.append(v - (1 << 64) if v >> 63 else v)
    return out


def entry_key(stamps: Sequence[FileStamp]) -> str:
    """The cache key of the entry of a generation whose files have ``stamps`` (40 hex digits)."""
    flat = _as_i64(stamps)
    return hashlib.sha256(struct.pack(f"<{len(flat)}q", *flat)).hexdigest()[:40]


def granularity_ns(stamps: Sequence[FileStamp]) -> int:
    """How far apart two timestamps of this filesystem may be and still look equal (a safe bound)."""
    fine = any(s[1] % 1_000_000 or s[2] % 1_000_000 for s in stamps)
    return FINE_GRANULARITY_NS if fine else COARSE_GRANULARITY_NS


def is_racy(stamps: Sequence[FileStamp], recorded_ns: int) -> bool:
    """Whether a file could have changed after ``recorded_ns`` and still have the stamp it had then."""
    limit = recorded_ns - granularity_ns(stamps)
    return any(s[2] >= limit for s in stamps)


def reader_saving_ns(docs_bytes: int, vectors_bytes: int, bm25_bytes: int) -> int:
    """About what an entry saves a reader: the newline scan, the norm pass and the SHA-256 it skips.

    Measured at 100k chunks on 2 loaded cores (99 MB of docs.jsonl 81 ms,
    102 MB of vectors 36 ms, 13.5 MB of bm25.idx 24 ms), rounded down.
    """
    return int(0.7 * docs_bytes + 0.3 * vectors_bytes + 1.5 * bm25_bytes)


@dataclass(frozen=True)
class Verified:
    """What an entry vouches for, in shapes a reader can use (the ends still to be checked against the file)."""

    ends: np.ndarray | None
    """int64, one per line: where each newline of docs.jsonl is. Not yet checked against the file."""
    unit_rows: bool
    """Every row of vectors.f32 is a finite unit vector."""
    bm25_key: str | None
    """bm25.idx's ``BM25Index.cache_key``."""
    doclex_key: str | None = None
    """The key of the generation's document-level BM25 entry (``docaware.doclex_key``)."""


def lookup(cache_dir: Path | None, index_id: str, stamps: Sequence[FileStamp], n_chunks: int) -> Verified | None:
    """The entry recorded for files with exactly ``stamps`` (in ``FILES`` order), or None.

    None too when the entry is racy, of another format, or holds anything
    of the wrong shape (``ends`` must have ``n_chunks`` values). Never raises
    for what is in the cache.
    """
    if cache_dir is None:
        return None
    arrays = load_entry(cache_dir, KIND, index_id, entry_key(stamps))
    if arrays is None:
        return None
    try:
        return _parse(arrays, stamps, n_chunks)
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError):
        return None


def _parse(arrays: dict[str, np.ndarray], stamps: Sequence[FileStamp], n_chunks: int) -> Verified | None:
    head = arrays.get("head")
    flat = _as_i64(stamps)
    if not _int_vector(head, "i", 8) or head.size != _HEAD + len(flat):
        return None
    values = [int(v) for v in head]
    fmt, facts, recorded = values[:_HEAD]
    if fmt != FORMAT or values[_HEAD:] != flat or facts & ~_ALL_FACTS or is_racy(stamps, recorded):
        return None
    ends = None
    if facts & FACT_ENDS:
        stored = arrays.get("ends")
        if not _int_vector(stored, "i", 8) or stored.size != n_chunks:
            return None
        ends = np.array(stored, dtype=np.int64)  # a copy: the entry's file may be replaced or cut while in use
    keys: list[str | None] = []
    for fact, name, shape in ((FACT_BM25_KEY, "bm25_key", _BM25_KEY), (FACT_DOCLEX_KEY, "doclex_key", _DOCLEX_KEY)):
        key = None
        if facts & fact:
            stored = arrays.get(name)
            if not _int_vector(stored, "u", 1) or stored.size > 64:
                return None
            key = bytes(stored).decode("ascii")
            if not shape.fullmatch(key):
                return None
        keys.append(key)
    return Verified(ends, bool(facts & FACT_UNIT_ROWS), keys[0], keys[1])


def _int_vector(a: object, kind: str, itemsize: int) -> TypeGuard[np.ndarray]:
    return isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype.kind == kind and a.dtype.itemsize == itemsize


def record(cache_dir: Path, index_id: str, paths: Sequence[Path], *, ends: np.ndarray, bm25_key: str | None,
           doclex_key: str | None = None, max_wait_ns: int | None = None) -> bool:
    """Record the entry of the generation whose four files are ``paths`` (meta.json, docs.jsonl, vectors.f32, bm25.idx).

    For the writer, once the files are complete and flushed and before the
    generation becomes current, so a reader that opens it finds the entry.
    ``ends`` are docs.jsonl's newline offsets as written; ``bm25_key`` what
    ``BM25Index.store`` returned (None: not vouched for), ``doclex_key`` the
    key of the document-level BM25 entry it stored (None: none). Every vector row
    must have passed ``bad_vector_rows``. When the files were written too
    recently for the entry not to be racy, waits until it is not if that
    takes at most ``max_wait_ns`` (by default what the entry saves a reader,
    ``reader_saving_ns``: a small index is not worth a wait), else records
    nothing. Best effort: True when recorded.
    """
    facts = (FACT_ENDS | FACT_UNIT_ROWS | (FACT_BM25_KEY if bm25_key is not None else 0)
             | (FACT_DOCLEX_KEY if doclex_key is not None else 0))
    try:
        recorded = time.time_ns()  # before the stamps: any change after it gets a later ctime
        stamps = [file_stamp(os.stat(p)) for p in paths]
        if len(stamps) != 4:
            raise ValueError("an index has four files")
        wait = max(s[2] for s in stamps) + granularity_ns(stamps) + 1 - recorded
        if wait > 0:
            if max_wait_ns is None:
                max_wait_ns = reader_saving_ns(stamps[1][0], stamps[2][0], stamps[3][0])
            if wait > max_wait_ns:
                return False
            time.sleep(wait / 1e9)
            recorded = time.time_ns()
            if [file_stamp(os.stat(p)) for p in paths] != stamps:
                return False
        if is_racy(stamps, recorded):
            return False
        head = np.array([FORMAT, facts, recorded, *_as_i64(stamps)], dtype=np.int64)
        arrays = {"head": head, "ends": np.asarray(ends, dtype=np.int64)}
        if bm25_key is not None:
            arrays["bm25_key"] = np.frombuffer(bm25_key.encode("ascii"), dtype=np.uint8)
        if doclex_key is not None:
            arrays["doclex_key"] = np.frombuffer(doclex_key.encode("ascii"), dtype=np.uint8)
        stored = store_arrays(cache_dir, KIND, index_id, entry_key(stamps), arrays)
        evict(cache_dir, KIND, index_id)
        return stored
    except (OSError, ValueError):
        return False
