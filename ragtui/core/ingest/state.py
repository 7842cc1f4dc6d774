"""The writer's state: what the last sync of an index saw (outside the index; it only saves time).

It records the folder, the settings and walk rules of the last sync, which
generation it published (and the size, mtime, ctime and inode of each of its
four files), and per document its stamp, the SHA-256 of its bytes and its
number of chunks. A state that cannot be read, is not a regular file, is too
large or does not hold what this module writes is discarded: the next sync
then reads the folder and the index in full, which costs time and nothing
else.

This module holds what the state is (and its checked JSON form);
``state_store`` how it is kept on disk.
"""

from __future__ import annotations

import os
from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ragtui.core.index.index_format import FILES
from ragtui.core.index.records import IndexMeta

__all__ = [
    "STATE_VERSION", "FileEntry", "FileTable", "IndexStamp", "IndexSettings", "Stamp", "StateError", "WriterState",
    "chunk_total", "file_stamp",
    "index_stamp", "stat_stamp", "state_from_head", "state_from_json",
]

STATE_VERSION = 1
"""The version of the earlier JSON form (files.json), still read."""
HEAD_KEYS = ("folder", "settings", "walk", "generation", "index_files")
"""The fields of a state besides its documents."""


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
class IndexSettings:
    """What makes two indexes of the same folder differ: any change re-chunks every document."""

    embedding_model: str
    dim: int
    tokenizer: str
    max_tokens: int
    overlap: int
    k1: float
    b: float
    code: str = ""
    """The code chunker and the grammars that cut source files (``code_chunks.chunker_identity``); "" when
    no grammar is installed, as every state written before syntax-aware chunks."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "embedding_model": self.embedding_model, "dim": self.dim, "tokenizer": self.tokenizer,
            "max_tokens": self.max_tokens, "overlap": self.overlap, "k1": self.k1, "b": self.b,
        }
        if self.code:
            out["code"] = self.code
        return out

    @classmethod
    def of_meta(cls, m: IndexMeta) -> IndexSettings:
        return cls(m.embedding_model, m.dim, m.tokenizer, m.max_tokens, m.overlap, m.k1, m.b)

    def differing(self, other: IndexSettings) -> list[str]:
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


HAS_STAMP, HAS_SHA = 1, 2
"""The flags of a ``FileTable`` row."""


class FileTable(Mapping[str, FileEntry]):
    """The documents of a state as columns, read in bulk from state.bin: no object per document until asked.

    ``nums`` holds five int64 rows (size, mtime_ns, ctime_ns, inode bits,
    n_chunks with -1 for None), ``flags`` one byte per document (``HAS_STAMP``,
    ``HAS_SHA``), ``shas`` 32 bytes per document. A no-op sync compares the
    walk's stamps with ``stamps_of`` and sums ``chunk_total``; anything else
    reads entries one by one (built on demand) or ``as_dict``. Raises
    ``StateError`` for columns that are not what state.bin holds (an unknown
    flag, a count below -1, an empty name); of a name written twice the later row counts, as in a dict.
    """

    __slots__ = ("_dict", "_index", "_stamps", "flags", "names", "nums", "shas")

    def __init__(self, names: list[str], nums: np.ndarray, flags: np.ndarray, shas: bytes) -> None:
        n = len(names)
        if nums.shape != (5, n) or flags.shape != (n,) or len(shas) != 32 * n:
            raise StateError
        if n and (int(nums[4].min()) < -1 or bool(np.any(flags & ~np.uint8(HAS_STAMP | HAS_SHA)))):
            raise StateError
        if "" in names:
            raise StateError
        self.names, self.nums, self.flags, self.shas = names, nums, flags, shas
        self._index: dict[str, int] | None = None
        self._dict: dict[str, FileEntry] | None = None
        self._stamps: list[tuple[int, int, int, int] | None] | None = None

    def __len__(self) -> int:
        return len(self._rows())

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __contains__(self, key: object) -> bool:
        return key in self._rows()

    def __getitem__(self, key: str) -> FileEntry:
        if self._dict is not None:
            return self._dict[key]
        return self._row(self._rows()[key])

    def items(self) -> ItemsView[str, FileEntry]:
        return self.as_dict().items()  # every entry wanted: made at once

    def values(self) -> ValuesView[FileEntry]:
        return self.as_dict().values()

    def _rows(self) -> dict[str, int]:
        if self._index is None:
            self._index = dict(zip(self.names, range(len(self.names))))
        return self._index

    def _row(self, i: int) -> FileEntry:
        f = int(self.flags[i])
        count = int(self.nums[4, i])
        stamp = self.stamps()[i]
        return FileEntry(
            None if stamp is None else Stamp(*stamp),
            self.shas[32 * i : 32 * i + 32].hex() if f & HAS_SHA else None,
            None if count < 0 else count,
        )

    def stamps(self) -> list[tuple[int, int, int, int] | None]:
        """Every document's stamp as a plain tuple (equal to its ``Stamp``), in ``names`` order; made once, in bulk."""
        if self._stamps is None:
            nums = self.nums
            # An inode is unsigned: its int64 bits read as uint64.
            stamps: list[tuple[int, int, int, int] | None] = list(zip(
                nums[0].tolist(), nums[1].tolist(), nums[2].tolist(), nums[3].view(np.uint64).tolist()
            ))
            if not bool(np.all(self.flags & HAS_STAMP)):
                for i in np.flatnonzero((self.flags & HAS_STAMP) == 0).tolist():
                    stamps[i] = None
            self._stamps = stamps
        return self._stamps

    def same_stamps(self, doc_ids: Sequence[str], stamps: Sequence[tuple[int, int, int, int]]) -> bool:
        """Whether the documents are exactly ``doc_ids`` (in any order), with ``stamps`` (as plain tuples)."""
        if len(doc_ids) != len(self.names):
            return False
        mine = self.stamps()
        if doc_ids == self.names:  # (the walk finds no doc_id twice)
            return mine == stamps
        # One dict built and looked up at C speed (a name absent gives None, which equals no stamp).
        by_name = dict(zip(self.names, mine))
        return len(by_name) == len(mine) and list(map(by_name.get, doc_ids)) == stamps

    def chunk_total(self) -> int:
        """The chunks of every document (a count still unknown counts 0)."""
        counts = self.nums[4]
        return int(counts[counts > 0].sum())

    def as_dict(self) -> dict[str, FileEntry]:
        """Every entry, built in bulk once (a sync that reads and compares document by document asks for it).

        The dict is this table's own: a caller that changes it makes a copy first.
        """
        if self._dict is None:
            hexes = self.shas.hex()
            digests = [hexes[j : j + 64] for j in range(0, len(hexes), 64)]
            n = len(self.names)
            if n and bool(np.all(self.flags == HAS_STAMP | HAS_SHA)) and int(self.nums[4].min()) >= 0:
                # The usual state: every entry with a stamp, a SHA-256 and a chunk count, at C speed.
                stamps = map(Stamp._make, self.stamps())  # type: ignore[arg-type]  # (every row has one)
                self._dict = dict(zip(self.names, map(FileEntry, stamps, digests, self.nums[4].tolist())))
            else:
                self._dict = {name: self._row(i) for i, name in enumerate(self.names)}
        return self._dict

    def with_deltas(self, deltas: Sequence[tuple[FileTable, Sequence[str]]]) -> FileTable:
        """This snapshot with delta records (puts, deletes) applied in order, column by column.

        Within a record the deletes come first. ``KeyError`` for a delete of
        a name that is not there (not a file the store wrote).
        """
        base = self._rows()
        gone: set[str] = set()
        """Base names deleted or replaced."""
        overlay: dict[str, tuple[int, int]] = {}
        """Names put by a delta and still there: (which delta, its row)."""
        for k, (puts, deletes) in enumerate(deltas):
            for name in deletes:
                if name in overlay:
                    del overlay[name]  # (its base row, if any, is gone already)
                elif name in base and name not in gone:
                    gone.add(name)
                else:
                    raise KeyError(name)
            for i, name in enumerate(puts.names):
                if name in base:
                    gone.add(name)
                overlay[name] = (k, i)
        keep = np.ones(len(self.names), dtype=bool)
        if gone:
            keep[[base[name] for name in gone]] = False
        names = list(compress(self.names, keep.tolist()))
        nums, flags, shas = [self.nums[:, keep]], [self.flags[keep]], [self._sha_rows()[keep]]
        groups: dict[int, tuple[list[str], list[int]]] = {}
        for name, (k, i) in overlay.items():
            group = groups.setdefault(k, ([], []))
            group[0].append(name)
            group[1].append(i)
        for k, (put_names, rows) in groups.items():
            puts = deltas[k][0]
            names.extend(put_names)
            nums.append(puts.nums[:, rows])
            flags.append(puts.flags[rows])
            shas.append(puts._sha_rows()[rows])
        return FileTable(names, np.concatenate(nums, axis=1), np.concatenate(flags), np.concatenate(shas).tobytes())

    def _sha_rows(self) -> np.ndarray:
        return np.frombuffer(self.shas, dtype=np.uint8).reshape(len(self.names), 32)


def chunk_total(files: Mapping[str, FileEntry]) -> int:
    """The chunks of every document of ``files`` (a count still unknown counts 0)."""
    if isinstance(files, FileTable):
        return files.chunk_total()
    return sum(e.n_chunks or 0 for e in files.values())


@dataclass
class WriterState:
    """Everything the writer remembers of the index it published last."""

    folder: str
    settings: IndexSettings
    walk: dict[str, Any]
    """The walk rules (``WalkRules.describe()``)."""
    generation: str | None
    index_files: IndexStamp | None
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    """A ``FileTable`` as read from state.bin, a dict once a sync has built its own."""

    def head(self) -> dict[str, Any]:
        """Everything but the documents, as JSON."""
        idx: dict[str, Any] | None = None
        if self.index_files is not None:
            idx = {"dir": self.index_files.dir, **{n: list(s) for n, s in zip(FILES, self.index_files.files)}}
        return {"folder": self.folder, "settings": self.settings.to_json(), "walk": self.walk,
                "generation": self.generation, "index_files": idx}

    def to_json(self) -> dict[str, Any]:
        """The state as files.json held it."""
        files: dict[str, Any] = {}
        for doc_id, e in self.files.items():
            entry: dict[str, Any] = {"stat": None if e.stamp is None else list(e.stamp), "sha256": e.sha256}
            if e.n_chunks is not None:
                entry["n_chunks"] = e.n_chunks
            files[doc_id] = entry
        head = self.head()
        return {"version": STATE_VERSION, "folder": self.folder, "root": str(Path(self.folder).parent),
                **{k: head[k] for k in HEAD_KEYS[1:]}, "files": files}


# -- reading: every field checked, anything unexpected discards the whole state -----------------


class StateError(ValueError):
    """A state field that is not what this module writes."""


def _int(v: object) -> int:
    if type(v) is not int:
        raise StateError
    return v


def _str(v: object) -> str:
    if type(v) is not str:
        raise StateError
    return v


def _stamp(v: object) -> Stamp:
    if not isinstance(v, list) or len(v) != 4:
        raise StateError
    return Stamp(*(_int(x) for x in v))


def _settings(v: object) -> IndexSettings:
    keys = {"embedding_model", "dim", "tokenizer", "max_tokens", "overlap", "k1", "b"}
    if not isinstance(v, dict) or set(v) - {"code"} != keys:
        raise StateError
    k1, b = v["k1"], v["b"]
    if type(k1) not in (int, float) or type(b) not in (int, float):
        raise StateError
    return IndexSettings(_str(v["embedding_model"]), _int(v["dim"]), _str(v["tokenizer"]), _int(v["max_tokens"]),
                    _int(v["overlap"]), k1, b, _str(v.get("code", "")))


def _index_files(v: object) -> IndexStamp | None:
    if v is None:
        return None
    if not isinstance(v, dict) or set(v) != {"dir", *FILES}:
        raise StateError
    return IndexStamp(_str(v["dir"]), tuple(_stamp(v[n]) for n in FILES))


def _entry(v: object) -> FileEntry:
    if not isinstance(v, dict):
        raise StateError
    raw_stamp, sha, n = v.get("stat"), v.get("sha256"), v.get("n_chunks")
    return FileEntry(
        None if raw_stamp is None else _stamp(raw_stamp),
        None if sha is None else _str(sha),
        None if n is None else _int(n),
    )


def state_from_json(obj: object, files: Mapping[str, FileEntry] | None = None) -> WriterState | None:
    """The state a JSON object holds (files.json, or a record's head with ``files``); None when malformed."""
    try:
        if not isinstance(obj, dict) or obj.get("version") != STATE_VERSION:
            return None
        raw_files = obj.get("files")
        walk = obj.get("walk")
        generation = obj.get("generation")
        if not isinstance(raw_files, dict) or not isinstance(walk, dict):
            return None
        return WriterState(
            folder=_str(obj.get("folder")),
            settings=_settings(obj.get("settings")),
            walk=walk,
            generation=None if generation is None else _str(generation),
            index_files=_index_files(obj.get("index_files")),
            files=files if files is not None else {_str(d): _entry(e) for d, e in raw_files.items()},
        )
    except (StateError, TypeError, ValueError):
        return None


def state_from_head(head: dict[str, Any], files: Mapping[str, FileEntry]) -> WriterState | None:
    """The state a record's head describes, with ``files``; None when a field is malformed."""
    return state_from_json({**head, "version": STATE_VERSION, "files": {}}, files)
