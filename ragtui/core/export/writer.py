"""Write an index as a Seekite v2 export, one file at a time.

``write_export(data, sink, generated_at=..., vectors="i8")`` hands every file
of the export (``index.html`` and the ``search/`` tree, spec/seekite-export.md)
to ``sink(relative path, parts)`` as soon as it is made, holding a few
integers per chunk across the export rather than the files. The bytes are a
function of the index's four files and ``generated_at`` only: the same index
gives the same bytes. ``export_to(out, lambda sink: write_export(...))``
writes them to a folder safely; ``export_files`` collects them in memory
(for tests and small indexes).

Over 500 lines on purpose: the export's files refer to each other by
position (content offsets, postings shards, the dictionary's shard numbers),
and streaming them one at a time keeps those positions as running counters
that are easiest to check side by side in one module.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import StorageError, UsageError
from ragtui.core.export import seekite as sk
from ragtui.core.export.structure import HEADING_SEPARATOR, document_places
from ragtui.core.files import owner_is_gone, read_file, remove_dead_temporaries
from ragtui.core.fsops import OS_OPS
from ragtui.core.index import leb128
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.index_format import IndexData
from ragtui.core.search.quant import quantize_rows, release_pages

__all__ = ["PAGE", "Sink", "Target", "Written", "check_generated_at", "check_target", "export_files", "export_to",
           "is_previous_export", "write_export"]

PAGE = "index.html"
SEARCH = "search"
_GENERATED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")

Progress = Callable[[str, int, int], None]


def check_generated_at(value: str) -> str:
    """``value`` if it is an RFC 3339 UTC time with whole seconds (2026-10-09T12:00:00Z), else UsageError."""
    if not _GENERATED_AT.match(value):
        raise UsageError(f"--generated-at must look like 2026-10-09T12:00:00Z (got {value!r})")
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise UsageError(f"--generated-at is not a real date and time (got {value!r})") from None
    return value


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _extension(doc_id: str) -> str:
    name = doc_id.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[1].lower() if "." in name.strip(".") else ""


Sink = Callable[[str, Iterable[bytes]], None]
"""Where the writer puts each file: ``sink(relative path, its bytes in parts)``, called once a file."""


@dataclass(frozen=True)
class Written:
    """What ``write_export`` wrote: how many files, how many bytes in all."""

    files: int
    bytes: int


def export_files(data: IndexData, *, generated_at: str | None = None, vectors: str = "i8",
                 progress: Progress | None = None) -> dict[str, bytes]:
    """Every file of the export of ``data`` in memory, by relative path (for tests and small indexes:
    ``write_export`` into ``export_to`` writes them one at a time instead)."""
    files: dict[str, bytes] = {}

    def keep(rel: str, parts: Iterable[bytes]) -> None:
        files[rel] = b"".join(parts)

    write_export(data, keep, generated_at=generated_at, vectors=vectors, progress=progress)
    return files


def write_export(data: IndexData, sink: Sink, *, generated_at: str | None = None, vectors: str = "i8",
                 progress: Progress | None = None) -> Written:
    """Write every file of the export of ``data`` (``index.html`` and ``search/...``) into ``sink``.

    Files go out as they are made: content shards during the one pass over
    docs.jsonl (a document at a time, no record kept), then corpus.json,
    vectors.bin and the lexical files, each streamed in parts. What is held
    across the pass is a few integers per chunk and each distinct title and
    heading once (spec/seekite-export.md, "Memory").
    """
    if vectors not in ("i8", "f32", "none"):
        raise UsageError(f"--vectors must be i8, f32 or none (got {vectors!r})")
    generated_at = check_generated_at(generated_at) if generated_at is not None else _now()
    meta = data.meta
    n = meta.n_chunks
    corpus_path = sk.corpus_path_for(meta.index_id)
    base = f"{SEARCH}/{corpus_path}/"
    count = [0, 0]

    def put(rel: str, parts: Iterable[bytes]) -> None:
        def counted() -> Iterator[bytes]:
            for part in parts:
                count[1] += len(part)
                yield part
        sink(rel, counted())
        count[0] += 1

    doc_ids: list[str] = []
    doc_title: list[int] = []  # per document: its title's number in ``titles``
    doc_ext: list[str] = []
    doc_start: list[int] = []
    titles: dict[str, int] = {}  # distinct strings, numbered in order of first use
    headings: dict[str, int] = {}
    doc_of = np.empty(n, dtype=np.int64)
    line_of = np.empty(n, dtype=np.int64)
    page_of = np.zeros(n, dtype=np.int64)  # 0: not a paged document
    heading_of = np.empty(n, dtype=np.int64)
    content = _ContentShards(put, base, n)
    i = 0
    texts: list[str] = []
    doc_id: str | None = None

    def finish_document() -> None:
        assert doc_id is not None
        d = len(doc_ids)
        start = i - len(texts)
        title, places = document_places(doc_id, texts)
        doc_ids.append(doc_id)
        doc_title.append(titles.setdefault(title, len(titles)))
        doc_ext.append(_extension(doc_id))
        doc_start.append(start)
        doc_of[start:i] = d
        for j, place in enumerate(places, start):
            line_of[j] = place.line
            if place.page is not None:
                page_of[j] = place.page
            heading_of[j] = headings.setdefault(HEADING_SEPARATOR.join(place.headings), len(headings))
        for text in texts:
            content.add(text)
        if progress is not None:
            progress("structure", i, n)

    for rec in data.records.stream():
        if rec.doc_id != doc_id:
            if doc_id is not None:
                finish_document()
            doc_id, texts = rec.doc_id, []
        texts.append(rec.text)
        i += 1
    if doc_id is not None:
        finish_document()
    texts = []
    content.close()
    data.records.release_pages()  # read through once: its pages need not stay resident
    doc_start.append(n)

    facets: dict[str, int] = {}
    for d, e in enumerate(doc_ext):
        if e:
            facets[e] = facets.get(e, 0) + doc_start[d + 1] - doc_start[d]
    put(base + "corpus.json", _corpus_parts(meta.index_id, doc_ids, doc_start, doc_title, doc_ext, list(titles),
                                            list(headings), line_of, page_of, heading_of, (content.shard_at, content.index_at), facets))
    title_of = np.asarray(doc_title, dtype=np.int64)[doc_of] if n else np.zeros(0, dtype=np.int64)
    entry: dict[str, object] = {
        "name": meta.index_id,
        "path": corpus_path,
        "chunks": n,
        "format": sk.VERSION,
        "corpus": "corpus.json",
    }
    if vectors != "none":
        put(base + "vectors.bin", _vector_parts(data.vectors, vectors))
        release_pages(data.vectors)
    n_shards = _lexical(data, ((title_of, list(titles)), (heading_of, list(headings))), put, base)
    if progress is not None:
        progress("lexical", 1, 1)
    entry["lexical"] = {"dictionary": "lexical/dictionary.bin", "shards": n_shards}
    entry["content"] = {"prefix": "content/content-", "shards": content.shards}
    if vectors != "none":
        entry["vectors"] = {"file": "vectors.bin", "dtype": vectors}
    entry["embedding"] = {"provider": meta.embedding_model, "dimensions": meta.dim,
                          "mode": "static" if meta.embedding_model.startswith("wordllama") else "model"}
    entry["analyzer"] = {"folding": True, "stemmer": None}
    manifest = {"format": "seekite", "version": sk.VERSION, "generatedAt": generated_at,
                "corpora": {meta.index_id: entry}}
    put(f"{SEARCH}/manifest.json", [(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode("utf-8")])
    put(PAGE, [resources.files("ragtui.core.export").joinpath("index.html").read_bytes()])
    return Written(count[0], count[1])


class _ContentShards:
    """The content shards, each written as soon as the next chunk would take it past CONTENT_SHARD_TARGET
    bytes (a shard holds at least one chunk); ``shard_at`` and ``index_at`` are each chunk's place."""

    HEAD, TAIL = b'{"version":2,"chunks":[', b"]}"

    def __init__(self, put: Sink, base: str, n: int) -> None:
        self.put = put
        self.base = base
        self.shards = 0
        self.current: list[bytes] = []
        self.size = 0
        self.chunks = 0
        self.shard_at = np.zeros(n, dtype=np.int64)
        self.index_at = np.zeros(n, dtype=np.int64)

    def add(self, text: str) -> None:
        item = _json({"content": text, "metadata": {}})
        grown = self.size + len(item) + (1 if self.current else 0)
        if self.current and len(self.HEAD) + grown + len(self.TAIL) > sk.CONTENT_SHARD_TARGET:
            self._flush()
            grown = len(item)
        self.shard_at[self.chunks] = self.shards
        self.index_at[self.chunks] = len(self.current)
        self.chunks += 1
        self.current.append(item)
        self.size = grown

    def _flush(self) -> None:
        self.put(self.base + sk.content_name("content/content-", self.shards),
                 [self.HEAD, b",".join(self.current), self.TAIL])
        self.shards += 1
        self.current, self.size = [], 0

    def close(self) -> None:
        if self.current or not self.shards:
            self._flush()



_BATCH = 4096
"""Array items encoded and handed to the sink together."""


def _json_array(items: Iterable[bytes]) -> Iterator[bytes]:
    """A JSON array of already encoded items, in parts: what ``_json(list)`` gives, byte for byte."""
    yield b"["
    batch: list[bytes] = []
    sep = b""
    for item in items:
        batch.append(item)
        if len(batch) == _BATCH:
            yield sep + b",".join(batch)
            batch, sep = [], b","
    if batch:
        yield sep + b",".join(batch)
    yield b"]"


def _corpus_parts(name: str, doc_ids: list[str], doc_start: list[int], doc_title: list[int], doc_ext: list[str],
                  titles: list[str], headings: list[str], line_of: np.ndarray, page_of: np.ndarray, heading_of: np.ndarray,
                  content_at: tuple[np.ndarray, np.ndarray], facets: dict[str, int]) -> Iterator[bytes]:
    """corpus.json in parts (the same bytes as ``_json`` of the whole object)."""

    def per_chunk(encoded: list[bytes]) -> Iterator[bytes]:  # one value per document, repeated for its chunks
        for d, value in enumerate(encoded):
            yield from (value,) * (doc_start[d + 1] - doc_start[d])

    def per_document(make: Callable[[int, str], Iterator[bytes]]) -> Iterator[bytes]:
        for d, doc_id in enumerate(doc_ids):
            yield from make(d, doc_id)

    def ids(d: int, doc_id: str) -> Iterator[bytes]:
        for k in range(doc_start[d + 1] - doc_start[d]):
            yield _json(f"{doc_id}#{k}")

    def urls(d: int, doc_id: str) -> Iterator[bytes]:
        path = quote(doc_id, safe="/")
        lo, hi = doc_start[d], doc_start[d + 1]
        for line, page in zip(line_of[lo:hi].tolist(), page_of[lo:hi].tolist()):
            yield _json(f"{path}#page={page}" if page else f"{path}#L{line}")

    yield b'{"version":' + _json(sk.VERSION) + b',"name":' + _json(name) + b',"documents":'
    yield from _json_array(_json(d) for d in doc_ids)
    yield b',"chunks":{"id":'
    yield from _json_array(per_document(ids))
    yield b',"document":'
    yield from _json_array(per_chunk([str(d).encode() for d in range(len(doc_ids))]))
    yield b',"url":'
    yield from _json_array(per_document(urls))
    yield b',"title":'
    encoded_titles = [_json(t) for t in titles]
    yield from _json_array(per_chunk([encoded_titles[t] for t in doc_title]))
    del encoded_titles
    yield b',"heading":'
    encoded_headings = [_json(h) for h in headings]
    yield from _json_array(encoded_headings[h] for lo in range(0, len(heading_of), _BATCH)
                           for h in heading_of[lo : lo + _BATCH].tolist())
    del encoded_headings
    yield b',"content":'
    shard_at, index_at = content_at
    yield from _json_array(b"[%d,%d]" % pair for lo in range(0, len(shard_at), _BATCH)
                           for pair in zip(shard_at[lo : lo + _BATCH].tolist(), index_at[lo : lo + _BATCH].tolist()))
    yield b',"filters":{"ext":'
    yield from _json_array(per_chunk([_json([e]) if e else b"[]" for e in doc_ext]))
    yield b'}},"facets":{"ext":' + _json(dict(sorted(facets.items()))) + b"}}"


def _vector_parts(vectors: np.ndarray, dtype: str) -> Iterator[bytes]:
    """vectors.bin as ``encode_vectors`` writes it, a block of rows at a time."""
    n, dim = vectors.shape
    yield sk.MAGIC_VECTORS + struct.pack("<HBBII", sk.VERSION, sk.DTYPES[dtype], 0, dim, n)
    if dtype == "f32":
        for lo in range(0, n, _VECTOR_BLOCK):
            yield np.ascontiguousarray(vectors[lo : lo + _VECTOR_BLOCK], dtype="<f4").tobytes()
        return
    scales = np.empty(n, dtype=np.float32)
    for lo in range(0, n, _VECTOR_BLOCK):  # the scales come first: quantize twice rather than hold the codes
        scales[lo : lo + _VECTOR_BLOCK] = quantize_rows(np.asarray(vectors[lo : lo + _VECTOR_BLOCK], np.float32))[0]
    yield scales.astype("<f4").tobytes()
    for lo in range(0, n, _VECTOR_BLOCK):
        yield quantize_rows(np.asarray(vectors[lo : lo + _VECTOR_BLOCK], np.float32))[1].tobytes()


_VECTOR_BLOCK = 8192


def encode_vectors(vectors: np.ndarray, dtype: str) -> bytes:
    """vectors.bin (SKVX v2) of unit float32 rows, as f32 or per-row-scaled i8."""
    n, dim = vectors.shape
    head = sk.MAGIC_VECTORS + struct.pack("<HBBII", sk.VERSION, sk.DTYPES[dtype], 0, dim, n)
    if dtype == "f32":
        return head + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    scales, codes = quantize_rows(vectors)
    return head + scales.astype("<f4").tobytes() + codes.tobytes()


def _lexical(data: IndexData, columns: tuple[tuple[np.ndarray, list[str]], ...], put: Sink, base: str) -> int:
    """Write dictionary.bin and the postings shards, with per-field frequencies: titles, headings (each
    column: every chunk's number in its list of distinct strings), and the body's postings taken from
    bm25.idx (the same analyzer over the same text). Returns the number of postings shards."""
    bm = data.bm25
    n = bm.n_docs
    body_terms = [bytes(bm.term_blob[bm.term_starts[t] : bm.term_starts[t + 1]]) for t in range(bm.n_terms)]
    field_lengths = np.zeros((3, n), dtype=np.int64)
    field_lengths[2] = np.asarray(bm.doc_len, dtype=np.int64)
    # Titles and headings repeat across a document's chunks: analyze each distinct string once.
    extra_terms: dict[bytes, int] = {}
    rows: list[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
    for field, (ids, strings) in enumerate(columns):
        order = np.argsort(ids, kind="stable")
        bounds = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum(np.bincount(ids, minlength=len(strings)), out=bounds[1:])
        lengths = np.zeros(len(strings), dtype=np.int64)
        for sid, s in enumerate(strings):
            terms = analyze(s)
            lengths[sid] = len(terms)
            tally: dict[str, int] = {}
            for word in terms:
                tally[word] = tally.get(word, 0) + 1
            members = order[bounds[sid] : bounds[sid + 1]]
            for word, c in tally.items():
                tid = extra_terms.setdefault(word.encode("utf-8"), len(extra_terms))
                rows.append((field, np.full(len(members), tid, np.int64), members, np.full(len(members), c, np.int64)))
        field_lengths[field] = lengths[ids]
    vocab = sorted(set(body_terms) | set(extra_terms))
    n_terms = len(vocab)
    gid = {t: i for i, t in enumerate(vocab)}
    body_gid = np.array([gid[t] for t in body_terms], dtype=np.int64)
    extra_gid = np.empty(len(extra_terms), dtype=np.int64)
    for word_bytes, i in extra_terms.items():
        extra_gid[i] = gid[word_bytes]
    del gid, body_terms, extra_terms
    # The title and heading postings, ordered by term (a few per chunk; the body's are bm25.idx's arrays).
    if rows:
        x_term = np.concatenate([extra_gid[tids] for _, tids, _, _ in rows])
        x_chunk = np.concatenate([members for _, _, members, _ in rows])
        x_tf = np.concatenate([tfs for _, _, _, tfs in rows])
        x_field = np.concatenate([np.full(len(members), f, np.int64) for f, _, members, _ in rows])
        order = np.argsort(x_term, kind="stable")
        x_term, x_chunk, x_tf, x_field = x_term[order], x_chunk[order], x_tf[order], x_field[order]
        del order
    else:
        x_term = x_chunk = x_tf = x_field = np.zeros(0, dtype=np.int64)
    del rows
    body_offsets = np.asarray(bm.offsets, dtype=np.int64)
    # Terms are encoded a block at a time (about _POSTINGS_BLOCK postings each, in vocabulary order):
    # the whole varint stream, as the shards cut it, is never held at once.
    weight = np.bincount(x_term, minlength=n_terms).astype(np.int64)
    weight[body_gid] += np.diff(body_offsets)
    cum = np.cumsum(weight)
    del weight
    df_list: list[int] = []
    shard_of: list[int] = []
    offset_in: list[int] = []
    shard_sizes: list[int] = []
    pending = b""  # the stream's bytes from ``lo`` (the current shard's start) to the end of the last block
    lo = 0
    g0 = 0
    m = max(n, 1)
    while g0 < n_terms:
        before = int(cum[g0 - 1]) if g0 else 0
        g1 = max(g0 + 1, int(np.searchsorted(cum, before + _POSTINGS_BLOCK, side="right")))
        b0, b1 = np.searchsorted(body_gid, [g0, g1])
        e0, e1 = np.searchsorted(x_term, [g0, g1])
        p0, p1 = int(body_offsets[b0]), int(body_offsets[b1])
        all_term = np.concatenate((np.repeat(body_gid[b0:b1] - g0, np.diff(body_offsets[b0 : b1 + 1])),
                                   x_term[e0:e1] - g0))
        all_chunk = np.concatenate((np.asarray(bm.post_doc[p0:p1], dtype=np.int64), x_chunk[e0:e1]))
        tf = np.concatenate((np.asarray(bm.post_tf[p0:p1], dtype=np.int64), x_tf[e0:e1]))
        all_field = np.concatenate((np.full(p1 - p0, 2, np.int64), x_field[e0:e1]))
        keys = all_term * m + all_chunk
        del all_term, all_chunk
        uniq, inverse = np.unique(keys, return_inverse=True)
        del keys
        freqs = np.zeros((3, len(uniq)), dtype=np.int64)
        for f in range(3):
            sel = all_field == f
            freqs[f] = np.bincount(inverse[sel], weights=tf[sel], minlength=len(uniq)).astype(np.int64)
        del inverse, tf, all_field
        p_term = uniq // m
        p_chunk = uniq % m
        del uniq
        k = g1 - g0
        counts = np.bincount(p_term, minlength=k).astype(np.int64)
        offsets = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        delta = p_chunk.copy()
        same = np.ones(len(p_chunk), dtype=bool)
        same[offsets[:-1][counts > 0]] = False
        delta[1:][same[1:]] = p_chunk[1:][same[1:]] - p_chunk[:-1][same[1:]]
        # Every term's entry: postingCount, then (delta, title, heading, body) per posting, as one varint stream.
        total = k + 4 * len(p_chunk)
        values = np.empty(total, dtype=np.uint32)  # every value is below 2**32: half of int64's memory
        entry_at = np.arange(k, dtype=np.int64) + 4 * offsets[:-1]
        values[entry_at] = counts
        post_at = 1 + 4 * np.arange(len(p_chunk), dtype=np.int64) + np.repeat(np.arange(k, dtype=np.int64), counts)
        values[post_at] = delta
        values[post_at + 1] = freqs[0]
        values[post_at + 2] = freqs[1]
        values[post_at + 3] = freqs[2]
        del post_at, delta, freqs, p_term, p_chunk, same
        block = pending + leb128.encode(values)
        byte_at = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(leb128.sizes(values), out=byte_at[1:])
        del values
        at = lo + len(pending)  # where this block starts in the whole stream
        entry_start = (byte_at[entry_at] + at).tolist()
        entry_end = (byte_at[np.append(entry_at[1:], total)] + at).tolist()
        del byte_at, entry_at
        cut = lo  # the block's bytes before ``cut`` are written
        for t in range(k):
            if entry_end[t] - cut > sk.POSTINGS_SHARD_TARGET and entry_start[t] > cut:
                put(base + sk.postings_name(len(shard_sizes)), [block[cut - lo : entry_start[t] - lo]])
                shard_sizes.append(entry_start[t] - cut)
                cut = entry_start[t]
            shard_of.append(len(shard_sizes))
            offset_in.append(entry_start[t] - cut)
        pending = block[cut - lo :]
        lo = cut
        df_list += counts.tolist()
        del block
        g0 = g1
    if n_terms:
        put(base + sk.postings_name(len(shard_sizes)), [pending])
        shard_sizes.append(len(pending))
    del pending, x_term, x_chunk, x_tf, x_field
    averages = [float(np.float32(field_lengths[f].mean(dtype=np.float64))) if n else 0.0 for f in range(3)]
    out = bytearray(sk.MAGIC_DICTIONARY + struct.pack("<HHB", sk.VERSION, 0, 3))
    out += leb128.encode_one(n)
    out += struct.pack("<3f", *averages)
    out += leb128.encode(field_lengths.reshape(-1))
    out += leb128.encode_one(n_terms)
    small = _SMALL_VARINTS
    records = []
    previous = b""
    for t, term_bytes in enumerate(vocab):
        shared = 0
        limit = min(len(previous), len(term_bytes))
        while shared < limit and previous[shared] == term_bytes[shared]:
            shared += 1
        suffix = term_bytes[shared:]
        df, shard, offset = df_list[t], shard_of[t], offset_in[t]
        records.append(b"".join((small[shared] if shared < 16384 else leb128.encode_one(shared),
                                 small[len(suffix)] if len(suffix) < 16384 else leb128.encode_one(len(suffix)), suffix,
                                 small[df] if df < 16384 else leb128.encode_one(df),
                                 small[shard] if shard < 16384 else leb128.encode_one(shard),
                                 small[offset] if offset < 16384 else leb128.encode_one(offset))))
        previous = term_bytes
    tail = leb128.encode_one(len(shard_sizes)) + b"".join(leb128.encode_one(size) for size in shard_sizes)
    put(base + "lexical/dictionary.bin", [bytes(out), b"".join(records), tail])
    return len(shard_sizes)


_POSTINGS_BLOCK = 1 << 18
"""Postings (title, heading and body) encoded together: the lexical files' working memory is about
100 bytes each."""

_SMALL_VARINTS = [leb128.encode_one(v) for v in range(16384)]
"""The encodings of the values below 2**14 (one or two bytes), looked up instead of computed."""


# -- writing a folder -------------------------------------------------------------------------------


def is_previous_export(out: Path) -> bool:
    """Whether ``out`` holds only what an export writes: index.html and search/ with a Seekite manifest,
    and the documents an export ``--with-sources`` copied (the one folder its sources.json names)."""
    from ragtui.core.export.sources import SOURCES, sources_folder_of

    try:
        names = set(os.listdir(out))
    except OSError:
        return False
    allowed = {PAGE, SEARCH}
    folder = sources_folder_of(out) if SOURCES in names else None
    if folder is not None:
        allowed |= {SOURCES, folder}
    if not names <= allowed or SEARCH not in names:
        return False
    try:
        obj = json.loads(read_file(out / SEARCH / "manifest.json", 1 << 20, follow=False))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("format") == "seekite"


@dataclass(frozen=True)
class Target:
    """Where an export goes: ``parent/name``, both resolved; ``replacing`` when a previous export is there."""

    path: Path
    replacing: bool

    @property
    def parent(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        return self.path.name


def _place(out: str | os.PathLike[str]) -> Path:
    """``out`` as an absolute path whose folder is resolved and whose last part is a name (never "." or "..")."""
    given = os.fspath(out)
    if not given:
        raise UsageError("the export folder is empty: give a folder to write to")
    if os.path.lexists(given) and not _is_link(given) and os.path.isdir(given):
        return Path(os.path.realpath(given))  # "." and ".." and "a/.." name a real folder: its own path
    absolute = os.path.abspath(given)
    return Path(os.path.realpath(os.path.dirname(absolute))) / os.path.basename(absolute)


def _is_link(given: str) -> bool:
    """Whether the last part of ``given`` is a symbolic link (``out/`` too: a trailing slash would follow it)."""
    return os.path.islink(given.rstrip(os.sep) or os.sep)


def _mount_points() -> set[str]:
    """Where something is mounted (/proc/self/mountinfo): a bind mount of the same filesystem has the same st_dev."""
    try:
        raw = read_file("/proc/self/mountinfo", 16 << 20)
    except OSError:
        return set()
    points = set()
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]))
    return points


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_target(out: str | os.PathLike[str], *, keep_clear: tuple[str | os.PathLike[str], ...] = ()) -> Target:
    """Where ``export_to(out, ...)`` writes, refused with ``UsageError`` (exit 2) before any work when it cannot.

    An export replaces the folder ``out`` as a whole, in one rename. So ``out``
    must be a new name, an empty folder or a previous export, and a folder that
    can be renamed and replaced: not a symbolic link, not a mount point or the
    root (the kernel refuses to rename those), not the current directory or one
    holding it (the shell inside would be left in the removed folder), and
    neither inside nor holding any of ``keep_clear`` (the index's ``rag/``).
    """
    target = _place(out)
    shown = os.fspath(out)
    if _is_link(shown) or (os.path.lexists(target) and not target.is_dir()):
        raise UsageError(f"{shown} is not a folder: give a new or empty folder, or a previous export, to write to")
    here = os.path.realpath(os.getcwd())
    real = os.fspath(target)
    if real == here:
        raise UsageError(f"{shown} is the current directory, which an export cannot replace (it replaces the whole "
                         f"folder, and this shell would be left in the removed one): run it from the folder above, "
                         f"e.g. `cd .. && ragtui export {target.name} ...`, or give a folder inside it such as "
                         f"{os.path.join(shown, 'site')}")
    if _inside(here, real):
        raise UsageError(f"{shown} holds the current directory, which an export cannot replace (it replaces the "
                         f"whole folder): run it from outside {shown}, or give a new folder")
    for path in keep_clear:
        clear = os.path.realpath(path)
        if _inside(real, clear) or _inside(clear, real):
            raise UsageError(f"{shown} is inside or holds the index's folder {clear}: give a folder outside it")
    if os.path.lexists(target):
        try:
            st, up = os.stat(target), os.stat(target.parent)
        except OSError as e:
            raise StorageError(f"cannot read {shown}: {e.strerror}") from None
        if st.st_dev != up.st_dev or st.st_ino == up.st_ino or real in _mount_points():
            raise UsageError(f"{shown} is a mount point, which an export cannot replace (it replaces the whole folder "
                             f"with one rename): give a folder inside it, e.g. {os.path.join(shown, 'site')}")
        try:
            empty = not os.listdir(target)
        except OSError as e:
            raise StorageError(f"cannot list {shown}: {e.strerror}") from None
        if not empty:
            if not is_previous_export(target):
                raise UsageError(f"{shown} is not empty and does not hold a previous export: "
                                 "give a new or empty folder (nothing was written)")
            return Target(target, True)
    return Target(target, False)


def _temporaries(name: str, kinds: str = "export|old") -> re.Pattern[str]:
    """The names of the temporary folders an export of ``name`` makes beside it: ``.<name>.export-<pid>``, ..."""
    return re.compile(rf"\.{re.escape(name)}\.(?:{kinds})-(?P<pid>[0-9]+)", re.DOTALL)


def _tidy(parent: Path, name: str) -> None:
    """Clean up after exports of ``parent/name`` that were killed (their pids no longer run).

    A half-written ``.<name>.export-<pid>`` is deleted; so is a ``.<name>.old-<pid>`` (the previous
    export, kept aside only where the filesystem cannot swap two names), unless nothing is at
    ``name`` any more: then it is the last export there and is put back.
    """
    if not os.path.lexists(parent / name):
        old = _temporaries(name, "old")
        try:
            names = sorted(os.listdir(parent))
        except OSError:
            names = []
        for entry in names:
            match = old.fullmatch(entry)
            path = parent / entry
            if match and owner_is_gone(int(match["pid"])) and not path.is_symlink() and path.is_dir():
                try:
                    os.rename(path, parent / name)
                except OSError:
                    pass
                break
    remove_dead_temporaries(parent, _temporaries(name))


_NO_EXCHANGE = (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP)
"""What renameat2 answers where the filesystem (or the C library) cannot swap two names."""


def export_to(out: str | os.PathLike[str], files: Mapping[str, bytes] | Callable[[Sink], object], *,
              keep_clear: tuple[str | os.PathLike[str], ...] = ()) -> Path:
    """Write ``files`` as the folder ``out``, replacing a previous export there, never anything else.

    ``files`` is either every file by relative path, or a function that writes
    them into the sink it is given, one at a time (``write_export``: nothing
    is held in memory past the file being written). ``out`` must be what
    ``check_target`` accepts (else ``UsageError``, before anything is written).
    The files are written under a temporary folder beside ``out``
    (``.<name>.export-<pid>``) which then takes the place of ``out`` in one step:
    where ``out`` exists, the two names are swapped (``renameat2`` with
    ``RENAME_EXCHANGE``, as the index publish does) and the old export, now
    under the temporary name, is deleted; else the folder is renamed to ``out``.
    A reader sees the old export or the new one, a process killed at any point
    leaves one of them at ``out``, and what it leaves beside ``out`` is deleted
    by the next export there. A failure (of writing, or an error the function
    raises) leaves ``out`` as it was and removes the temporary folder.
    """
    place = _place(out)
    _tidy(place.parent, place.name)
    target = check_target(out, keep_clear=keep_clear)
    parent, name = target.parent, target.name
    temp = parent / f".{name}.export-{os.getpid()}"

    folders: set[Path] = {temp}

    def write(rel: str, parts: Iterable[bytes]) -> None:
        path = temp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        folders.update(p for p in path.parents if p.is_relative_to(temp))
        with open(path, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())

    try:
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir(parents=True)
        if callable(files):
            files(write)
        else:
            for rel, content in sorted(files.items()):
                write(rel, (content,))
        # Every file and folder on disk before the swap, the swap on disk before the return: after a crash
        # the export at ``out`` is a whole one, the new or the old, never files the kernel had not written yet.
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            _fsync_dir(folder)
        if os.path.lexists(target.path):
            _swap_in(temp, target.path, parent / f".{name}.old-{os.getpid()}")
        else:
            os.rename(temp, target.path)
        _fsync_dir(parent)
    except OSError as e:
        shutil.rmtree(temp, ignore_errors=True)
        raise StorageError(f"cannot write the export to {os.fspath(out)}: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target.path


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_in(temp: Path, target: Path, old: Path) -> None:
    """Put the folder ``temp`` at ``target`` (a previous export or an empty folder) and delete what was there."""
    try:
        OS_OPS.exchange(temp, target)
    except OSError as e:
        if e.errno not in _NO_EXCHANGE:
            raise
        # No atomic swap on this filesystem: for a moment between the two renames nothing is at target;
        # a process killed then leaves the old export as ``old``, which the next export puts back.
        os.rename(target, old)
        try:
            os.rename(temp, target)
        except OSError:
            os.rename(old, target)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    shutil.rmtree(temp, ignore_errors=True)  # the old export, now under the temporary name
