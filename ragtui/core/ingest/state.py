"""The writer's state: what the last sync of an index saw (outside the index; it only saves time).

``.state/<index_id>/files.json`` records the folder, the settings and walk
rules of the last sync, which generation it published (and the size, mtime,
ctime and inode of each of its four files), and per document its stamp, the
SHA-256 of its bytes and its number of chunks. A state that cannot be read,
is not a regular file, is too large or does not hold what this module
writes is discarded: the next sync then reads the folder and the index in
full, which costs time and nothing else.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ragtui.core.index.index_format import FILES, IndexMeta
from ragtui.core.ingest.publish import state_dir

__all__ = [
    "MAX_STATE_BYTES", "STATE_VERSION", "FileEntry", "IndexStamp", "Settings", "Stamp", "WriterState", "file_stamp",
    "index_stamp", "load_state", "read_stamped_state", "read_state", "recorded_folder", "save_state", "stat_stamp", "state_file",
]

STATE_VERSION = 1
MAX_STATE_BYTES = 512 << 20
"""files.json above this is not read (nor written): about two million documents' stamps and hashes."""


class Stamp(NamedTuple):
    """What identifies a file's content without reading it.

    ctime cannot be set back by a user, so a file written in place and given
    its old mtime again still differs.
    """

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int


def stat_stamp(st: os.stat_result) -> Stamp:
    return Stamp(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def file_stamp(path: str | os.PathLike[str]) -> Stamp | None:
    """``path``'s stamp (following links), or None when it cannot be had."""
    try:
        return stat_stamp(os.stat(path))
    except OSError:
        return None


@dataclass(frozen=True)
class IndexStamp:
    """The generation a link named when stamped: its real directory and each of the four files' stamps."""

    dir: str
    files: tuple[Stamp, ...]
    """In ``FILES`` order."""

    def of(self, name: str) -> Stamp:
        return self.files[FILES.index(name)]


def index_stamp(target: str | os.PathLike[str]) -> IndexStamp | None:
    """The stamp of the generation ``target`` names now (None if one of its files is missing)."""
    real = os.path.realpath(target)
    stamps = []
    for name in FILES:
        stamp = file_stamp(os.path.join(real, name))
        if stamp is None:
            return None
        stamps.append(stamp)
    return IndexStamp(real, tuple(stamps))


@dataclass(frozen=True)
class Settings:
    """What makes two indexes of the same folder differ: any change re-chunks every document."""

    embedding_model: str
    dim: int
    tokenizer: str
    max_tokens: int
    overlap: int
    k1: float
    b: float

    def to_json(self) -> dict[str, Any]:
        return {
            "embedding_model": self.embedding_model, "dim": self.dim, "tokenizer": self.tokenizer,
            "max_tokens": self.max_tokens, "overlap": self.overlap, "k1": self.k1, "b": self.b,
        }

    @classmethod
    def of_meta(cls, m: IndexMeta) -> Settings:
        return cls(m.embedding_model, m.dim, m.tokenizer, m.max_tokens, m.overlap, m.k1, m.b)

    def differing(self, other: Settings) -> list[str]:
        """The names of the settings that differ, in declaration order."""
        mine, theirs = self.to_json(), other.to_json()
        return [k for k in mine if mine[k] != theirs[k]]


class FileEntry(NamedTuple):
    """One document as the last sync saw it."""

    stamp: Stamp | None
    """None: read the file again next time (its chunks came from an index, not from reading it)."""
    sha256: str | None
    """Hex SHA-256 of the file's bytes (None with ``stamp`` None)."""
    n_chunks: int | None = None
    """How many chunks the published generation holds for it; None until it is published."""


@dataclass
class WriterState:
    """Everything the writer remembers of the index it published last."""

    folder: str
    settings: Settings
    walk: dict[str, Any]
    """The walk rules (``WalkRules.describe()``)."""
    generation: str | None
    index_files: IndexStamp | None
    files: dict[str, FileEntry] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The state as files.json holds it."""
        idx: dict[str, Any] | None = None
        if self.index_files is not None:
            idx = {"dir": self.index_files.dir, **{n: list(s) for n, s in zip(FILES, self.index_files.files)}}
        files: dict[str, Any] = {}
        for doc_id, e in self.files.items():
            entry: dict[str, Any] = {"stat": None if e.stamp is None else list(e.stamp), "sha256": e.sha256}
            if e.n_chunks is not None:
                entry["n_chunks"] = e.n_chunks
            files[doc_id] = entry
        return {
            "version": STATE_VERSION, "folder": self.folder, "root": str(Path(self.folder).parent),
            "settings": self.settings.to_json(), "walk": self.walk, "generation": self.generation,
            "index_files": idx, "files": files,
        }


# -- reading: every field checked, anything unexpected discards the whole state -----------------


class _Bad(ValueError):
    pass


def _int(v: object) -> int:
    if type(v) is not int:
        raise _Bad
    return v


def _str(v: object) -> str:
    if type(v) is not str:
        raise _Bad
    return v


def _stamp(v: object) -> Stamp:
    if not isinstance(v, list) or len(v) != 4:
        raise _Bad
    return Stamp(*(_int(x) for x in v))


def _settings(v: object) -> Settings:
    if not isinstance(v, dict) or set(v) != {"embedding_model", "dim", "tokenizer", "max_tokens", "overlap", "k1", "b"}:
        raise _Bad
    k1, b = v["k1"], v["b"]
    if type(k1) not in (int, float) or type(b) not in (int, float):
        raise _Bad
    return Settings(_str(v["embedding_model"]), _int(v["dim"]), _str(v["tokenizer"]), _int(v["max_tokens"]),
                    _int(v["overlap"]), k1, b)


def _index_files(v: object) -> IndexStamp | None:
    if v is None:
        return None
    if not isinstance(v, dict) or set(v) != {"dir", *FILES}:
        raise _Bad
    return IndexStamp(_str(v["dir"]), tuple(_stamp(v[n]) for n in FILES))


def _entry(v: object) -> FileEntry:
    if not isinstance(v, dict):
        raise _Bad
    raw_stamp, sha, n = v.get("stat"), v.get("sha256"), v.get("n_chunks")
    return FileEntry(
        None if raw_stamp is None else _stamp(raw_stamp),
        None if sha is None else _str(sha),
        None if n is None else _int(n),
    )


def state_from_json(obj: object) -> WriterState | None:
    """The state files.json holds, or None when it is not one this module wrote."""
    try:
        if not isinstance(obj, dict) or obj.get("version") != STATE_VERSION:
            return None
        files = obj.get("files")
        walk = obj.get("walk")
        generation = obj.get("generation")
        if not isinstance(files, dict) or not isinstance(walk, dict):
            return None
        return WriterState(
            folder=_str(obj.get("folder")),
            settings=_settings(obj.get("settings")),
            walk=walk,
            generation=None if generation is None else _str(generation),
            index_files=_index_files(obj.get("index_files")),
            files={_str(d): _entry(e) for d, e in files.items()},
        )
    except (_Bad, TypeError):
        return None


def state_file(artifacts: str | os.PathLike[str], index_id: str) -> Path:
    return state_dir(artifacts, index_id) / "files.json"


def read_state(artifacts: str | os.PathLike[str], index_id: str) -> WriterState | None:
    """The writer's state for ``index_id`` (None when absent, unreadable, over ``MAX_STATE_BYTES`` or malformed).

    Read without blocking and only if it is a regular file: a bad state is
    discarded, which costs the next sync a full read of the folder and index.
    """
    return read_stamped_state(artifacts, index_id)[0]


def read_stamped_state(artifacts: str | os.PathLike[str], index_id: str) -> tuple[WriterState | None, Stamp | None]:
    """``read_state``, and the stamp of the very file it read (None when it read none)."""
    try:
        data, stamp = _read_state_bytes(state_file(artifacts, index_id))
        obj = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError, MemoryError):
        return None, None
    state = state_from_json(obj)
    return state, (stamp if state is not None else None)


def recorded_folder(artifacts: str | os.PathLike[str], index_id: str) -> str | None:
    """The folder the writer state of ``index_id`` records (None without a usable state)."""
    state = read_state(artifacts, index_id)
    return None if state is None else state.folder


def load_state(artifacts: str | os.PathLike[str], index_id: str) -> dict[str, Any]:
    """The writer's state as a JSON object ({} when there is none that can be used)."""
    state = read_state(artifacts, index_id)
    return {} if state is None else state.to_json()


def _read_state_bytes(path: Path) -> tuple[bytes, Stamp]:
    """files.json's bytes and stamp: ``OSError`` unless it is a regular file (not a link) of at most ``MAX_STATE_BYTES``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_STATE_BYTES:
            raise OSError(errno.EINVAL, "not a regular file of at most MAX_STATE_BYTES", str(path))
        data = f.read(MAX_STATE_BYTES + 1)
        if len(data) != st.st_size or stat_stamp(os.fstat(fd)) != stat_stamp(st):
            raise OSError(errno.EAGAIN, "changed while it was read", str(path))
    return data, stat_stamp(st)


def save_state(artifacts: str | os.PathLike[str], index_id: str, state: WriterState) -> Stamp | None:
    """Write ``state`` (through a temporary file); the stamp of the file written, or None if it was not.

    The state only saves time: without it the next sync re-reads every file
    (and still reuses every stored vector). Not worth failing a sync for.
    """
    path = state_file(artifacts, index_id)
    tmp = path.with_name(f".files.json.{os.getpid()}.tmp")
    try:
        data = json.dumps(state.to_json(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(data) > MAX_STATE_BYTES:
            raise OSError(errno.EFBIG, "larger than a state file may be")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        try:
            os.replace(tmp, path)
        except IsADirectoryError:
            # A directory where the state belongs (not ours to keep: it is in the writer's own folder).
            shutil.rmtree(path)
            os.replace(tmp, path)
        return file_stamp(path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
