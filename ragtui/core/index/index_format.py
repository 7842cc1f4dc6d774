"""The four files of an index (spec/index-format.md): read them back validated.

Reading is all-or-nothing: ``read_index`` either returns a complete,
cross-checked ``IndexData`` or raises ``IndexFormatError`` naming the file and
the problem. It never returns part of an index.

What the files hold and how they are encoded is ``records``; docs.jsonl's
lines are read by ``docs_file.DocsFile``.
"""

from __future__ import annotations

import errno
import json
import math
import mmap
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar, cast

import numpy as np

from ragtui.core.errors import IndexFormatError, IndexMissingError, StorageError
from ragtui.core.files import kind_of
from ragtui.core.index import verified
from ragtui.core.index.arraycache import drop_pages
from ragtui.core.index.bm25 import BM25Index, bm25_params_problem
from ragtui.core.index.docs_file import MAX_DOCS_LINE_BYTES, DocsFile, ends_fit
from ragtui.core.index.records import ChunkRecord, IndexMeta

__all__ = [
    "FILES",
    "NORM_TOLERANCE",
    "ChunkRecords",
    "IndexData",
    "IndexView",
    "bad_vector_rows",
    "generation_of",
    "read_index",
]

META, DOCS, VECTORS, BM25 = "meta.json", "docs.jsonl", "vectors.f32", "bm25.idx"
FILES = (META, DOCS, VECTORS, BM25)
_META_KEYS = ("index_id", "created_at", "n_chunks", "dim", "embedding_model", "tokenizer", "chunker", "bm25")

# What the format allows, checked before anything is allocated for a file (spec/index-format.md, "Bounds");
# the bound of a docs.jsonl line is docs_file.MAX_DOCS_LINE_BYTES.
MAX_META_BYTES = 1 << 20
"""meta.json is a few hundred bytes; a reader refuses one over 1 MiB without reading it."""
MAX_N_CHUNKS = (1 << 32) - 1
"""bm25.idx counts chunks in a u32."""
MAX_DIM = 1 << 16
"""More dimensions than any embedding model has."""
BM25_BYTES_PER_DOCS_BYTE = 32
"""bm25.idx is at most 24 + 4·n_chunks + 32·(size of docs.jsonl) bytes: each term and posting needs text."""


_T = TypeVar("_T")


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
    """How it was read: ``verified_entry`` is True when its writer's record (``verified``) stood in for checks;
    ``generation_key`` is then that record's key (it names these very files: derived caches may key by it).
    ``bm25_key`` is bm25.idx's ``BM25Index.cache_key`` (None without a cache) and ``doclex_key`` the key of
    the document-level BM25 entry its writer stored (None when unknown): derived structures are cached
    under keys made from these (``docaware.DocLexical.load``), never from a hash of the arrays again."""

    @property
    def n_chunks(self) -> int:
        return self.meta.n_chunks


class ChunkRecords(Protocol):
    """The chunks of a generation by row, in docs.jsonl's order (``DocsFile``, ``layered.LayeredRecords``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, row: int, /) -> ChunkRecord: ...

    def __iter__(self) -> Iterator[ChunkRecord]: ...

    def find(self, chunk_id: str) -> int: ...


class IndexView(Protocol):
    """What readers of a generation's chunks use: an ``IndexData``, or the next generation read through the
    overlay of the current one (``search.overlaid.OverlaidData``), whose rows are the next generation's."""

    @property
    def path(self) -> Path: ...

    @property
    def generation(self) -> str: ...

    @property
    def meta(self) -> IndexMeta: ...

    @property
    def records(self) -> ChunkRecords: ...

    @property
    def bm25(self) -> BM25Index: ...

    @property
    def stats(self) -> dict[str, object]: ...

    @property
    def n_chunks(self) -> int: ...


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
                kind = kind_of(os.stat(name, dir_fd=dir_fd).st_mode)
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
            kind = kind_of(os.fstat(fd).st_mode)
            if kind is not None:
                raise IndexFormatError(path / name, f"is {kind}, not a regular file (never read)")
    except BaseException:
        for f in files.values():
            f.close()
        raise
    return files


def _kind_at(path: str) -> str | None:
    """What ``path`` is when it exists and is not a directory ("a FIFO", "a regular file", ...), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return None
    return kind_of(mode) or "a regular file"


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
    # What the writer of these very files checked already (verified.py); never with full=True.
    stats = [os.fstat(files[name].fileno()) for name in FILES]
    known = None if full else verified.lookup(cache_dir, meta.index_id, [verified.file_stamp(st) for st in stats],
                                              meta.n_chunks)
    bm25_raw = _map(files[BM25], where(BM25))
    _check_bm25_header(bm25_raw, where(BM25), meta)
    docs_raw = _map(files[DOCS], where(DOCS))
    ends = known.ends if known is not None and known.ends is not None and ends_fit(
        docs_raw, known.ends, meta.n_chunks, files[DOCS].fileno()) else None
    records = DocsFile(docs_raw, where(DOCS), meta, ends=ends)
    if full:
        records.verify()
    vectors = _map_vectors(files[VECTORS], where(VECTORS), meta, check=not (known is not None and known.unit_rows))
    bm25, bm25_key = BM25Index.load_keyed(bm25_raw, meta.k1, meta.b, where(BM25), cache_dir, meta.index_id,
                                          key=known.bm25_key if known is not None else None)
    if bm25.n_docs != meta.n_chunks:
        raise IndexFormatError(where(BM25), f"n_docs is {bm25.n_docs}, but meta.json says n_chunks {meta.n_chunks}")
    st = stats[0]
    return IndexData(
        path=path,
        generation=f"{real}:{st.st_ino}:{st.st_mtime_ns}",
        meta=meta,
        records=records,
        vectors=vectors,
        bm25=bm25,
        stats={"verified_entry": known is not None, "bm25_key": bm25_key,
               "doclex_key": known.doclex_key if known is not None else None,
               "generation_key": verified.entry_key([verified.file_stamp(st) for st in stats]) if known else None},
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


def _map_vectors(f: BinaryIO, where: str, meta: IndexMeta, check: bool = True) -> np.ndarray:
    """vectors.f32 mapped; with ``check`` every row must be a finite unit vector (``bad_vector_rows``)."""
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
    if check:
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
    whole nor kept resident (each block's pages are let go once read): each row's squared norm in float32, which is NaN or infinite when a
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
            drop_pages(vectors, (lo + part.shape[0]) * dim, lo * dim)  # a mapped file: read once here
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
