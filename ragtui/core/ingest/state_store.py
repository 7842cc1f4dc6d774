"""The writer state on disk: ``.state/<index_id>/state.bin``, kept by ``StateStore``.

A snapshot record followed by delta records, one appended per publish with
only what changed, each checked by its CRC-32 (spec/index-format.md, "The
writer state"); the file is rewritten as one snapshot when the deltas
outgrow it. A state written by earlier versions (``files.json``) is read
when there is no state.bin, and replaced by one at the next save. Whatever
cannot be read is discarded: the state only saves time.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import struct
import zlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragtui.core.ingest.publish import state_dir
from ragtui.core.ingest.state import (
    HAS_SHA,
    HAS_STAMP,
    HEAD_KEYS,
    FileEntry,
    FileTable,
    Stamp,
    StateError,
    WriterState,
    file_stamp,
    stat_stamp,
    state_from_head,
    state_from_json,
)

__all__ = [
    "MAX_STATE_BYTES", "STATE_NAME", "StateStore", "load_state", "read_state", "recorded_folder", "state_path",
]

MAX_STATE_BYTES = 512 << 20
"""A state file above this is not read (nor written): several million documents' stamps and hashes."""
STATE_NAME = "state.bin"
LEGACY_NAME = "files.json"
MAGIC = b"RAGTUI-STATE 2\n"
RECORD_HEAD = struct.Struct("<II")
"""Before each record's body: its length and the CRC-32 of the body."""
COUNTS = struct.Struct("<IIII")
"""At the start of a body: the length of its head (JSON), documents put, documents deleted, bytes of names."""
ENTRY_BYTES = 5 * 8 + 1 + 32
"""Per document put: size, mtime, ctime, inode, n_chunks (8 bytes each), flags (1), SHA-256 (32)."""
COMPACT_RECORDS = 4096
"""Deltas after which the file is rewritten as one snapshot (bounds the work of reading it)."""
COMPACT_MIN_BYTES = 1 << 20
"""Deltas are appended until they take more than the snapshot and at least this many bytes."""


def _encode_record(head: dict[str, Any], puts: Mapping[str, FileEntry], deletes: list[str]) -> bytes:
    head_bytes = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    names = "\0".join([*puts, *deletes]).encode("utf-8")
    entries = list(puts.values())
    n = len(entries)
    nums = np.zeros((5, n), dtype="<i8")
    flags = np.zeros(n, dtype=np.uint8)
    for i, e in enumerate(entries):
        if e.stamp is not None:
            size, mtime, ctime, ino = e.stamp
            # Inode numbers are unsigned 64-bit: the upper half is stored as its two's complement.
            nums[0:4, i] = (size, mtime, ctime, ino - (1 << 64) if ino >= 1 << 63 else ino)
            flags[i] |= HAS_STAMP
        if e.sha256 is not None:
            flags[i] |= HAS_SHA
        nums[4, i] = -1 if e.n_chunks is None else e.n_chunks
    shas = bytes.fromhex("".join(e.sha256 if e.sha256 is not None else "00" * 32 for e in entries))
    body = b"".join((COUNTS.pack(len(head_bytes), n, len(deletes), len(names)), head_bytes, names,
                     nums.tobytes(), flags.tobytes(), shas))
    return RECORD_HEAD.pack(len(body), zlib.crc32(body)) + body


def _records(data: bytes) -> Iterator[tuple[int, dict[str, Any], FileTable, list[str]]]:
    """(end offset, head, puts, deletes) of each intact record after the magic, up to the first bad one."""
    pos = len(MAGIC)
    while pos + RECORD_HEAD.size <= len(data):
        length, crc = RECORD_HEAD.unpack_from(data, pos)
        start, end = pos + RECORD_HEAD.size, pos + RECORD_HEAD.size + length
        if end > len(data) or zlib.crc32(memoryview(data)[start:end]) != crc:
            return
        try:
            head, puts, deletes = _decode_body(memoryview(data)[start:end])
        except (StateError, ValueError, TypeError, RecursionError):
            return
        yield end, head, puts, deletes
        pos = end


def _decode_body(body: memoryview) -> tuple[dict[str, Any], FileTable, list[str]]:
    if len(body) < COUNTS.size:
        raise StateError
    head_len, n_put, n_del, names_len = COUNTS.unpack_from(body, 0)
    at = COUNTS.size
    if len(body) != at + head_len + names_len + n_put * ENTRY_BYTES:
        raise StateError
    head = json.loads(bytes(body[at : at + head_len]))
    at += head_len
    if not isinstance(head, dict) or not set(head) <= set(HEAD_KEYS):
        raise StateError
    names = str(body[at : at + names_len], "utf-8").split("\0") if names_len else []
    at += names_len
    if len(names) != n_put + n_del or any(not name for name in names[n_put:]):
        raise StateError
    # The columns are taken as they lie (no object per document): a no-op sync of 100k files reads this first.
    nums = np.frombuffer(body, dtype="<i8", count=5 * n_put, offset=at).reshape(5, n_put)
    at += 40 * n_put
    flags = np.frombuffer(body, dtype=np.uint8, count=n_put, offset=at)
    at += n_put
    return head, FileTable(names[:n_put], nums, flags, bytes(body[at:])), names[n_put:]


def state_path(artifacts: str | os.PathLike[str], index_id: str) -> Path:
    """The file the writer state of ``index_id`` is read from: state.bin, or files.json when only that exists."""
    folder = state_dir(artifacts, index_id)
    if not os.path.lexists(folder / STATE_NAME) and os.path.lexists(folder / LEGACY_NAME):
        return folder / LEGACY_NAME
    return folder / STATE_NAME


def _read_bytes(path: Path) -> tuple[bytes, Stamp]:
    """The bytes and stamp of a state file: ``OSError`` unless it is a regular file (not a link) of at most ``MAX_STATE_BYTES``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_STATE_BYTES:
            raise OSError(errno.EINVAL, "not a regular file of at most MAX_STATE_BYTES", str(path))
        data = f.read(MAX_STATE_BYTES + 1)
        if len(data) != st.st_size or stat_stamp(os.fstat(fd)) != stat_stamp(st):
            raise OSError(errno.EAGAIN, "changed while it was read", str(path))
    return data, stat_stamp(st)


@dataclass
class _Read:
    state: WriterState | None = None
    stamp: Stamp | None = None
    clean: bool = False
    """Whether the file is state.bin and ends with an intact record (a delta may be appended)."""
    snapshot_bytes: int = 0
    delta_bytes: int = 0
    deltas: int = 0


def _read(artifacts: str | os.PathLike[str], index_id: str) -> _Read:
    path = state_path(artifacts, index_id)
    try:
        data, stamp = _read_bytes(path)
    except OSError:
        return _Read()
    if path.name == LEGACY_NAME:
        try:
            return _Read(state_from_json(json.loads(data.decode("utf-8"))), stamp)
        except (ValueError, RecursionError):
            return _Read()
    if not data.startswith(MAGIC):
        return _Read()
    out = _Read(stamp=stamp)
    snapshot: FileTable | None = None
    deltas: list[tuple[FileTable, list[str]]] = []
    head: dict[str, Any] = {}
    end = len(MAGIC)
    for end, rec_head, puts, deletes in _records(data):
        if snapshot is None:
            if deletes:
                return _Read()  # a snapshot deletes nothing: not a file this module wrote
            out.snapshot_bytes = end
            snapshot = puts
        else:
            deltas.append((puts, deletes))
        head.update(rec_head)
    if snapshot is None:
        return _Read()
    try:
        # Kept as columns, the deltas folded in at once: nothing is built per document.
        files = snapshot.with_deltas(deltas) if deltas else snapshot
    except (KeyError, StateError):
        return _Read()  # a delta deletes what is not there: not a file this module wrote
    out.deltas = len(deltas)
    out.state = state_from_head(head, files)
    out.clean = out.state is not None and end == len(data)
    out.delta_bytes = end - out.snapshot_bytes
    if out.state is None:
        out.stamp = None
    return out


def read_state(artifacts: str | os.PathLike[str], index_id: str) -> WriterState | None:
    """The writer's state for ``index_id`` (None when absent, unreadable, over ``MAX_STATE_BYTES`` or malformed).

    Read without blocking and only if it is a regular file: a bad state is
    discarded, which costs the next sync a full read of the folder and index.
    A record cut short (a writer killed while appending it) ends the state
    there: it then describes an earlier generation, which the next sync
    does not take for the current one.
    """
    return _read(artifacts, index_id).state


def recorded_folder(artifacts: str | os.PathLike[str], index_id: str) -> str | None:
    """The folder the writer state of ``index_id`` records (None without a usable state).

    Only the first record is read: a state is rewritten as a snapshot when its folder changes.
    """
    path = state_path(artifacts, index_id)
    if path.name == LEGACY_NAME:
        state = read_state(artifacts, index_id)
        return None if state is None else state.folder
    try:
        data, _ = _read_bytes(path)
    except OSError:
        return None
    if not data.startswith(MAGIC):
        return None
    for _end, head, _puts, _deletes in _records(data):
        folder = head.get("folder")
        return folder if isinstance(folder, str) else None
    return None


def load_state(artifacts: str | os.PathLike[str], index_id: str) -> dict[str, Any]:
    """The writer's state as a JSON object ({} when there is none that can be used)."""
    state = read_state(artifacts, index_id)
    return {} if state is None else state.to_json()


class StateStore:
    """The writer state file of one index, as one writer reads and writes it.

    ``current()`` is the state the file holds, from memory while the file is
    still the one this store last read or wrote (same stamp). ``save()``
    appends a delta record when it can and rewrites the file otherwise. The
    caller holds the index lock for ``save``.
    """

    def __init__(self, artifacts: str | os.PathLike[str], index_id: str) -> None:
        self.artifacts, self.index_id = artifacts, index_id
        self.path = state_dir(artifacts, index_id) / STATE_NAME
        self._known = _Read()

    def current(self) -> WriterState | None:
        known = self._known
        if known.state is not None and file_stamp(state_path(self.artifacts, self.index_id)) == known.stamp:
            return known.state
        self._known = _read(self.artifacts, self.index_id)
        return self._known.state

    @property
    def stamp(self) -> Stamp | None:
        """The stamp of the file ``current()`` came from (None when it came from none)."""
        return self._known.stamp

    def save(self, state: WriterState, changed: Collection[str] | None = None) -> bool:
        """Make the file hold ``state``; False when it could not (the state only saves time: not worth failing for).

        ``changed``, when the caller knows it: every doc_id whose entry may differ from the last state's (added,
        changed or removed); the delta record then looks at those alone, not at every document.
        """
        known = self._known
        base = known.state
        appendable = (
            base is not None and known.clean and base.folder == state.folder
            and known.deltas < COMPACT_RECORDS and known.delta_bytes <= max(known.snapshot_bytes, COMPACT_MIN_BYTES)
            and file_stamp(self.path) == known.stamp
        )
        try:
            if appendable and base is not None:
                self._append(base, state, changed)
            else:
                self._rewrite(state)
            return True
        except (OSError, UnicodeEncodeError, ValueError, OverflowError):
            self._known = _Read()
            return False

    def _append(self, base: WriterState, state: WriterState, changed: Collection[str] | None = None) -> None:
        old, new = base.files, state.files
        if changed is None:
            puts = {d: e for d, e in new.items() if old.get(d) != e}
            deletes = [d for d in old if d not in new]
        else:
            puts = {d: new[d] for d in sorted(changed) if d in new and old.get(d) != new[d]}
            deletes = [d for d in sorted(changed) if d in old and d not in new]
        base_head, head = base.head(), state.head()
        record = _encode_record({k: v for k, v in head.items() if base_head.get(k) != v}, puts, deletes)
        known = self._known
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if stat_stamp(st) != known.stamp or not stat.S_ISREG(st.st_mode):
                raise OSError(errno.ESTALE, "the state file changed since it was read")
            if st.st_size + len(record) > MAX_STATE_BYTES:
                raise OSError(errno.EFBIG, "larger than a state file may be")
            _write_all(fd, record)
            stamp = stat_stamp(os.fstat(fd))
        finally:
            os.close(fd)
        self._known = _Read(state, stamp, True, known.snapshot_bytes, known.delta_bytes + len(record), known.deltas + 1)

    def _rewrite(self, state: WriterState) -> None:
        record = _encode_record(state.head(), state.files, [])
        if len(MAGIC) + len(record) > MAX_STATE_BYTES:
            raise OSError(errno.EFBIG, "larger than a state file may be")
        path = self.path
        tmp = path.with_name(f".{STATE_NAME}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                _write_all(fd, MAGIC + record)
            finally:
                os.close(fd)
            try:
                os.replace(tmp, path)
            except IsADirectoryError:
                # A directory where the state belongs (not ours to keep: it is in the writer's own folder).
                shutil.rmtree(path)
                os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        stamp = file_stamp(path)
        if stamp is None:
            raise OSError(errno.ENOENT, "the state file vanished once written")
        self._known = _Read(state, stamp, True, len(MAGIC) + len(record), 0, 0)
        try:
            os.unlink(path.with_name(LEGACY_NAME))  # an earlier version's state: this one replaces it
        except FileNotFoundError:
            pass
        except OSError:
            if os.path.isdir(path.with_name(LEGACY_NAME)):
                shutil.rmtree(path.with_name(LEGACY_NAME), ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
