"""The export writer as it was before it streamed: every file built in memory as one dict.

Kept only as the reference the streamed writer (ragtui/core/export/writer.py) must match byte for byte
(tests/unit/test_export_stream.py). Not used by ragtui itself.
"""
from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import UsageError
from ragtui.core.export import seekite as sk
from ragtui.core.export.structure import HEADING_SEPARATOR, chunk_url, document_places
from ragtui.core.index import leb128
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.index_format import IndexData
from ragtui.core.index.records import ChunkRecord
from ragtui.core.search.quant import quantize_rows

__all__ = ["export_files"]

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


def export_files(data: IndexData, *, generated_at: str | None = None, vectors: str = "i8",
                 progress: Progress | None = None) -> dict[str, bytes]:
    """Every file of the export of ``data``: ``index.html`` and ``search/...``, by relative path."""
    if vectors not in ("i8", "f32", "none"):
        raise UsageError(f"--vectors must be i8, f32 or none (got {vectors!r})")
    generated_at = check_generated_at(generated_at) if generated_at is not None else _now()
    meta = data.meta
    n = meta.n_chunks
    records = [data.records[i] for i in range(n)]
    # Documents in the index's order (by doc_id bytes), each with its chunks' rows.
    doc_ids: list[str] = []
    doc_of = np.empty(n, dtype=np.int64)
    for i, rec in enumerate(records):
        if not doc_ids or doc_ids[-1] != rec.doc_id:
            doc_ids.append(rec.doc_id)
        doc_of[i] = len(doc_ids) - 1
    titles: list[str] = [""] * n
    headings: list[str] = [""] * n
    urls: list[str] = [""] * n
    start = 0
    for d, doc_id in enumerate(doc_ids):
        end = start
        while end < n and doc_of[end] == d:
            end += 1
        title, places = document_places(doc_id, [r.text for r in records[start:end]])
        for i, place in zip(range(start, end), places):
            titles[i] = title
            headings[i] = HEADING_SEPARATOR.join(place.headings)
            urls[i] = chunk_url(doc_id, place.line)
        start = end
        if progress is not None:
            progress("structure", d + 1, len(doc_ids))

    content_files, content_at = _content_shards(records)
    corpus_path = sk.corpus_path_for(meta.index_id)
    exts = [_extension(r.doc_id) for r in records]
    facets: dict[str, int] = {}
    for e in exts:
        if e:
            facets[e] = facets.get(e, 0) + 1
    corpus = {
        "version": sk.VERSION,
        "name": meta.index_id,
        "documents": doc_ids,
        "chunks": {
            "id": [r.chunk_id for r in records],
            "document": doc_of.tolist(),
            "url": urls,
            "title": titles,
            "heading": headings,
            "content": content_at,
            "filters": {"ext": [[e] if e else [] for e in exts]},
        },
        "facets": {"ext": dict(sorted(facets.items()))},
    }
    dictionary, shards = _lexical(data, titles, headings)
    if progress is not None:
        progress("lexical", 1, 1)
    entry: dict[str, object] = {
        "name": meta.index_id,
        "path": corpus_path,
        "chunks": n,
        "format": sk.VERSION,
        "corpus": "corpus.json",
        "lexical": {"dictionary": "lexical/dictionary.bin", "shards": len(shards)},
        "content": {"prefix": "content/content-", "shards": len(content_files)},
    }
    files: dict[str, bytes] = {}
    base = f"{SEARCH}/{corpus_path}/"
    if vectors != "none":
        entry["vectors"] = {"file": "vectors.bin", "dtype": vectors}
        files[base + "vectors.bin"] = encode_vectors(np.asarray(data.vectors, dtype=np.float32), vectors)
    entry["embedding"] = {"provider": meta.embedding_model, "dimensions": meta.dim,
                          "mode": "static" if meta.embedding_model.startswith("wordllama") else "model"}
    entry["analyzer"] = {"folding": True, "stemmer": None}
    manifest = {"format": "seekite", "version": sk.VERSION, "generatedAt": generated_at,
                "corpora": {meta.index_id: entry}}
    files[f"{SEARCH}/manifest.json"] = (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    files[base + "corpus.json"] = _json(corpus)
    files[base + "lexical/dictionary.bin"] = dictionary
    for s, shard in enumerate(shards):
        files[base + sk.postings_name(s)] = shard
    for s, shard in enumerate(content_files):
        files[base + sk.content_name("content/content-", s)] = shard
    files[PAGE] = resources.files("ragtui.core.export").joinpath("index.html").read_bytes()
    return files


def _content_shards(records: list[ChunkRecord]) -> tuple[list[bytes], list[list[int]]]:
    """The content shards (each at most CONTENT_SHARD_TARGET bytes unless one chunk is larger) and each
    chunk's [shard, index]."""
    shards: list[bytes] = []
    at: list[list[int]] = []
    current: list[bytes] = []
    size = 0
    head, tail = b'{"version":2,"chunks":[', b"]}"
    for rec in records:
        item = _json({"content": rec.text, "metadata": {}})
        grown = size + len(item) + (1 if current else 0)
        if current and len(head) + grown + len(tail) > sk.CONTENT_SHARD_TARGET:
            shards.append(head + b",".join(current) + tail)
            current, size = [], 0
            grown = len(item)
        at.append([len(shards), len(current)])
        current.append(item)
        size = grown
    if current or not shards:
        shards.append(head + b",".join(current) + tail)
    return shards, at


def encode_vectors(vectors: np.ndarray, dtype: str) -> bytes:
    """vectors.bin (SKVX v2) of unit float32 rows, as f32 or per-row-scaled i8."""
    n, dim = vectors.shape
    head = sk.MAGIC_VECTORS + struct.pack("<HBBII", sk.VERSION, sk.DTYPES[dtype], 0, dim, n)
    if dtype == "f32":
        return head + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    scales, codes = quantize_rows(vectors)
    return head + scales.astype("<f4").tobytes() + codes.tobytes()


def _lexical(data: IndexData, titles: list[str], headings: list[str]) -> tuple[bytes, list[bytes]]:
    """(dictionary.bin, postings shards) with per-field frequencies: titles, headings, and the body's
    postings taken from bm25.idx (the same analyzer over the same text)."""
    bm = data.bm25
    n = bm.n_docs
    body_terms = [bytes(bm.term_blob[bm.term_starts[t] : bm.term_starts[t + 1]]) for t in range(bm.n_terms)]
    field_lengths = np.zeros((3, n), dtype=np.int64)
    field_lengths[2] = np.asarray(bm.doc_len, dtype=np.int64)
    # Titles and headings repeat across a document's chunks: analyze each distinct string once.
    extra_terms: dict[bytes, int] = {}
    rows: list[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
    for field, column in ((0, titles), (1, headings)):
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(column):
            groups.setdefault(s, []).append(i)
        for s, chunks in groups.items():
            terms = analyze(s)
            field_lengths[field, chunks] = len(terms)
            tally: dict[str, int] = {}
            for word in terms:
                tally[word] = tally.get(word, 0) + 1
            members = np.asarray(chunks, dtype=np.int64)
            for word, c in tally.items():
                tid = extra_terms.setdefault(word.encode("utf-8"), len(extra_terms))
                rows.append((field, np.full(len(members), tid, np.int64), members, np.full(len(members), c, np.int64)))
    vocab = sorted(set(body_terms) | set(extra_terms))
    gid = {t: i for i, t in enumerate(vocab)}
    body_gid = np.array([gid[t] for t in body_terms], dtype=np.int64)
    extra_gid = np.empty(len(extra_terms), dtype=np.int64)
    for word_bytes, i in extra_terms.items():
        extra_gid[i] = gid[word_bytes]
    df_body = np.diff(bm.offsets)
    parts_term = [np.repeat(body_gid, df_body)]
    parts_chunk = [np.asarray(bm.post_doc, dtype=np.int64)]
    parts_tf = [np.asarray(bm.post_tf, dtype=np.int64)]
    parts_field = [np.full(len(parts_chunk[0]), 2, np.int64)]
    for field_no, tids, members, tfs in rows:
        parts_term.append(extra_gid[tids])
        parts_chunk.append(members)
        parts_tf.append(tfs)
        parts_field.append(np.full(len(members), field_no, np.int64))
    all_term = np.concatenate(parts_term)
    all_chunk = np.concatenate(parts_chunk)
    tf = np.concatenate(parts_tf)
    all_field = np.concatenate(parts_field)
    keys = all_term * max(n, 1) + all_chunk
    uniq, inverse = np.unique(keys, return_inverse=True)
    freqs = np.zeros((3, len(uniq)), dtype=np.int64)
    for f in range(3):
        sel = all_field == f
        freqs[f] = np.bincount(inverse[sel], weights=tf[sel], minlength=len(uniq)).astype(np.int64)
    p_term = uniq // max(n, 1)
    p_chunk = uniq % max(n, 1)
    n_terms = len(vocab)
    counts = np.bincount(p_term, minlength=n_terms).astype(np.int64)
    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    delta = p_chunk.copy()
    same = np.ones(len(p_chunk), dtype=bool)
    same[offsets[:-1][counts > 0]] = False
    delta[1:][same[1:]] = p_chunk[1:][same[1:]] - p_chunk[:-1][same[1:]]
    # Every term's entry: postingCount, then (delta, title, heading, body) per posting, as one varint stream.
    total = n_terms + 4 * len(p_chunk)
    values = np.empty(total, dtype=np.uint32)  # every value is below 2**32: half of int64's memory
    entry_at = np.arange(n_terms, dtype=np.int64) + 4 * offsets[:-1]
    values[entry_at] = counts
    post_at = 1 + 4 * np.arange(len(p_chunk), dtype=np.int64) + np.repeat(np.arange(n_terms, dtype=np.int64), counts)
    values[post_at] = delta
    values[post_at + 1] = freqs[0]
    values[post_at + 2] = freqs[1]
    values[post_at + 3] = freqs[2]
    stream = leb128.encode(values)
    byte_at = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(leb128.sizes(values), out=byte_at[1:])
    entry_start = byte_at[entry_at].tolist()
    entry_end = byte_at[np.append(entry_at[1:], total)].tolist()
    shards: list[bytes] = []
    shard_of = [0] * n_terms
    offset_in = [0] * n_terms
    lo = entry_start[0] if n_terms else 0
    for t in range(n_terms):
        if entry_end[t] - lo > sk.POSTINGS_SHARD_TARGET and entry_start[t] > lo:
            shards.append(stream[lo : entry_start[t]])
            lo = entry_start[t]
        shard_of[t] = len(shards)
        offset_in[t] = entry_start[t] - lo
    if n_terms:
        shards.append(stream[lo:])
    averages = [float(np.float32(field_lengths[f].mean(dtype=np.float64))) if n else 0.0 for f in range(3)]
    out = bytearray(sk.MAGIC_DICTIONARY + struct.pack("<HHB", sk.VERSION, 0, 3))
    out += leb128.encode_one(n)
    out += struct.pack("<3f", *averages)
    out += leb128.encode(field_lengths.reshape(-1))
    out += leb128.encode_one(n_terms)
    small = _SMALL_VARINTS
    records = []
    previous = b""
    df_list = counts.tolist()
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
    out += b"".join(records)
    out += leb128.encode_one(len(shards))
    for shard_bytes in shards:
        out += leb128.encode_one(len(shard_bytes))
    return bytes(out), shards


_SMALL_VARINTS = [leb128.encode_one(v) for v in range(16384)]
"""The encodings of the values below 2**14 (one or two bytes), looked up instead of computed."""


