"""The four files of an index (spec/index-format.md): encode them, and read them back validated.

Reading is all-or-nothing: ``read_index`` either returns a complete,
cross-checked ``IndexData`` or raises ``IndexFormatError`` naming the file and
the problem. It never returns part of an index.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import mmap
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import BinaryIO, TypeVar, cast, overload

import numpy as np

from ragtui.core.errors import IndexFormatError, IndexMissingError, StorageError
from ragtui.core.index.bm25 import BM25Index, bm25_params_problem

__all__ = [
    "FILES",
    "NORM_TOLERANCE",
    "ChunkRecord",
    "IndexData",
    "IndexMeta",
    "bad_vector_rows",
    "encode_docs",
    "encode_meta",
    "encode_vectors",
    "fingerprint",
    "generation_of",
    "read_index",
]

META, DOCS, VECTORS, BM25 = "meta.json", "docs.jsonl", "vectors.f32", "bm25.idx"
FILES = (META, DOCS, VECTORS, BM25)
_DOC_KEYS = ("chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint")
_META_KEYS = ("index_id", "created_at", "n_chunks", "dim", "embedding_model", "tokenizer", "chunker", "bm25")

# What the format allows, checked before anything is allocated for a file (spec/index-format.md, "Bounds").
MAX_META_BYTES = 1 << 20
"""meta.json is a few hundred bytes; a reader refuses one over 1 MiB without reading it."""
MAX_DOCS_LINE_BYTES = 256 << 20
"""One docs.jsonl line holds one chunk of one document: at most 256 MiB, newline excluded."""
MAX_N_CHUNKS = (1 << 32) - 1
"""bm25.idx counts chunks in a u32."""
MAX_DIM = 1 << 16
"""More dimensions than any embedding model has."""
BM25_BYTES_PER_DOCS_BYTE = 32
"""bm25.idx is at most 24 + 4·n_chunks + 32·(size of docs.jsonl) bytes: each term and posting needs text."""
_COUNT_BLOCK = 4 << 20


_FP_HEAD = b',"fingerprint":"'
_FP_HEAD_ARRAY = np.frombuffer(_FP_HEAD, dtype=np.uint8)
_FP_TAIL_ARRAY = np.frombuffer(b'"}', dtype=np.uint8)
_HEX = np.zeros(256, dtype=bool)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = True


_T = TypeVar("_T")


def fingerprint(text: str) -> str:
    """Lowercase hex SHA-256 of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class IndexMeta:
    """meta.json, field for field."""

    index_id: str
    created_at: str
    n_chunks: int
    dim: int
    embedding_model: str
    tokenizer: str
    max_tokens: int
    overlap: int
    k1: float = 1.2
    b: float = 0.75

    def to_json(self) -> dict[str, object]:
        return {
            "index_id": self.index_id,
            "created_at": self.created_at,
            "n_chunks": self.n_chunks,
            "dim": self.dim,
            "embedding_model": self.embedding_model,
            "tokenizer": self.tokenizer,
            "chunker": {"max_tokens": self.max_tokens, "overlap": self.overlap},
            "bm25": {"k1": self.k1, "b": self.b},
        }


@dataclass(frozen=True)
class ChunkRecord:
    """One line of docs.jsonl."""

    chunk_id: str
    doc_id: str
    source: str
    uri: str
    text: str
    n_tokens: int
    fingerprint: str

    @property
    def k(self) -> int:
        """The chunk's number within its document."""
        return int(self.chunk_id.rsplit("#", 1)[1])

    def to_json(self) -> dict[str, object]:
        return {key: getattr(self, key) for key in _DOC_KEYS}


def encode_meta(meta: IndexMeta) -> bytes:
    return (json.dumps(meta.to_json(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def encode_docs(records: Iterable[ChunkRecord]) -> bytes:
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    return "".join(dumps(r.to_json()) + "\n" for r in records).encode("utf-8")


def encode_vectors(vectors: np.ndarray) -> bytes:
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()


@dataclass(frozen=True, eq=False)
class IndexData:
    """A complete, validated index as read from one generation on disk."""

    path: Path
    """The directory as given (it may be a link to the generation)."""
    generation: str
    """Identity of the generation read (the resolved directory and meta.json's inode)."""
    meta: IndexMeta
    records: DocsFile
    vectors: np.ndarray
    """(n_chunks, dim) float32, read-only, memory-mapped when non-empty."""
    bm25: BM25Index
    stats: dict[str, object] = field(default_factory=dict)

    @property
    def n_chunks(self) -> int:
        return self.meta.n_chunks


def generation_of(index_dir: str | os.PathLike[str]) -> str | None:
    """The identity of the generation ``index_dir`` names now (None if there is none); cheap."""
    real = os.path.realpath(index_dir)
    try:
        st = os.stat(os.path.join(real, META))
    except OSError:
        return None
    return f"{real}:{st.st_ino}:{st.st_mtime_ns}"


def read_index(index_dir: str | os.PathLike[str], *, full: bool = True, cache_dir: Path | None = None) -> IndexData:
    """Read and validate the index in ``index_dir``.

    The directory is resolved once and all four files are opened from that
    one generation, so a publish that happens meanwhile cannot mix old and new
    files. Raises ``IndexMissingError`` when there is no index there and
    ``IndexFormatError`` when a file breaks the contract.

    Every check the format asks of readers runs here, except that with
    ``full=False`` docs.jsonl is only counted at open and each line is parsed
    and checked when it is first used (``records.verify()`` checks the rest
    later); that keeps opening a large index fast. ``cache_dir`` lets the
    decoded BM25 arrays be reused (keyed by the file's content).
    """
    path = Path(index_dir)
    for _attempt in range(8):
        real = os.path.realpath(path)
        try:
            dir_fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            if os.path.realpath(path) != real:
                continue  # the link moved to a new generation while we looked
            raise IndexMissingError(
                f"no index at {path}: run `ragtui ingest FOLDER` to build one"
            ) from None
        except NotADirectoryError:
            kind = _kind_at(real)
            if kind is not None:  # something is there, but not a directory (a FIFO, a device, a file)
                raise IndexFormatError(path, f"is {kind}, not an index directory") from None
            raise IndexMissingError(f"{path} is not an index directory") from None
        except OSError as e:
            raise StorageError(f"cannot open {path}: {e.strerror}") from None
        try:
            files = _open_all(dir_fd, real, path)
        except FileNotFoundError as e:
            if os.path.realpath(path) != real:
                continue
            missing = e.filename or "a file"
            present = [n for n in FILES if os.path.exists(os.path.join(real, n))]
            if not present:
                raise IndexMissingError(f"no index at {path}: run `ragtui ingest FOLDER` to build one") from None
            raise IndexFormatError(os.path.join(path, missing), "missing (an index needs all four files)") from None
        finally:
            os.close(dir_fd)
        try:
            return _parse(path, real, files, full, cache_dir)
        finally:
            for f in files.values():
                f.close()
    raise StorageError(f"{path} kept changing while being opened; try again")


def _open_all(dir_fd: int, real: str, path: Path) -> dict[str, BinaryIO]:
    """The four files, opened for reading; each must be a regular file.

    A FIFO would block the open or the read forever, a device (a link to
    /dev/zero) never ends, a directory cannot be read: each is refused with
    ``IndexFormatError`` naming it, before it is opened where that can be
    seen (a stat first) and again after (``fstat``: it may have been swapped).
    The open never blocks (``O_NONBLOCK``).
    """
    files: dict[str, BinaryIO] = {}
    try:
        for name in FILES:
            try:
                kind = _not_regular(os.stat(name, dir_fd=dir_fd).st_mode)
                if kind is not None:
                    raise IndexFormatError(path / name, f"is {kind}, not a regular file (never opened)")
                fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError as e:
                e.filename = name
                raise
            except OSError as e:
                raise StorageError(f"cannot read {os.path.join(real, name)}: {e.strerror}") from None
            f: BinaryIO = os.fdopen(fd, "rb")
            files[name] = f
            kind = _not_regular(os.fstat(fd).st_mode)
            if kind is not None:
                raise IndexFormatError(path / name, f"is {kind}, not a regular file (never read)")
    except BaseException:
        for f in files.values():
            f.close()
        raise
    return files


def _not_regular(mode: int) -> str | None:
    """None for a regular file, else what it is ("a FIFO", "a directory", ...)."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def _kind_at(path: str) -> str | None:
    """What ``path`` is when it exists and is not a directory ("a FIFO", "a regular file", ...), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return None
    return _not_regular(mode) or "a regular file"


def _read_bounded(f: BinaryIO, where: str, limit: int) -> bytes:
    """The whole of an open regular file, refused with ``IndexFormatError`` if it is over ``limit`` bytes."""
    size = os.fstat(f.fileno()).st_size
    if size > limit:
        raise IndexFormatError(where, f"is {size:,} bytes; it may be at most {limit:,}")
    try:
        data = f.read(limit + 1)  # the file may grow after the fstat
    except OSError as e:
        raise StorageError(f"cannot read {where}: {e.strerror}") from None
    if len(data) > limit:
        raise IndexFormatError(where, f"is over {limit:,} bytes; it may be at most {limit:,}")
    return data


def _parse(path: Path, real: str, files: dict[str, BinaryIO], full: bool, cache_dir: Path | None) -> IndexData:
    def where(name: str) -> str:
        return str(path / name)

    meta = _parse_meta(_read_bounded(files[META], where(META), MAX_META_BYTES), where(META), path.name)
    # Sizes first (fstat only): a file larger than the format allows is refused before it is read.
    _check_vectors_size(files[VECTORS], where(VECTORS), meta)
    docs_size = _check_docs_size(files[DOCS], where(DOCS), meta)
    _check_bm25_size(files[BM25], where(BM25), meta, docs_size)
    bm25_raw = _map(files[BM25], where(BM25))
    _check_bm25_header(bm25_raw, where(BM25), meta)
    records = DocsFile(_map(files[DOCS], where(DOCS)), where(DOCS), meta)
    if full:
        records.verify()
    vectors = _map_vectors(files[VECTORS], where(VECTORS), meta)
    bm25 = BM25Index.load(bm25_raw, meta.k1, meta.b, where(BM25), cache_dir, meta.index_id)
    if bm25.n_docs != meta.n_chunks:
        raise IndexFormatError(where(BM25), f"n_docs is {bm25.n_docs}, but meta.json says n_chunks {meta.n_chunks}")
    st = os.fstat(files[META].fileno())
    return IndexData(
        path=path,
        generation=f"{real}:{st.st_ino}:{st.st_mtime_ns}",
        meta=meta,
        records=records,
        vectors=vectors,
        bm25=bm25,
    )


def _parse_meta(raw: bytes, where: str, dir_name: str) -> IndexMeta:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        # ValueError also covers integers too long to convert; RecursionError, absurd nesting.
        raise IndexFormatError(where, f"not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(obj, dict):
        raise IndexFormatError(where, "is not a JSON object")
    missing = [k for k in _META_KEYS if k not in obj]
    if missing:
        raise IndexFormatError(where, f"missing field(s): {', '.join(missing)}")

    def need(value: object, kind: type[_T], name: str) -> _T:
        if kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise IndexFormatError(where, f"{name} has the wrong type ({value!r})")
        return cast(_T, value)  # checked just above (an int passes for a float)

    chunker = need(obj["chunker"], dict, "chunker")
    bm25 = need(obj["bm25"], dict, "bm25")
    meta = IndexMeta(
        index_id=need(obj["index_id"], str, "index_id"),
        created_at=need(obj["created_at"], str, "created_at"),
        n_chunks=need(obj["n_chunks"], int, "n_chunks"),
        dim=need(obj["dim"], int, "dim"),
        embedding_model=need(obj["embedding_model"], str, "embedding_model"),
        tokenizer=need(obj["tokenizer"], str, "tokenizer"),
        max_tokens=need(chunker.get("max_tokens"), int, "chunker.max_tokens"),
        overlap=need(chunker.get("overlap"), int, "chunker.overlap"),
        k1=float(need(bm25.get("k1"), float, "bm25.k1")),
        b=float(need(bm25.get("b"), float, "bm25.b")),
    )
    if meta.n_chunks < 0 or meta.dim < 1 or meta.max_tokens < 1 or meta.overlap < 0:
        raise IndexFormatError(where, "n_chunks, dim, max_tokens or overlap is out of range")
    if meta.n_chunks > MAX_N_CHUNKS or meta.dim > MAX_DIM:
        raise IndexFormatError(where, f"n_chunks {meta.n_chunks} or dim {meta.dim} is beyond what the format allows "
                                      f"(n_chunks < 2^32, dim ≤ {MAX_DIM})")
    problem = bm25_params_problem(meta.k1, meta.b)
    if problem:
        raise IndexFormatError(where, problem)
    if meta.index_id != dir_name:
        raise IndexFormatError(where, f"index_id {meta.index_id!r} is not the directory name {dir_name!r}")
    return meta


def _map(f: BinaryIO, where: str) -> bytes | mmap.mmap:
    """The file's bytes as a read-only memory map (or b"" when it is empty)."""
    size = os.fstat(f.fileno()).st_size
    if size == 0:
        return b""
    try:
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    except OSError as e:
        raise StorageError(f"cannot map {where}: {e.strerror}") from None


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
        self._ends = ends
        self._starts = np.concatenate(([0], ends[:-1] + 1)) if ends.size else ends
        self._cache: dict[int, ChunkRecord] = {}
        self._verified = False

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
            line = self._raw[int(self._starts[i]) : int(self._ends[i])]
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise IndexFormatError(
                    self._where, f"line {i + 1} is not valid JSON ({type(e).__name__}: {str(e)[:200]})"
                ) from None
            rec = self._cache[i] = self._record(obj, i + 1)
        return rec

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
        """Parse every line and check the order rules; raise ``IndexFormatError`` at the first breach."""
        if self._verified or not len(self):
            self._verified = True
            return
        where = self._where
        raw = bytes(self._raw)
        try:
            objs = json.loads(b"[" + raw[:-1].replace(b"\n", b",") + b"]")
            if len(objs) != len(self):
                raise ValueError("line count")
        except (ValueError, RecursionError):
            for i in range(len(self)):
                self._cache.pop(i, None)
                self[i]  # raises with the line number
            raise IndexFormatError(where, "a line holds more than one JSON value") from None
        prev_doc = None
        prev_bytes = b""
        next_k = 0
        cache = self._cache
        for i, obj in enumerate(objs):
            rec = cache.get(i) or self._record(obj, i + 1)
            cache[i] = rec
            doc_id = rec.doc_id
            if doc_id != prev_doc:
                doc_bytes = doc_id.encode("utf-8")
                if prev_doc is not None and doc_bytes <= prev_bytes:
                    raise IndexFormatError(
                        where, f"line {i + 1}: documents are out of order or not contiguous ({doc_id!r} after {prev_doc!r})"
                    )
                prev_doc, prev_bytes, next_k = doc_id, doc_bytes, 0
            if rec.k != next_k:
                raise IndexFormatError(where, f"line {i + 1}: chunk_id {rec.chunk_id!r} should be {doc_id + '#' + str(next_k)!r}")
            next_k += 1
        self._verified = True

    def byte_range(self, lo: int, hi: int) -> tuple[int, int]:
        """Where lines ``lo`` to ``hi - 1`` (newlines included) lie in the file: [start, end)."""
        if lo >= hi:
            return 0, 0
        return int(self._starts[lo]), int(self._ends[hi - 1]) + 1

    def raw_lines(self, lo: int, hi: int) -> memoryview:
        """The bytes of lines ``lo`` to ``hi - 1``, newlines included, without copying or parsing them."""
        start, end = self.byte_range(lo, hi)
        return memoryview(self._raw)[start:end] if end > start else memoryview(b"")

    def line_ends(self, lo: int, hi: int) -> np.ndarray:
        """The newline offsets of lines ``lo`` to ``hi - 1``, counted from the start of line ``lo``."""
        if lo >= hi:
            return np.zeros(0, dtype=np.int64)
        return self._ends[lo:hi] - int(self._starts[lo])

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
        if int((self._ends - self._starts).min()) < tail:
            return None
        raw = np.frombuffer(self._raw, dtype=np.uint8)
        block = raw[self._ends[:, None] + np.arange(-tail, 0)]
        if not (block[:, : len(_FP_HEAD)] == _FP_HEAD_ARRAY).all() or not (block[:, -2:] == _FP_TAIL_ARRAY).all():
            return None
        hexes = np.ascontiguousarray(block[:, len(_FP_HEAD) : -2])
        if not _HEX[hexes].all():
            return None
        return hexes.view("S64").ravel()

    def find(self, chunk_id: str) -> int:
        """The line (chunk number) holding ``chunk_id``, or -1. Bisects the ordered file."""
        head, sep, k = chunk_id.rpartition("#")
        if not sep or not k.isdigit() or not k.isascii() or len(k) > 19:
            return -1
        key = (head.encode("utf-8"), int(k))
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            rec = self[mid]
            here = (rec.doc_id.encode("utf-8"), rec.k)
            if here < key:
                lo = mid + 1
            elif here > key:
                hi = mid
            else:
                return mid if rec.chunk_id == chunk_id else -1
        return -1


def _line_ends(raw: bytes | mmap.mmap, n_chunks: int, where: str) -> np.ndarray:
    """The offset of every newline of docs.jsonl, found a block at a time.

    Stops at the first line longer than ``MAX_DOCS_LINE_BYTES``, and keeps
    the offsets of at most ``n_chunks`` + 1 lines: the memory used is bounded
    by what meta.json promises, whatever the file holds.
    """
    size = len(raw)
    if not size:
        return np.zeros(0, dtype=np.int64)
    whole = np.frombuffer(raw, dtype=np.uint8)
    parts: list[np.ndarray] = []
    count, line_start = 0, 0
    for lo in range(0, size, _COUNT_BLOCK):
        ends = np.flatnonzero(whole[lo : lo + _COUNT_BLOCK] == 10)
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


def _check_vectors_size(f: BinaryIO, where: str, meta: IndexMeta) -> None:
    size = os.fstat(f.fileno()).st_size
    expected = meta.n_chunks * meta.dim * 4
    if size != expected:
        raise IndexFormatError(
            where, f"is {size} bytes, but n_chunks {meta.n_chunks} x dim {meta.dim} x 4 needs {expected}"
        )


def _check_docs_size(f: BinaryIO, where: str, meta: IndexMeta) -> int:
    size = os.fstat(f.fileno()).st_size
    if size > meta.n_chunks * (MAX_DOCS_LINE_BYTES + 1):
        raise IndexFormatError(where, f"is {size:,} bytes, more than {meta.n_chunks} lines (n_chunks) of at most "
                                      f"{MAX_DOCS_LINE_BYTES:,} bytes can hold")
    return size


def _check_bm25_size(f: BinaryIO, where: str, meta: IndexMeta, docs_size: int) -> None:
    """Refuse a bm25.idx larger than any index of this meta.json and docs.jsonl can need.

    Every term and every posting comes from the chunks' text, which takes at
    least one byte of docs.jsonl each; checked before the file is mapped,
    hashed or decoded, so none of that costs more than the text justifies.
    """
    size = os.fstat(f.fileno()).st_size
    limit = 24 + 4 * meta.n_chunks + BM25_BYTES_PER_DOCS_BYTE * docs_size
    if size > limit:
        raise IndexFormatError(
            where, f"is {size:,} bytes, more than {meta.n_chunks} chunks and {docs_size:,} bytes of docs.jsonl "
                   f"can need ({limit:,})"
        )


def _check_bm25_header(raw: bytes | mmap.mmap, where: str, meta: IndexMeta) -> None:
    """n_docs must be n_chunks: checked before anything is allocated for the postings."""
    if len(raw) >= 12 and bytes(raw[:4]) == b"TLBM":
        n_docs = int.from_bytes(raw[8:12], "little")
        if n_docs != meta.n_chunks:
            raise IndexFormatError(where, f"n_docs is {n_docs}, but meta.json says n_chunks {meta.n_chunks}")


def _map_vectors(f: BinaryIO, where: str, meta: IndexMeta) -> np.ndarray:
    size = os.fstat(f.fileno()).st_size
    expected = meta.n_chunks * meta.dim * 4
    if size != expected:
        raise IndexFormatError(
            where, f"is {size} bytes, but n_chunks {meta.n_chunks} x dim {meta.dim} x 4 needs {expected}"
        )
    if size == 0:
        return np.zeros((0, meta.dim), dtype=np.float32)
    try:
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    except OSError as e:
        if e.errno == errno.ENOMEM:
            raise StorageError(f"cannot map {where}: out of memory") from None
        raise StorageError(f"cannot map {where}: {e.strerror}") from None
    vectors = np.frombuffer(mm, dtype="<f4").reshape(meta.n_chunks, meta.dim)
    bad = bad_vector_rows(vectors)
    if bad.size:
        raise IndexFormatError(where, vector_row_problem(vectors, int(bad[0])))
    return vectors


NORM_TOLERANCE = 1e-3
"""A stored row is unit length when its L2 norm lies within this of 1 (spec/index-format.md)."""
_SQ_LO, _SQ_HI = (1.0 - NORM_TOLERANCE) ** 2, (1.0 + NORM_TOLERANCE) ** 2


def bad_vector_rows(vectors: np.ndarray) -> np.ndarray:
    """The numbers of the rows that are not finite unit vectors (int64, ascending; empty when all are).

    One pass over the rows, in blocks so a large memory map is never copied
    whole: each row's squared norm in float32, which is NaN or infinite when a
    value is, and must lie within ``NORM_TOLERANCE`` of 1 (all-zero rows fail).
    """
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    dim = vectors.shape[1]
    block = max(1, (1 << 24) // (4 * dim))
    found = []
    with np.errstate(over="ignore", invalid="ignore"):
        for lo in range(0, n, block):
            part = vectors[lo : lo + block]
            sq = np.einsum("ij,ij->i", part, part)
            ok = (sq >= _SQ_LO) & (sq <= _SQ_HI)
            if not ok.all():
                found.append(lo + np.flatnonzero(~ok))
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, dtype=np.int64)


def vector_row_problem(vectors: np.ndarray, row: int) -> str:
    """What is wrong with row ``row`` (one of ``bad_vector_rows``), in words."""
    with np.errstate(invalid="ignore"):  # a signalling NaN raises the flag when widened
        values = np.asarray(vectors[row], dtype=np.float64)
    if not np.isfinite(values).all():
        return f"row {row} holds a non-finite value"
    if not values.any():
        return f"row {row} is all zeros (rows are unit vectors)"
    scale = float(np.abs(values).max())
    norm = scale * float(np.linalg.norm(values / scale))
    return f"row {row} has norm {norm:.6g}, not 1 within {NORM_TOLERANCE:g} (rows are unit vectors)"
