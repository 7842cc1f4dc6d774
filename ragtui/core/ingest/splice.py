"""The incremental publish: the next generation from the previous one plus the changed documents.

Unchanged documents keep their docs.jsonl lines and vector rows byte for
byte (the kernel copies them from the previous generation's files, see
``FileRange``), and their BM25 postings (renumbered, not re-analyzed); only
the changed documents are chunked, embedded and analyzed. The bytes equal
what a full rebuild writes (tests compare them).
"""

from __future__ import annotations

import dataclasses
import errno
import mmap
import os
import shutil
import stat
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import IndexFormatError, IndexMissingError
from ragtui.core.index import verified
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import StreamedEntry, drop_pages, load_entry
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.bm25 import _sound as bm25_entry_sound
from ragtui.core.index.bm25_splice import (
    encode_spliced,
    splice_postings,
)
from ragtui.core.index.docs_file import DocsFile
from ragtui.core.index.index_format import BM25, DOCS, FILES, META, VECTORS, IndexData, generation_of, read_index
from ragtui.core.index.records import IndexMeta, encode_docs, encode_meta
from ragtui.core.ingest.assemble import Assembly, Previous, fingerprint_keys
from ragtui.core.ingest.derive import Derivation
from ragtui.core.ingest.doc_rows import DocRows
from ragtui.core.ingest.publish import FileRange, NewGeneration, file_size
from ragtui.core.ingest.report import Progress, SyncReport
from ragtui.core.ingest.state import FileEntry, FileTable, IndexStamp, Stamp, file_stamp, index_stamp, stat_stamp

__all__ = [
    "Generation", "Piece", "Spliced", "following", "new_docs_lines", "open_generation", "publish_splice", "rows_of",
    "warm",
]

Piece = bytes | memoryview | FileRange
"""A stretch of one file's content, as ``publish`` writes it."""


@dataclass
class Generation:
    """A published generation, opened to be the starting point of the next splice.

    A long-running writer keeps one between saves, so what it holds is kept
    small: the four files and the decoded BM25 arrays are read-only maps of
    files the writer wrote (the generation's own, and the readers' cache entry
    of its bm25.idx), each checked by its stamp; in anonymous memory stay the
    fingerprints (64 bytes a chunk, and their 8-byte keys) and the documents'
    rows. Each posting's gap and varint length are worked out from the mapped
    postings when a splice needs them, not kept.
    """

    data: IndexData
    rows: DocRows
    """Each document's rows [lo, hi) (documents with chunks only), in index order."""
    fingerprints: npt.NDArray[np.bytes_]
    """S64: each row's fingerprint as ASCII."""
    bm25_raw: bytes | memoryview | mmap.mmap
    """The bm25.idx whose postings' bytes are reused: a read-only map of the file stamped (the bytes written, when
    the file cannot be mapped again)."""
    stamp: IndexStamp
    """Where its files are, and the size, mtime, ctime and inode each had when it was opened."""
    cached: tuple[tuple[str, Stamp], ...] = ()
    """The readers' cache files whose maps ``data.bm25`` holds, each with its stamp when it was mapped."""
    keys: npt.NDArray[np.uint64] | None = None
    """``fingerprint_keys(fingerprints)`` (8 bytes a chunk), once worked out: carried to the next generation."""

    def previous(self) -> Previous:
        records = self.data.records
        prev = Previous(self.rows, self.fingerprints, self.data.vectors, lambda lo, hi: records[lo:hi], keys=self.keys)
        self.keys = prev.fingerprint_keys()
        return prev

    def intact(self) -> bool:
        """Whether every cache file mapped still has the stamp it had then (none changed in place, cut or replaced)."""
        return all(file_stamp(path) == stamp for path, stamp in self.cached)

    def still_published(self, target: Path) -> bool:
        """Whether ``target`` still names this generation, every file untouched since it was stamped."""
        return index_stamp(target) == self.stamp and self.intact()

    def drop_changed(self) -> None:
        """Remove the cache entry of any mapped file that changed since: what it holds is not known any more (the
        next open decodes bm25.idx again and stores the entry anew). Best effort."""
        for path, stamp in self.cached:
            if file_stamp(path) != stamp:
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def rows_of(files: Mapping[str, FileEntry]) -> DocRows | None:
    """Each document's rows from the state's chunk counts (None if a count is missing or negative)."""
    if isinstance(files, FileTable):
        files = files.as_dict()  # one lookup per document follows: the entries made at once
    ids: list[str] = []
    counts: list[int] = []
    for doc_id in sorted(files):
        n = files[doc_id].n_chunks
        if n is None or n < 0:
            return None
        if n:
            ids.append(doc_id)
            counts.append(n)
    return DocRows.of_counts(ids, counts)


def open_generation(target: Path, stamp: IndexStamp | None, generation: str | None,
                    files: Mapping[str, FileEntry], cache_dir: Path) -> Generation | None:
    """The published generation, when it is exactly the one the writer's state describes.

    That is: ``stamp`` is the generation's stamp now (every one of its four
    files is the one written then: size, mtime, ctime, inode), it is
    ``generation``, and the state's chunk counts add up. Anything else (an
    index written by another tool, a file touched since) returns None, and
    the caller reads and re-checks the whole previous index instead.
    """
    if stamp is None or stamp != index_stamp(target):
        return None
    try:
        old = read_index(target, full=False, cache_dir=cache_dir)
    except (IndexFormatError, IndexMissingError):
        return None
    if old.generation != generation:
        return None
    fps = old.records.written_fingerprints()
    rows = rows_of(files)
    if fps is None or rows is None:
        return None
    if rows.n_rows != old.n_chunks:
        return None
    mapped = _map_published(stamp, (BM25,))
    if mapped is None:
        return None
    bm25_raw = mapped[BM25]
    key = old.stats.get("bm25_key")
    found = _cached_bm25(cache_dir, old.meta, key, bm25_raw) if isinstance(key, str) else None
    if found is not None:
        old = dataclasses.replace(old, bm25=found[0])
    return Generation(old, rows, fps, bm25_raw, stamp, cached=found[1] if found is not None else ())


def _cached_bm25(cache_dir: Path, meta: IndexMeta, key: str,
                 raw: bytes | mmap.mmap) -> tuple[BM25Index, tuple[tuple[str, Stamp], ...]] | None:
    """The readers' cache entry ``key`` of bm25.idx ``raw``, mapped, with each file's stamp; None unless it is
    sound and holds ``raw``'s header and chunk lengths (``BM25Index.describes``)."""
    stats: dict[str, os.stat_result] = {}
    arrays = load_entry(cache_dir, "bm25", meta.index_id, key, stats)
    if arrays is None or not bm25_entry_sound(arrays, meta.k1, meta.b):
        return None
    index = BM25Index.from_arrays(arrays)
    if not index.describes(raw):
        return None
    return index, tuple((path, stat_stamp(st)) for path, st in sorted(stats.items()))


def warm(gen: Generation) -> None:
    """Ready ``gen`` for the first splice without publishing: its fingerprints' keys, and the pages a splice reads.

    The mapped BM25 arrays and bm25.idx are read in, a byte of every page, and
    the pages let go of again: they stay in the kernel's page cache, where the
    splice finds them, without being resident in this process between saves
    (the splice too lets each stretch go once read). No splice runs: the
    temporaries of one (tens of bytes a posting) would make the start of the
    agent its peak.
    """
    gen.previous()  # works out the fingerprints' keys, 8 bytes a chunk, kept for the next splice
    old = gen.data.bm25
    for a in (old.doc_len, old.term_blob, old.term_starts, old.offsets, old.post_doc, old.post_tf, gen.bm25_raw):
        _read_in(a)


def _read_in(data: np.ndarray | bytes | memoryview | mmap.mmap) -> None:
    """Read one byte of every page of ``data`` (an array or a map), a block at a time, each block's pages let go
    once read when it is a map: they are then in the page cache, not resident here."""
    view = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    for lo in range(0, view.size, _READ_IN_BLOCK):
        hi = min(lo + _READ_IN_BLOCK, view.size)
        int(view[lo:hi:mmap.PAGESIZE].sum())
        drop_pages(view, hi, lo)


_READ_IN_BLOCK = 1 << 24
"""Bytes ``_read_in`` reads in before it lets their pages go."""


@dataclass
class Spliced:
    """What ``publish_splice`` published, for the next splice to start from."""

    meta: IndexMeta
    pieces: dict[str, list[Piece]]
    bm25: BM25Index
    bm25_raw: bytes | memoryview
    ends: npt.NDArray[np.int64]
    """The offset of each newline of the docs.jsonl published."""
    derived: Derivation
    """Its derived entries, keyed; built once the caller is done with what readers wait for (``after_swap``)."""


def new_docs_lines(asm: Assembly) -> list[bytes]:
    """The docs.jsonl lines of each "new" segment of ``asm``, in order: the bytes the next generation holds there."""
    return [encode_docs(asm.records[seg.lo : seg.hi]) for seg in asm.segments if seg.source == "new"]


def publish_splice(artifacts: Path, index_id: str, gen: Generation, asm: Assembly, meta: IndexMeta,
                   report: SyncReport, tick: Progress, cache_dir: Path, *, derive_all: bool = False,
                   new_docs: Sequence[bytes] | None = None) -> Spliced:
    """Publish ``asm`` (laid out against ``gen``) as the next generation; the caller holds the lock.

    ``new_docs``: ``new_docs_lines(asm)``, when the caller encoded them already (for the overlay); they are
    written as they are.

    meta.json, docs.jsonl and vectors.f32 do not depend on the BM25 work: a
    thread copies and flushes them (``NewGeneration.write_behind``) while this one
    splices the postings and encodes bm25.idx; a third thread writes the
    decoded arrays to the cache for readers during the encoding, working out
    the weights a block at a time as it goes, and the entry is named by the new
    file's SHA-256 before the link is renamed, then mapped. The
    other derived entries are keyed here and built by the caller
    (``Spliced.derived``).
    """
    old = gen.data
    t0 = time.perf_counter()
    new_terms = [analyze(r.text) for r in asm.records]
    report.seconds["analyze"] = time.perf_counter() - t0

    sources = _open_sources(gen.stamp)
    try:
        t0 = time.perf_counter()
        pieces = _pieces(gen, asm, sources, new_docs)
        report.seconds["pieces"] = time.perf_counter() - t0
        tick("write", 0, 1)
        files: dict[str, Sequence[Piece]] = {META: [encode_meta(meta)], **pieces}
        with NewGeneration(artifacts, index_id) as new:
            new.write_behind(files)
            t0 = time.perf_counter()
            postings = splice_postings(old.bm25, asm.row_map, asm.n_rows, asm.new_rows(), new_terms)
            report.seconds["splice"] = time.perf_counter() - t0
            with ThreadPoolExecutor(1, thread_name_prefix="bm25 cache") as pool:
                # The readers' arrays go to the cache while bm25.idx is encoded, their weights worked out a block
                # at a time as they are written: neither the weights nor the entry are ever held whole.
                staging = pool.submit(_stream_decoded, postings, meta.k1, meta.b, cache_dir, index_id)
                t0 = time.perf_counter()
                bm25_bytes = encode_spliced(gen.bm25_raw, old.bm25, postings)
                report.seconds["encode"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                entry = staging.result()
                report.seconds["weights"] = time.perf_counter() - t0  # what the arrays took past the encode
            t0 = time.perf_counter()
            # Before the link: readers that reload find the decoded arrays instead of decoding the file,
            # and what this writer checked of the files instead of checking it again (core.index.verified).
            bm25_key = BM25Index.cache_key(bm25_bytes, meta.k1, meta.b)
            decoded = BM25Index.placed(entry, bm25_key, postings, meta.k1, meta.b, cache_dir, index_id)
            ends = _docs_ends(gen, asm, pieces[DOCS])
            report.seconds["cache"] = time.perf_counter() - t0
            derived = Derivation.plan(cache_dir, index_id, decoded, bm25_key, asm.rows, everything=derive_all)
            report.seconds["cache"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            files[BM25] = [bm25_bytes]
            new.write({BM25: files[BM25]})
            new.commit(tidy=False, before_swap=lambda d: derived.before_swap(d, ends=ends, bm25_key=bm25_key))
    finally:
        for fd in (sources or {}).values():
            os.close(fd)
    report.published = report.incremental = True
    report.bytes_written = sum(file_size(v) for v in files.values())
    # What the publish adds once the BM25 work is done: the wait for the thread, bm25.idx, the renames.
    report.seconds["write"] = time.perf_counter() - t0
    tick("write", 1, 1)
    return Spliced(meta, pieces, decoded, bm25_bytes, ends, derived)


def _stream_decoded(postings: Postings, k1: float, b: float, cache_dir: Path, index_id: str) -> StreamedEntry:
    """The readers' arrays of ``postings`` written a block at a time to an entry not yet named (nothing is
    computed when the cache cannot be written: ``BM25Index.placed`` then makes them in memory)."""
    entry = StreamedEntry(cache_dir, "bm25", index_id)
    if entry.ok:
        try:
            BM25Index.stream_arrays(postings, k1, b, entry)
        except BaseException:
            entry.discard()
            raise
    return entry


def _docs_ends(gen: Generation, asm: Assembly, docs: Sequence[Piece]) -> npt.NDArray[np.int64]:
    """The newline offsets of the docs.jsonl that ``docs`` (one piece per segment of ``asm``) make up."""
    old = gen.data
    ends: list[npt.NDArray[np.int64]] = []
    pos = 0
    for seg, piece in zip(asm.segments, docs):
        if seg.source == "old":
            ends.append(old.records.line_ends(seg.lo, seg.hi) + pos)
        else:
            assert not isinstance(piece, FileRange)
            ends.append(np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10) + pos)
        pos += file_size([piece])
    return np.concatenate(ends).astype(np.int64, copy=False) if ends else np.zeros(0, dtype=np.int64)


def _pieces(gen: Generation, asm: Assembly, sources: dict[str, int] | None,
            new_docs: Sequence[bytes] | None = None) -> dict[str, list[Piece]]:
    """docs.jsonl and vectors.f32 of the next generation as pieces, segment by segment (the new segments' lines
    from ``new_docs`` when given, else encoded here)."""
    old = gen.data
    encoded = iter(new_docs if new_docs is not None else new_docs_lines(asm))
    docs: list[Piece] = []
    vectors: list[Piece] = []
    row_bytes = 4 * old.meta.dim
    for seg in asm.segments:
        if seg.source == "old":
            # Unchanged stretches of the old files: the kernel copies them (or, when the
            # files cannot be opened again, they are written from the old maps).
            if sources is not None:
                start, end = old.records.byte_range(seg.lo, seg.hi)
                docs.append(FileRange(sources[DOCS], start, end - start))
                vectors.append(FileRange(sources[VECTORS], seg.lo * row_bytes, seg.n * row_bytes))
            else:
                docs.append(old.records.raw_lines(seg.lo, seg.hi))
                vectors.append(_view(old.vectors[seg.lo : seg.hi]))
        else:
            docs.append(next(encoded))
            vectors.append(_view(asm.vectors[seg.lo : seg.hi]))
    return {DOCS: docs, VECTORS: vectors}


def _view(rows: npt.NDArray[np.float32]) -> memoryview:
    """The bytes of a C-contiguous block of rows, without copying."""
    return memoryview(rows.data)


def _open_sources(stamp: IndexStamp) -> dict[str, int] | None:
    """Read-only descriptors of the old docs.jsonl and vectors.f32, if they are still the files stamped."""
    fds: dict[str, int] = {}
    try:
        for name in (DOCS, VECTORS):
            fd = os.open(os.path.join(stamp.dir, name), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            fds[name] = fd
            st = os.fstat(fd)
            if stat_stamp(st) != stamp.of(name) or not stat.S_ISREG(st.st_mode):
                raise OSError(errno.ESTALE, "changed since it was opened")
    except OSError:
        for fd in fds.values():
            os.close(fd)
        return None
    return fds


def following(target: Path, gen: Generation, asm: Assembly, done: Spliced, cache_dir: Path) -> Generation | None:
    """The generation just published as the next splice's starting point, or None if it cannot be had cheaply.

    Its files are mapped again (checked by their stamps), and so is the readers'
    cache entry of its BM25 arrays that the publish stored: the arrays built in
    memory are let go, as are the bytes of bm25.idx (kept only when the entry
    or the file cannot be mapped).
    """
    stamp = index_stamp(target)
    if stamp is None:
        return None
    meta = done.meta
    fps: list[npt.NDArray[np.bytes_]] = []
    keys: list[npt.NDArray[np.uint64]] | None = [] if gen.keys is not None else None
    for seg in asm.segments:
        if seg.source == "old":
            fps.append(gen.fingerprints[seg.lo : seg.hi])
            if keys is not None and gen.keys is not None:
                keys.append(gen.keys[seg.lo : seg.hi])
        else:
            fps.append(np.array([r.fingerprint.encode("ascii") for r in asm.records[seg.lo : seg.hi]], dtype="S64"))
            if keys is not None:
                keys.append(fingerprint_keys(fps[-1]))
    stats: dict[str, os.stat_result] = {}
    mapped = _map_published(stamp, (DOCS, VECTORS, BM25), stats)
    if mapped is None:
        return None
    where = os.path.join(target, DOCS)
    records = DocsFile(mapped[DOCS], where, meta, ends=done.ends)
    vectors = (
        np.frombuffer(mapped[VECTORS], dtype="<f4").reshape(meta.n_chunks, meta.dim)
        if meta.n_chunks else np.zeros((0, meta.dim), dtype=np.float32)
    )
    bm25_raw: bytes | memoryview | mmap.mmap = done.bm25_raw
    bm25 = done.bm25
    cached: tuple[tuple[str, Stamp], ...] = ()
    if len(mapped[BM25]) == len(done.bm25_raw):
        bm25_raw = mapped[BM25]
        key = _bm25_key(cache_dir, meta, [stats[name] for name in FILES], bm25_raw)
        found = _cached_bm25(cache_dir, meta, key, bm25_raw)
        if found is not None:
            bm25, cached = found
    data = IndexData(path=target, generation=generation_of(target) or "", meta=meta, records=records,
                     vectors=vectors, bm25=bm25)
    fingerprints = np.concatenate(fps) if fps else np.zeros(0, dtype="S64")
    carried = (np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)) if keys is not None else None
    return Generation(data, asm.rows, fingerprints, bm25_raw, stamp, cached, carried)


def _bm25_key(cache_dir: Path, meta: IndexMeta, stats: list[os.stat_result], raw: bytes | mmap.mmap) -> str:
    """bm25.idx's cache key: as the writer recorded it with the generation (``verified``), else its hash."""
    known = verified.lookup(cache_dir, meta.index_id, [verified.file_stamp(st) for st in stats], meta.n_chunks)
    if known is not None and known.bm25_key is not None:
        return known.bm25_key
    return BM25Index.cache_key(raw, meta.k1, meta.b)


def _map_published(stamp: IndexStamp, names: tuple[str, ...],
                   stats: dict[str, os.stat_result] | None = None) -> dict[str, mmap.mmap | bytes] | None:
    """Read-only maps of the published files ``names``, if every one of the four files is the file stamped;
    ``stats`` receives each one's ``fstat``."""
    mapped: dict[str, mmap.mmap | bytes] = {}
    try:
        for name in FILES:
            fd = os.open(os.path.join(stamp.dir, name), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with open(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if stat_stamp(st) != stamp.of(name) or not stat.S_ISREG(st.st_mode):
                    return None
                if stats is not None:
                    stats[name] = st
                if name in names:
                    mapped[name] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if st.st_size else b""
    except (OSError, ValueError):
        return None
    return mapped
