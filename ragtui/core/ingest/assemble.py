"""The assembly step of the incremental publish: which rows the next generation holds, and their vectors.

Given the documents of the next generation in order, the chunks of those
whose text changed, and the previous generation (when there is one to take
rows from), ``assemble`` lays the next generation out as ``Segment`` runs:
stretches of the previous generation's rows kept as they are, and the new
chunks' records. It counts each document's chunks, finds a stored vector
for every new chunk whose fingerprint the previous generation holds, and
leaves the rest for ``embed_pending``. The splice copies the old runs'
bytes; the full rebuild (``rebuild``) lays its batches out itself.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ragtui.core.code.languages import code_language, grammar
from ragtui.core.embedders.base import Tokenizer
from ragtui.core.index.records import ChunkRecord, fingerprint
from ragtui.core.ingest.chunker import LONG_DOCUMENT_CHARS, Chunk, chunk_text
from ragtui.core.ingest.code_chunks import chunk_code
from ragtui.core.ingest.doc_rows import DocRows
from ragtui.core.ingest.embedding import EMBED_BATCH, JOURNAL_SECONDS, embed_pending
from ragtui.core.ingest.report import Progress, SyncReport

__all__ = [
    "CHUNK_BATCH", "EMBED_BATCH", "JOURNAL_SECONDS", "Assembly", "Previous", "Segment", "assemble", "chunk_all",
    "chunk_docs", "embed_pending", "fingerprint_keys", "records_of", "warn_no_grammar",
]

CHUNK_BATCH = 64
CHUNK_BATCH_CHARS = 1 << 21
"""Characters of documents tokenized in one batch by chunk_all, at most (plus one document)."""

Vectors = npt.NDArray[np.float32]
Rows = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of consecutive rows of the next generation that come from one place.

    ``source`` "old": rows ``lo`` to ``hi - 1`` of the previous generation;
    "new": ``Assembly.records[lo:hi]``. Either way they fill the next
    generation's rows from ``at``.
    """

    source: Literal["old", "new"]
    lo: int
    hi: int
    at: int

    @property
    def n(self) -> int:
        return self.hi - self.lo


@dataclass
class Previous:
    """What the next generation may take from the previous one."""

    rows: Mapping[str, tuple[int, int]]
    """Each document's rows [lo, hi) (documents without chunks absent)."""
    fingerprints: npt.NDArray[np.bytes_]
    """S64: each row's fingerprint as ASCII."""
    vectors: npt.NDArray[np.float32]
    records: Callable[[int, int], Sequence[ChunkRecord]]
    """Rows [lo, hi) as records (parsed on demand)."""
    reusable: bool = True
    """Whether its vectors may be copied: the same embedding model and dimension."""
    keys: npt.NDArray[np.uint64] | None = None
    """``fingerprint_keys(fingerprints)``, once worked out (a long-running writer carries them from save to save)."""

    def fingerprint_keys(self) -> npt.NDArray[np.uint64]:
        if self.keys is None or self.keys.size != self.fingerprints.size:
            self.keys = fingerprint_keys(self.fingerprints)
        return self.keys

    @property
    def n_chunks(self) -> int:
        return int(self.fingerprints.size)


@dataclass
class Assembly:
    """The next generation, laid out; ``vectors`` of the new records are filled except for ``pending``."""

    segments: list[Segment] = field(default_factory=list)
    records: list[ChunkRecord] = field(default_factory=list)
    """The records of the new chunks, in row order."""
    vectors: Vectors = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    pending: dict[str, list[int]] = field(default_factory=dict)
    """Fingerprint -> the positions in ``records`` still without a vector."""
    ids: dict[str, np.ndarray] = field(default_factory=dict)
    """Fingerprint -> the token ids the chunker counted its text from, where it kept them."""
    counts: dict[str, int] = field(default_factory=dict)
    """Each changed document's number of chunks (0 for one that has none now or is gone)."""
    rows: DocRows = field(default_factory=lambda: DocRows([], np.zeros(1, dtype=np.int64)))
    """Each document's rows [lo, hi) in the next generation (documents with chunks only)."""
    row_map: Rows = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """For each row of the previous generation: its row in the next one, or -1."""
    n_rows: int = 0
    chunks_added: int = 0
    """Rows whose fingerprint the previous generation does not hold."""
    chunks_removed: int = 0
    """Rows of the previous generation whose fingerprint the next one no longer holds."""

    def new_rows(self) -> list[int]:
        """The row of each of ``records`` in the next generation."""
        out: list[int] = []
        for seg in self.segments:
            if seg.source == "new":
                out.extend(range(seg.at, seg.at + seg.n))
        return out


def records_of(doc_id: str, chunks: Sequence[Chunk]) -> list[ChunkRecord]:
    return [ChunkRecord(f"{doc_id}#{k}", doc_id, "file", doc_id, ch.text, ch.n_tokens, fingerprint(ch.text))
            for k, ch in enumerate(chunks)]


def assemble(docs: Collection[str], new_chunks: Mapping[str, Sequence[Chunk]], prev: Previous | None, dim: int,
             touched: Collection[str] | None = None) -> Assembly:
    """Lay out the next generation: the documents ``docs``, each from ``new_chunks`` or ``prev``.

    A document in neither (known to the state but without chunks) holds no rows. ``touched``, when the
    caller knows it: every document of ``prev`` that ``docs`` may no longer hold (the rest are still there).
    The work grows with the changed documents (a bisection of the previous ones for each), not with every
    document: the unchanged ones between two changes are one run of old rows.
    """
    asm = Assembly()
    segments, records = asm.segments, asm.records
    fresh: dict[str, list[ChunkRecord]] = {}
    for doc_id, chunks in new_chunks.items():
        doc_records = fresh[doc_id] = records_of(doc_id, chunks)
        for ch, rec in zip(chunks, doc_records):
            if ch.ids is not None:
                asm.ids.setdefault(rec.fingerprint, ch.ids)
    before = DocRows.of_spans(prev.rows) if prev is not None else DocRows([], np.zeros(1, dtype=np.int64))
    if prev is not None and not prev.reusable:
        # Without reusable vectors, the previous generation's rows are taken as new records (to embed again).
        for doc_id, (lo, hi) in zip(before.ids, zip(before.starts[:-1].tolist(), before.starts[1:].tolist())):
            if doc_id in docs and doc_id not in fresh:
                fresh[doc_id] = list(prev.records(lo, hi))
        before = DocRows([], np.zeros(1, dtype=np.int64))
    # The previous documents no longer there (a set difference, in C, when the caller cannot narrow them down).
    gone = sorted(set(before.ids).difference(docs) if touched is None else
                  (d for d in touched if d not in docs and d in before))
    ids, starts = before.ids, before.starts
    n = cursor = 0  # rows laid out; the first old row not yet laid out or left out

    def carry(lo: int, hi: int) -> None:
        nonlocal n
        if hi <= lo:
            return
        last = segments[-1] if segments else None
        if last is not None and last.source == "old" and last.hi == lo and last.at + last.n == n:
            segments[-1] = Segment("old", last.lo, hi, last.at)
        else:
            segments.append(Segment("old", lo, hi, n))
        n += hi - lo

    for doc_id in sorted({*fresh, *gone}):
        i = bisect.bisect_left(ids, doc_id)
        carry(cursor, int(starts[i]))  # the unchanged documents before this one
        cursor = max(cursor, int(starts[i]))
        if i < len(ids) and ids[i] == doc_id:
            cursor = int(starts[i + 1])  # its old rows are left out
        doc_records = fresh.get(doc_id, [])
        asm.counts[doc_id] = len(doc_records)
        if not doc_records:
            continue
        first = len(records)
        records.extend(doc_records)
        last = segments[-1] if segments else None
        if last is not None and last.source == "new":
            segments[-1] = Segment("new", last.lo, len(records), last.at)
        else:
            segments.append(Segment("new", first, len(records), n))
        n += len(doc_records)
    carry(cursor, before.n_rows)
    asm.n_rows = n
    asm.rows = before.replaced(gone, {d: len(r) for d, r in fresh.items()})
    asm.row_map = np.full(prev.n_chunks if prev is not None else 0, -1, dtype=np.int64)
    for seg in segments:
        if seg.source == "old":
            asm.row_map[seg.lo : seg.hi] = np.arange(seg.at, seg.at + seg.n)
    _find_vectors(asm, prev, dim)
    return asm


def _find_vectors(asm: Assembly, prev: Previous | None, dim: int) -> None:
    """Fill each new record's vector from a stored row of the same fingerprint; count what is added and removed."""
    records = asm.records
    asm.vectors = np.zeros((len(records), dim), dtype=np.float32)
    keys = prev.fingerprint_keys() if prev is not None else None
    held = _first_rows(prev.fingerprints, [r.fingerprint.encode("ascii") for r in records], keys) if prev is not None else {}
    added = 0
    for i, rec in enumerate(records):
        src = held.get(rec.fingerprint.encode("ascii"))
        if src is None:
            added += 1
        if src is not None and prev is not None and prev.reusable:
            asm.vectors[i] = prev.vectors[src]
        else:
            asm.pending.setdefault(rec.fingerprint, []).append(i)
    asm.chunks_added = added
    if prev is None:
        return
    dropped = np.flatnonzero(asm.row_map < 0)
    if not dropped.size:
        return
    now = {r.fingerprint.encode("ascii") for r in records}
    gone = [f for f in prev.fingerprints[dropped].tolist() if f not in now]
    if not gone:
        return
    still = _first_rows(prev.fingerprints, gone, keys, among=np.flatnonzero(asm.row_map >= 0))
    asm.chunks_removed = sum(1 for f in gone if f not in still)


_HEX = np.full(256, 0, dtype=np.uint64)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint64)


def fingerprint_keys(fingerprints: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint64]:
    """The first 16 hex digits of each fingerprint as a 64-bit number: equal fingerprints, equal keys."""
    digits = np.ascontiguousarray(fingerprints, dtype="S64").view(np.uint8).reshape(-1, 64)[:, :16]
    keys = np.zeros(digits.shape[0], dtype=np.uint64)
    for j in range(16):
        keys <<= np.uint64(4)
        keys |= _HEX[digits[:, j]]
    return keys


def _first_rows(fingerprints: npt.NDArray[np.bytes_], wanted: list[bytes], keys: npt.NDArray[np.uint64] | None = None,
                among: npt.NDArray[np.intp] | None = None) -> dict[bytes, int]:
    """Each of ``wanted`` (ASCII fingerprints) that ``fingerprints`` holds: the first row holding it.

    By array passes over the rows (a key per row, matched against the wanted keys), then a look at the few
    rows whose key matched: no Python object per row, where a dict or a set of every fingerprint was one
    per chunk of the index at every save. ``keys``: ``fingerprint_keys(fingerprints)``, when the caller
    keeps them; ``among``: only these rows (ascending) are looked at.
    """
    if not wanted or not fingerprints.size:
        return {}
    if keys is None:
        keys = fingerprint_keys(fingerprints)
    wanted_keys = fingerprint_keys(np.array(wanted, dtype="S64"))
    if among is None:
        maybe = np.flatnonzero(np.isin(keys, wanted_keys))
    else:
        maybe = among[np.isin(keys[among], wanted_keys)]
    want = set(wanted)
    rows: dict[bytes, int] = {}
    for row, fp in zip(maybe.tolist(), fingerprints[maybe].tolist()):
        if fp in want and fp not in rows:
            rows[fp] = row
    return rows


def chunk_all(
    new_texts: Mapping[str, str], tokenizer: Tokenizer, max_tokens: int, overlap: int, report: SyncReport, tick: Progress,
    keep_ids: bool = False,
) -> dict[str, list[Chunk]]:
    """Each new document's chunks (with their token ids when ``keep_ids``: ``chunk_text``)."""
    t0 = time.perf_counter()
    no_grammar: dict[str, int] = {}
    new_chunks = chunk_docs(new_texts, tokenizer, max_tokens, overlap, tick, no_grammar, keep_ids)
    tick("chunk", len(new_texts), len(new_texts))
    warn_no_grammar(report, no_grammar)
    report.seconds["chunk"] = time.perf_counter() - t0
    return new_chunks


def warn_no_grammar(report: SyncReport, no_grammar: Mapping[str, int]) -> None:
    """Said once per sync: which source files were cut as plain text, and how to have them cut at definitions."""
    if no_grammar:
        langs = ", ".join(f"{lang} ({n})" for lang, n in sorted(no_grammar.items()))
        report.warnings.append(f"source files cut as plain text, no grammar installed for: {langs}; "
                               "install ragtui[code] to cut them at their definitions (spec/chunker.md, Code)")


def chunk_docs(
    new_texts: Mapping[str, str], tokenizer: Tokenizer, max_tokens: int, overlap: int, tick: Progress,
    no_grammar: dict[str, int], keep_ids: bool = False,
) -> dict[str, list[Chunk]]:
    """``chunk_all`` without the report: the source files cut as plain text are counted into ``no_grammar``."""
    new_chunks: dict[str, list[Chunk]] = {}
    done = 0
    items = list(new_texts.items())
    spans_many = getattr(tokenizer, "spans_many", None)
    # With ids kept, a tokenizer with encode_docs gives each document's ids with its spans, and the
    # chunker takes a window's ids from them where they are provably the window's own.
    found = getattr(tokenizer, "encode_docs", None) if keep_ids else None
    encode_docs: Callable[[list[str]], list[Any]] | None = found if callable(found) else None
    # Batches of at most CHUNK_BATCH documents and about CHUNK_BATCH_CHARS characters (two batches'
    # tokens are held at once); a small first one: the chunker waits for it alone, later ones are
    # tokenized while it works.
    batches: list[list[tuple[str, str]]] = []
    size, limit = 0, CHUNK_BATCH // 8
    for item in items:
        if not batches or len(batches[-1]) >= limit or size >= CHUNK_BATCH_CHARS:
            if batches:
                limit = CHUNK_BATCH
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += min(len(item[1]), LONG_DOCUMENT_CHARS)

    def tokenize(batch: list[tuple[str, str]]) -> tuple[list[Any], list[Any]]:
        # One parallel tokenizer call for a batch of documents, when the tokenizer offers it;
        # a long document is left to chunk_text, which tokenizes it part by part.
        spans: list[Any] = [None] * len(batch)
        tokens: list[Any] = [None] * len(batch)
        short = [i for i, (_, t) in enumerate(batch) if len(t) < LONG_DOCUMENT_CHARS]
        if encode_docs is not None and short:
            for i, doc_tokens in zip(short, encode_docs([batch[i][1] for i in short])):
                tokens[i] = doc_tokens
        elif spans_many and short:
            for i, doc_spans in zip(short, spans_many([batch[i][1] for i in short])):
                spans[i] = doc_spans
        return spans, tokens

    # The next batch is tokenized (in the Rust library, without the GIL) while this one is
    # cut in Python: two batches' tokens are held at most.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragtui-tokenize") as pool:
        ahead = pool.submit(tokenize, batches[0]) if batches else None
        for k, batch in enumerate(batches):
            assert ahead is not None
            spans, tokens = ahead.result()
            ahead = pool.submit(tokenize, batches[k + 1]) if k + 1 < len(batches) else None
            for (doc_id, text), doc_spans, doc_tokens in zip(batch, spans, tokens):
                language = code_language(doc_id)
                if language is not None and grammar(language) is not None:
                    new_chunks[doc_id] = chunk_code(text, language, tokenizer, max_tokens, overlap, spans=doc_spans,
                                                    keep_ids=keep_ids, tokens=doc_tokens)
                else:
                    if language is not None:
                        no_grammar[language] = no_grammar.get(language, 0) + 1
                    new_chunks[doc_id] = chunk_text(text, tokenizer, max_tokens, overlap, spans=doc_spans,
                                                    keep_ids=keep_ids, tokens=doc_tokens)
            del spans, tokens
            done += len(batch)
            tick("chunk", done, len(new_texts))
    return new_chunks
