"""The strict Seekite v2 reader: every rule of spec/seekite-export.md checked, then BM25F queries answered.

``read_export(folder)`` returns an ``Export`` or raises ``IndexFormatError``
naming the file and what is wrong with it (``StorageError`` when a file
cannot be read at all). Nothing is returned half-checked. Every read is
bounded before it is made: each file must be a regular file inside the
export (links that lead out are refused), its size is checked against its
bound from ``fstat``, and every count read from a file is checked against
the bytes left before anything is allocated for it.

``Export.verify_text()`` (``ragtui export --verify``) goes further: it
analyzes each chunk's title, heading and content again and requires the
postings to hold exactly those frequencies.

Over 500 lines on purpose: it is one strict decoder of one format, and each
bound sits beside the read and the allocation it guards; split by file kind,
a check would be read away from the bytes it protects.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import IndexFormatError, StorageError
from ragtui.core.export import seekite as sk
from ragtui.core.index import leb128
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.topk import top_k

__all__ = ["Corpus", "Export", "ExportHit", "read_export"]

MAX_MANIFEST_BYTES = 1 << 20
MAX_FILE_BYTES = 1 << 31
"""Any other file of an export: 2 GiB (a corpus of millions of chunks stays far below)."""
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
_NORM_TOLERANCE = 0.1
"""An i8 row's dequantized norm may be off 1 by this much (quantization moves it by a few %); f32: 1e-3."""


@dataclass(frozen=True)
class ExportHit:
    rank: int
    score: float
    chunk: int
    chunk_id: str
    url: str
    title: str
    heading: str
    content: str


@dataclass
class Corpus:
    """One corpus of an export, checked."""

    name: str
    folder: Path
    n_chunks: int
    documents: list[str]
    ids: list[str]
    document: list[int]
    urls: list[str]
    titles: list[str]
    headings: list[str]
    content_at: list[tuple[int, int]]
    contents: list[list[str]]
    field_lengths: npt.NDArray[np.float64]
    averages: tuple[float, float, float]
    terms: dict[str, int]
    """term -> its number (dictionary order)."""
    df: list[int]
    postings: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64],
                         npt.NDArray[np.float64]]]
    """Per term: (chunks, title tf, heading tf, body tf)."""
    vectors: np.ndarray | None = None
    vector_dtype: str | None = None
    dimensions: int | None = None
    embedding_provider: str | None = None
    content_prefix: str = "content/content-"
    files: dict[str, int] = field(default_factory=dict)
    """Relative path -> size in bytes, for every file read."""

    def content(self, chunk: int) -> str:
        shard, idx = self.content_at[chunk]
        return self.contents[shard][idx]

    def scores(self, query: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(chunks that hold a query term, their BM25F scores), chunks ascending."""
        counts: dict[str, int] = {}
        for t in analyze(query):
            counts[t] = counts.get(t, 0) + 1  # dicts keep first-appearance order, as index.html does
        scores = np.zeros(self.n_chunks, dtype=np.float64)
        touched = np.zeros(self.n_chunks, dtype=bool)
        lengths = (self.field_lengths[0], self.field_lengths[1], self.field_lengths[2])
        for term, count in counts.items():
            number = self.terms.get(term)
            if number is None:
                continue
            chunks, tf0, tf1, tf2 = self.postings[number]
            weight = sk.idf(self.n_chunks, self.df[number]) * count
            contrib = sk.bm25f_contribution(weight, (tf0, tf1, tf2),
                                            (lengths[0][chunks], lengths[1][chunks], lengths[2][chunks]),
                                            self.averages)
            scores[chunks] += contrib
            touched[chunks] = True
        rows = np.flatnonzero(touched).astype(np.int64)
        return rows, scores[rows]

    def search(self, query: str, k: int = 10) -> list[ExportHit]:
        """The best ``k`` chunks by BM25F: descending score, ties by ascending chunk number."""
        rows, scores = self.scores(query)
        best, best_scores = top_k(scores, rows, k)
        return [ExportHit(rank, float(s), int(c), self.ids[c], self.urls[c], self.titles[c], self.headings[c],
                          self.content(int(c)))
                for rank, (c, s) in enumerate(zip(best.tolist(), best_scores.tolist()), 1)]

    def verify_text(self) -> None:
        """Require the postings to be exactly what the analyzer finds in each chunk's three fields.

        A disagreement names the file holding the text (corpus.json for a title or heading, the
        content shard for a body) and says what dictionary.bin and the postings claim.
        """
        names = sorted(self.terms, key=self.terms.__getitem__)
        n = max(self.n_chunks, 1)
        keys: list[int] = []
        counts: list[int] = []
        for c in range(self.n_chunks):
            for f, text in enumerate((self.titles[c], self.headings[c], self.content(c))):
                terms = analyze(text)
                if len(terms) != int(self.field_lengths[f][c]):
                    raise IndexFormatError(self._text_file(c, f), f"chunk {c}'s {sk.FIELDS[f]} has "
                                           f"{len(terms)} terms, but dictionary.bin gives its field "
                                           f"length as {int(self.field_lengths[f][c])}")
                for term, count in Counter(terms).items():
                    t = self.terms.get(term)
                    if t is None:
                        raise IndexFormatError(self._text_file(c, f), f"chunk {c}'s {sk.FIELDS[f]} holds the "
                                               f"term {term!r}, which the dictionary does not have")
                    keys.append((t * n + c) * 3 + f)
                    counts.append(count)
        want_keys = np.asarray(keys, dtype=np.int64)
        order = np.argsort(want_keys, kind="stable")
        want_keys, want = want_keys[order], np.asarray(counts, dtype=np.int64)[order]
        parts_k, parts_v = [], []
        for t in range(len(names)):
            chunks, tf0, tf1, tf2 = self.postings[t]
            for f, tf in enumerate((tf0, tf1, tf2)):
                nz = tf > 0
                parts_k.append((t * n + chunks[nz]) * 3 + f)
                parts_v.append(tf[nz].astype(np.int64))
        got_keys = np.concatenate(parts_k) if parts_k else np.zeros(0, dtype=np.int64)
        got = np.concatenate(parts_v) if parts_v else np.zeros(0, dtype=np.int64)
        order = np.argsort(got_keys, kind="stable")
        got_keys, got = got_keys[order], got[order]
        if np.array_equal(want_keys, got_keys) and np.array_equal(want, got):
            return
        # Name the first disagreement: a (term, chunk, field) only one side has, or a different count.
        size = min(len(want_keys), len(got_keys))
        diff = np.flatnonzero((want_keys[:size] != got_keys[:size]) | (want[:size] != got[:size]))
        i = int(diff[0]) if diff.size else size
        key = min(int(want_keys[i]) if i < len(want_keys) else 1 << 62, int(got_keys[i]) if i < len(got_keys) else 1 << 62)
        t, rest = divmod(key, 3 * n)
        c, f = divmod(rest, 3)
        in_text = int(want[np.searchsorted(want_keys, key)]) if key in set(want_keys[i : i + 1].tolist()) else 0
        in_postings = int(got[np.searchsorted(got_keys, key)]) if key in set(got_keys[i : i + 1].tolist()) else 0
        raise IndexFormatError(self._text_file(c, f), f"chunk {c}'s {sk.FIELDS[f]} holds the term {names[t]!r} "
                               f"{in_text} times, but the postings say {in_postings}")

    def _text_file(self, chunk: int, field: int) -> str:
        if field < 2:
            return str(self.folder / "corpus.json")
        return str(self.folder / sk.content_name(self.content_prefix, self.content_at[chunk][0]))


@dataclass
class Export:
    root: Path
    """The ``search/`` folder."""
    generated_at: str
    corpora: dict[str, Corpus]

    def verify_text(self) -> None:
        for corpus in self.corpora.values():
            corpus.verify_text()

    def search(self, query: str, k: int = 10) -> list[ExportHit]:
        """The first corpus's best ``k`` (ragtui writes one corpus per export)."""
        return next(iter(self.corpora.values())).search(query, k)


# -- files ------------------------------------------------------------------------------------------


def _safe_relative(value: object, where: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise IndexFormatError(where, f"{what} must be a non-empty relative path (got {value!r})")
    parts = value.split("/")
    if value.startswith("/") or "\\" in value or "\0" in value or any(p in ("", ".", "..") for p in parts):
        raise IndexFormatError(where, f"{what} {value!r} is not a plain relative path inside the export")
    return value


def _read(root: Path, real_root: str, rel: str, limit: int) -> bytes:
    """The bytes of ``root/rel``: a regular file whose real path lies inside ``real_root``, at most ``limit``."""
    path = root / rel
    where = str(path)
    try:
        real = os.path.realpath(path)
        if os.path.commonpath([real, real_root]) != real_root:
            raise IndexFormatError(where, "leads outside the export (a link); never read")
        mode = os.stat(real).st_mode
        if not stat.S_ISREG(mode):
            raise IndexFormatError(where, "is not a regular file; never read")
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise IndexFormatError(where, "missing") from None
    except OSError as e:
        raise StorageError(f"cannot read {where}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IndexFormatError(where, "is not a regular file; never read")
        if st.st_size > limit:
            raise IndexFormatError(where, f"is {st.st_size:,} bytes; it may be at most {limit:,}")
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise StorageError(f"cannot read {where}: {e.strerror}") from None
    if len(data) > limit:
        raise IndexFormatError(where, f"is over {limit:,} bytes; it may be at most {limit:,}")
    return data


def _json(raw: bytes, where: str) -> Any:
    try:
        obj = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        # Lone surrogates (\ud800) cannot have come from UTF-8 text.
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError, UnicodeError) as e:
        raise IndexFormatError(where, f"not valid JSON text ({type(e).__name__}: {str(e)[:200]})") from None
    return obj


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _need(obj: Any, key: str, kind: type | tuple[type, ...], where: str, ctx: str = "") -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise IndexFormatError(where, f"missing {ctx}{key}")
    value = obj[key]
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is int)
    if not ok:
        raise IndexFormatError(where, f"{ctx}{key} has the wrong type ({str(value)[:80]!r})")
    return value


def _count(obj: Any, key: str, where: str, ctx: str = "", low: int = 0) -> int:
    value: int = _need(obj, key, int, where, ctx)
    if not low <= value < 1 << 32:
        raise IndexFormatError(where, f"{ctx}{key} is out of range ({value})")
    return value


# -- binary -----------------------------------------------------------------------------------------


class _Cursor:
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.where, self.at = data, where, 0

    def bad(self, problem: str) -> IndexFormatError:
        return IndexFormatError(self.where, f"{problem} (at byte {self.at})")

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.at:
            raise self.bad(f"truncated: {what} needs {n} bytes, {len(self.data) - self.at} left")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def varint(self, what: str) -> int:
        value = 0
        for i in range(5):
            if self.at >= len(self.data):
                raise self.bad(f"truncated varint ({what})")
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                if value >= 1 << 32:
                    raise self.bad(f"varint {what} does not fit in 32 bits")
                return value
        raise self.bad(f"varint {what} is longer than 5 bytes")

    def varints(self, count: int, what: str) -> npt.NDArray[np.uint64]:
        if count > len(self.data) - self.at:
            raise self.bad(f"truncated: {count:,} varints of {what} need at least {count:,} bytes")
        if count == 0:
            return np.zeros(0, dtype=np.uint64)
        buf = np.frombuffer(self.data, dtype=np.uint8, offset=self.at)
        ends = np.flatnonzero((buf & 0x80) == 0)
        if ends.size < count:
            raise self.bad(f"truncated varints ({what})")
        stop = int(ends[count - 1]) + 1
        try:
            values = leb128.decode(buf[:stop], expected=count)
        except leb128.VarintError as e:
            raise self.bad(f"{what}: {e}") from None
        self.at += stop
        return values


def _vectors(raw: bytes, where: str, dtype: str, dim: int, n: int) -> np.ndarray:
    cur = _Cursor(raw, where)
    if cur.take(4, "magic") != sk.MAGIC_VECTORS:
        raise IndexFormatError(where, "unknown magic (expected SKVX)")
    version, code, reserved, dims, rows = struct.unpack("<HBBII", cur.take(12, "header"))
    if version != sk.VERSION:
        raise IndexFormatError(where, f"unknown version {version} (expected {sk.VERSION})")
    if code not in (0, 1) or code != sk.DTYPES[dtype]:
        raise IndexFormatError(where, f"dtype {code} does not match the manifest's {dtype!r}")
    if reserved != 0:
        raise IndexFormatError(where, f"reserved byte is {reserved}, not 0")
    if dims != dim or rows != n:
        raise IndexFormatError(where, f"holds {rows} rows of {dims}, but the manifest says {n} chunks of {dim}")
    payload = n * dim * 4 if code == 0 else n * 4 + n * dim
    if len(raw) - 16 != payload:
        raise IndexFormatError(where, f"payload is {len(raw) - 16} bytes, {n} rows of {dim} {dtype} need {payload}")
    with np.errstate(all="ignore"):
        if code == 0:
            v = np.frombuffer(raw, dtype="<f4", offset=16).reshape(n, dim).astype(np.float32)
            tol = 1e-3
        else:
            scales = np.frombuffer(raw, dtype="<f4", offset=16, count=n)
            if not (np.isfinite(scales).all() and (scales > 0).all()):
                raise IndexFormatError(where, "a row scale is not a finite positive number")
            codes = np.frombuffer(raw, dtype=np.int8, offset=16 + 4 * n).reshape(n, dim)
            v = (codes.astype(np.float32) * scales[:, None]).astype(np.float32)
            tol = _NORM_TOLERANCE
        norms = np.sqrt(np.einsum("ij,ij->i", v.astype(np.float64), v.astype(np.float64))) if n else np.ones(0)
    bad = np.flatnonzero(~(np.abs(norms - 1.0) <= tol))
    if bad.size:
        raise IndexFormatError(where, f"row {int(bad[0])} is not a unit vector (norm {float(norms[bad[0]]):.6g})")
    return v


def _dictionary(raw: bytes, where: str, n: int, shards_declared: int) -> tuple[
        npt.NDArray[np.float64], tuple[float, float, float], list[str], list[tuple[int, int, int]], list[int]]:
    cur = _Cursor(raw, where)
    if cur.take(4, "magic") != sk.MAGIC_DICTIONARY:
        raise IndexFormatError(where, "unknown magic (expected SKDX)")
    version, flags, fields = struct.unpack("<HHB", cur.take(5, "header"))
    if version != sk.VERSION:
        raise IndexFormatError(where, f"unknown version {version} (expected {sk.VERSION})")
    if flags != 0:
        raise IndexFormatError(where, f"flags are {flags}, not 0")
    if fields != 3:
        raise IndexFormatError(where, f"field count is {fields}, not 3 (title, heading, body)")
    chunk_count = cur.varint("chunkCount")
    if chunk_count != n:
        raise IndexFormatError(where, f"chunkCount is {chunk_count}, but the manifest says {n} chunks")
    averages = struct.unpack("<3f", cur.take(12, "averageFieldLength"))
    lengths = cur.varints(3 * n, "fieldLengths").astype(np.float64).reshape(3, n)
    for f in range(3):
        mean = float(lengths[f].mean()) if n else 0.0
        avg = averages[f]
        if not math.isfinite(avg) or abs(avg - mean) > 1e-6 * max(1.0, mean):
            raise IndexFormatError(where, f"averageFieldLength of {sk.FIELDS[f]} is {avg!r}, "
                                          f"but its field lengths average {mean:.6g}")
    term_count = cur.varint("termCount")
    if term_count > len(raw) - cur.at:
        raise cur.bad(f"termCount {term_count:,} is more than the bytes left can hold")
    terms: list[str] = []
    entries: list[tuple[int, int, int]] = []
    previous = b""
    for t in range(term_count):
        shared = cur.varint("sharedPrefixBytes")
        if shared > len(previous):
            raise cur.bad(f"term {t} shares {shared} bytes with a previous term of {len(previous)}")
        suffix = cur.take(cur.varint("suffixBytes"), "suffix")
        term = previous[:shared] + suffix
        if t and term <= previous:
            raise cur.bad(f"term {t} is not after the term before it (terms are strictly sorted)")
        if not term:
            raise cur.bad(f"term {t} is empty")
        try:
            text = term.decode("utf-8")
        except UnicodeDecodeError:
            raise cur.bad(f"term {t} is not UTF-8") from None
        df = cur.varint("documentFrequency")
        if not 1 <= df <= n:
            raise cur.bad(f"term {text!r} has documentFrequency {df}, outside 1..{n}")
        entries.append((df, cur.varint("postingsShard"), cur.varint("postingsOffset")))
        terms.append(text)
        previous = term
    shard_count = cur.varint("shardCount")
    if shard_count != shards_declared:
        raise IndexFormatError(where, f"shardCount is {shard_count}, but the manifest says {shards_declared}")
    if shard_count > len(raw) - cur.at:
        raise cur.bad("truncated shardByteLengths")
    shard_lengths = [cur.varint("shardByteLengths") for _ in range(shard_count)]
    if cur.at != len(raw):
        raise cur.bad(f"{len(raw) - cur.at} bytes after the last field")
    for t, (_, shard, offset) in enumerate(entries):
        if shard >= shard_count:
            raise IndexFormatError(where, f"term {terms[t]!r} points at postings shard {shard} of {shard_count}")
        if offset >= shard_lengths[shard]:
            raise IndexFormatError(where, f"term {terms[t]!r} points at byte {offset} of a "
                                          f"{shard_lengths[shard]}-byte shard")
    return lengths, (float(averages[0]), float(averages[1]), float(averages[2])), terms, entries, shard_lengths


def _postings(raw: bytes, where: str, n: int, terms: list[str], entries: list[tuple[int, int, int]],
              mine: list[int], out: list[Any]) -> None:
    """Decode shard ``raw``: the entries of the terms ``mine`` must tile it, in order of their offsets.

    The shard is one stream of varints, decoded at once; each entry is then a
    slice of it (postingCount, then four values per posting).
    """
    mine = sorted(mine, key=lambda t: entries[t][2])
    buf = np.frombuffer(raw, dtype=np.uint8)
    try:
        values = leb128.decode(buf).astype(np.int64)
    except leb128.VarintError as e:
        raise IndexFormatError(where, str(e)) from None
    ends = np.flatnonzero((buf & 0x80) == 0)
    starts = np.zeros(len(ends) + 1, dtype=np.int64)
    starts[1:] = ends + 1  # byte offset of each value; the last entry is the end of the shard
    heads = np.empty(len(mine), dtype=np.int64)
    vi = 0
    for i, t in enumerate(mine):
        df, _, offset = entries[t]
        at = int(starts[vi])
        if at != offset:
            what = "overlaps the entry before it" if offset < at else f"leaves bytes {at}..{offset} unused"
            raise IndexFormatError(where, f"the entry of term {terms[t]!r} at byte {offset} {what}")
        if vi >= len(values):
            raise IndexFormatError(where, f"truncated: no postingCount for term {terms[t]!r} at byte {offset}")
        count = int(values[vi])
        if count != df:
            raise IndexFormatError(where, f"term {terms[t]!r} has {count} postings, but its documentFrequency "
                                          f"is {df} (at byte {offset})")
        if vi + 1 + 4 * count > len(values):
            raise IndexFormatError(where, f"truncated: the postings of term {terms[t]!r} run past the end")
        heads[i] = vi
        vi += 1 + 4 * count
    if vi != len(values):
        raise IndexFormatError(where, f"{len(raw) - int(starts[vi])} bytes after the last entry")
    keep = np.ones(len(values), dtype=bool)
    keep[heads] = False
    postings = values[keep].reshape(-1, 4)
    counts = values[heads]
    first = np.zeros(len(mine) + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    total = np.cumsum(postings[:, 0])
    base = np.repeat(total[first[:-1] - 1] * (first[:-1] > 0), counts) if len(postings) else total
    chunks = total - base
    owner = np.repeat(np.arange(len(mine)), counts)
    later = np.ones(len(postings), dtype=bool)
    later[first[:-1][counts > 0]] = False
    bad = np.flatnonzero(later & (postings[:, 0] == 0))
    if bad.size:
        raise IndexFormatError(where, f"term {terms[mine[owner[bad[0]]]]!r}: chunk indices do not ascend "
                                      "(a delta of 0)")
    bad = np.flatnonzero(chunks >= n)
    if bad.size:
        raise IndexFormatError(where, f"term {terms[mine[owner[bad[0]]]]!r}: chunk index {int(chunks[bad[0]])} "
                                      f"is not below chunkCount {n}")
    bad = np.flatnonzero(postings[:, 1:].sum(axis=1) == 0)
    if bad.size:
        raise IndexFormatError(where, f"term {terms[mine[owner[bad[0]]]]!r}: a posting with every field "
                                      "frequency 0")
    tf = postings[:, 1:].astype(np.float64)
    for i, t in enumerate(mine):
        lo, hi = int(first[i]), int(first[i + 1])
        out[t] = (chunks[lo:hi], tf[lo:hi, 0], tf[lo:hi, 1], tf[lo:hi, 2])


def _strings(value: object, n: int, where: str, what: str) -> list[str]:
    if not isinstance(value, list) or len(value) != n or not all(isinstance(s, str) for s in value):
        raise IndexFormatError(where, f"{what} must be a list of {n} strings")
    return value


def _corpus(root: Path, real_root: str, key: str, entry: Any, where_m: str) -> Corpus:
    ctx = f"corpora.{key}."
    if not isinstance(entry, dict):
        raise IndexFormatError(where_m, f"corpora.{key} is not an object")
    name = _need(entry, "name", str, where_m, ctx)
    if name != key:
        raise IndexFormatError(where_m, f"{ctx}name {name!r} is not its key")
    folder_rel = _safe_relative(_need(entry, "path", str, where_m, ctx), where_m, ctx + "path")
    n = _count(entry, "chunks", where_m, ctx)
    if _need(entry, "format", int, where_m, ctx) != sk.VERSION:
        raise IndexFormatError(where_m, f"{ctx}format is not {sk.VERSION}")
    folder = root / folder_rel
    corpus_rel = _safe_relative(_need(entry, "corpus", str, where_m, ctx), where_m, ctx + "corpus")
    lexical = _need(entry, "lexical", dict, where_m, ctx)
    dict_rel = _safe_relative(_need(lexical, "dictionary", str, where_m, ctx + "lexical."), where_m, "dictionary")
    n_shards = _count(lexical, "shards", where_m, ctx + "lexical.")
    content = _need(entry, "content", dict, where_m, ctx)
    prefix = _safe_relative(_need(content, "prefix", str, where_m, ctx + "content.") + "x", where_m, "prefix")[:-1]
    n_content = _count(content, "shards", where_m, ctx + "content.", low=1)
    analyzer = _need(entry, "analyzer", dict, where_m, ctx)
    if analyzer.get("folding") is not True or "stemmer" not in analyzer or analyzer["stemmer"] is not None:
        raise IndexFormatError(where_m, f"{ctx}analyzer {analyzer!r} is not supported "
                                        "(this reader has the folding analyzer without a stemmer)")
    embedding = entry.get("embedding")
    dim = provider = None
    if embedding is not None:
        provider = _need(embedding, "provider", str, where_m, ctx + "embedding.")
        dim = _count(embedding, "dimensions", where_m, ctx + "embedding.", low=1)
        _need(embedding, "mode", str, where_m, ctx + "embedding.")
    vec_entry = entry.get("vectors")
    files: dict[str, int] = {}

    def read(rel: str, limit: int = MAX_FILE_BYTES) -> bytes:
        data = _read(root, real_root, f"{folder_rel}/{rel}", limit)
        files[f"{folder_rel}/{rel}"] = len(data)
        return data

    # corpus.json
    where_c = str(folder / corpus_rel)
    corpus = _json(read(corpus_rel), where_c)
    if not isinstance(corpus, dict):
        raise IndexFormatError(where_c, "is not a JSON object")
    if _need(corpus, "version", int, where_c) != sk.VERSION:
        raise IndexFormatError(where_c, f"version is not {sk.VERSION}")
    if _need(corpus, "name", str, where_c) != name:
        raise IndexFormatError(where_c, f"name is not the manifest's {name!r}")
    documents = _need(corpus, "documents", list, where_c)
    if not all(isinstance(d, str) for d in documents) or len(set(documents)) != len(documents):
        raise IndexFormatError(where_c, "documents must be unique strings")
    chunks = _need(corpus, "chunks", dict, where_c)
    ids = _strings(chunks.get("id"), n, where_c, "chunks.id")
    if len(set(ids)) != n:
        raise IndexFormatError(where_c, "chunks.id holds the same id twice")
    document = chunks.get("document")
    if (not isinstance(document, list) or len(document) != n
            or not all(type(d) is int and 0 <= d < len(documents) for d in document)):
        raise IndexFormatError(where_c, f"chunks.document must be {n} indexes into documents")
    urls = _strings(chunks.get("url"), n, where_c, "chunks.url")
    titles = _strings(chunks.get("title"), n, where_c, "chunks.title")
    headings = _strings(chunks.get("heading"), n, where_c, "chunks.heading")
    content_at_raw = chunks.get("content")
    if (not isinstance(content_at_raw, list) or len(content_at_raw) != n
            or not all(isinstance(p, list) and len(p) == 2 and all(type(x) is int and x >= 0 for x in p)
                       for p in content_at_raw)):
        raise IndexFormatError(where_c, f"chunks.content must be {n} pairs [shardIndex, indexInShard]")
    content_at = [(p[0], p[1]) for p in content_at_raw]
    filters = chunks.get("filters", {})
    facets = corpus.get("facets", {})
    if not isinstance(filters, dict) or not isinstance(facets, dict) or set(filters) != set(facets):
        raise IndexFormatError(where_c, "chunks.filters and facets must be objects declaring the same fields")
    for fname, column in filters.items():
        if (not isinstance(column, list) or len(column) != n
                or not all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in column)):
            raise IndexFormatError(where_c, f"chunks.filters.{fname} must be {n} lists of strings")
        tally = Counter(s for v in column for s in set(v))
        if not isinstance(facets[fname], dict) or facets[fname] != dict(tally):
            raise IndexFormatError(where_c, f"facets.{fname} does not count chunks.filters.{fname}")
    extra = set(chunks) - {"id", "document", "url", "title", "heading", "content", "filters"}
    if extra:
        raise IndexFormatError(where_c, f"chunks has a column the format does not define: {sorted(extra)[0]!r}")

    # content shards
    contents: list[list[str]] = []
    for s in range(n_content):
        rel = sk.content_name(prefix, s)
        where_s = str(folder / rel)
        shard = _json(read(rel), where_s)
        if not isinstance(shard, dict) or shard.get("version") != sk.VERSION or type(shard.get("version")) is not int:
            raise IndexFormatError(where_s, f"is not an object with version {sk.VERSION}")
        items = shard.get("chunks")
        if not isinstance(items, list):
            raise IndexFormatError(where_s, "chunks is not a list")
        texts = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise IndexFormatError(where_s, f"chunk {i} has no content string")
            if not isinstance(item.get("metadata"), dict):
                raise IndexFormatError(where_s, f"chunk {i} has no metadata object")
            texts.append(item["content"])
        contents.append(texts)
    seen = set()
    for c, (s, i) in enumerate(content_at):
        if s >= n_content or i >= len(contents[s]):
            raise IndexFormatError(where_c, f"chunk {c}'s content [{s}, {i}] is outside the content shards")
        seen.add((s, i))
    if len(seen) != n or sum(len(t) for t in contents) != n:
        raise IndexFormatError(where_c, "chunks.content must name every content entry exactly once")

    # lexical
    where_d = str(folder / dict_rel)
    lengths, averages, terms, entries, shard_lengths = _dictionary(read(dict_rel), where_d, n, n_shards)
    by_shard: list[list[int]] = [[] for _ in range(n_shards)]
    for t, (_, shard, _) in enumerate(entries):
        by_shard[shard].append(t)
    postings: list[Any] = [None] * len(terms)
    for s in range(n_shards):
        rel = sk.postings_name(s)
        raw = read(rel, shard_lengths[s])
        where_p = str(folder / rel)
        if len(raw) != shard_lengths[s]:
            raise IndexFormatError(where_p, f"is {len(raw)} bytes, but the dictionary says {shard_lengths[s]}")
        _postings(raw, where_p, n, terms, entries, by_shard[s], postings)
    sums = np.zeros((3, n), dtype=np.float64)
    for chunks_t, tf0, tf1, tf2 in postings:
        sums[0][chunks_t] += tf0
        sums[1][chunks_t] += tf1
        sums[2][chunks_t] += tf2
    mismatch = np.argwhere(sums != lengths)
    if mismatch.size:
        f, c = (int(x) for x in mismatch[0])
        raise IndexFormatError(where_d, f"chunk {c}'s {sk.FIELDS[f]} length is {int(lengths[f][c])}, but its "
                                        f"postings add up to {int(sums[f][c])}")

    # vectors
    vectors = dtype = None
    if vec_entry is not None:
        vec_rel = _safe_relative(_need(vec_entry, "file", str, where_m, ctx + "vectors."), where_m, "vectors.file")
        dtype = _need(vec_entry, "dtype", str, where_m, ctx + "vectors.")
        if dtype not in sk.DTYPES:
            raise IndexFormatError(where_m, f"{ctx}vectors.dtype {dtype!r} is not f32 or i8")
        if dim is None:
            raise IndexFormatError(where_m, f"{ctx}vectors is present without embedding.dimensions")
        vectors = _vectors(read(vec_rel), str(folder / vec_rel), dtype, dim, n)
    return Corpus(name, folder, n, documents, ids, document, urls, titles, headings, content_at, contents, lengths,
                  averages, {t: i for i, t in enumerate(terms)}, [e[0] for e in entries], postings, vectors, dtype,
                  dim, provider, prefix, files)


def read_export(folder: str | os.PathLike[str]) -> Export:
    """Read and check the export at ``folder`` (the folder holding ``search/``, or ``search/`` itself)."""
    base = Path(folder)
    root = base / "search" if (base / "search").is_dir() else base
    where_m = str(root / "manifest.json")
    try:
        real_root = os.path.realpath(root)
    except OSError as e:
        raise StorageError(f"cannot resolve {root}: {e.strerror}") from None
    if not os.path.isdir(real_root):
        raise IndexFormatError(root, "is not a folder holding a Seekite export (no search/manifest.json)")
    manifest = _json(_read(root, real_root, "manifest.json", MAX_MANIFEST_BYTES), where_m)
    if not isinstance(manifest, dict):
        raise IndexFormatError(where_m, "is not a JSON object")
    if manifest.get("format") != "seekite":
        raise IndexFormatError(where_m, f"format is {manifest.get('format')!r}, not 'seekite'")
    version = manifest.get("version")
    if type(version) is not int or version != sk.VERSION:
        raise IndexFormatError(where_m, f"unknown version {version!r} (this reader reads version {sk.VERSION})")
    generated = _need(manifest, "generatedAt", str, where_m)
    if not _RFC3339.match(generated):
        raise IndexFormatError(where_m, f"generatedAt {generated[:40]!r} is not an RFC 3339 UTC time")
    corpora = _need(manifest, "corpora", dict, where_m)
    if not corpora:
        raise IndexFormatError(where_m, "corpora is empty")
    paths = [c.get("path") if isinstance(c, dict) else None for c in corpora.values()]
    if len(set(map(str, paths))) != len(paths):
        raise IndexFormatError(where_m, "two corpora share a path")
    return Export(root, generated, {key: _corpus(root, real_root, key, entry, where_m)
                                    for key, entry in corpora.items()})
