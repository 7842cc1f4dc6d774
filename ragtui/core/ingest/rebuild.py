"""The full rebuild, streamed: the next generation made and written a batch of documents at a time.

The documents are taken in index order, in batches of at most
``TEXT_BATCH`` characters of new text, ``ROWS_BATCH`` rows taken from the
previous generation and ``DOCS_BATCH`` documents (each bound passed by one
document at most). A batch is chunked and its records laid out; then,
``VECTOR_BYTES`` of vectors at a time, their vectors are found (the previous
generation's row of the same fingerprint, a row this run embedded in an
earlier batch, read back from the new vectors.f32, the embed journal, else
the embedder), their docs.jsonl lines and vectors.f32 rows appended to the
new generation's files (``streamed.StreamedFile`` over
``NewGeneration.stream``) and their terms to the BM25 postings
(``PostingsBuilder``, which spills each batch's postings to a nameless file
in the writer's state folder); then the batch is dropped. Each document's
text is dropped from ``new_texts`` once it is chunked (the scan kept the
texts past a bound in a file, ``texts.Texts``). What stays from batch to
batch grows by a few bytes a chunk: each term's count, each docs.jsonl
line's end, the fingerprints embedded (for embedding each text once) and
each document's number of rows. Once every chunk is in, the postings are
laid out (6 bytes a posting), bm25.idx is encoded and written a piece of
whole terms at a time, and the readers' decoded arrays are written into
their cache entry a block at a time and mapped from it. The files are byte
for byte what encoding the whole index at once gives.

When the published generation is to be compared with (the writer's state
was lost: the documents may all be as indexed), the three streamed files are
compared with its files instead of written, and the new generation is
created only at the first difference, its bytes up to there copied from the
published file: a rebuild that comes to the same bytes writes nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragtui.core.embedders.base import Embedder
from ragtui.core.index.analyzer import analyze
from ragtui.core.index.arraycache import StreamedEntry
from ragtui.core.index.bm25 import BM25Index, Postings
from ragtui.core.index.bm25_write import PostingsBuilder, encode_pieces
from ragtui.core.index.index_format import BM25, DOCS, META, VECTORS
from ragtui.core.index.records import ChunkRecord, IndexMeta, encode_docs, encode_meta, encode_vectors
from ragtui.core.ingest import derive
from ragtui.core.ingest.assemble import Assembly, Previous, chunk_docs, records_of, warn_no_grammar
from ragtui.core.ingest.embedding import EmbedRun
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.publish import NewGeneration, state_dir
from ragtui.core.ingest.report import Progress, SyncReport
from ragtui.core.ingest.streamed import StreamedFile, give_back, same_meta
from ragtui.core.ingest.texts import Texts

__all__ = ["ROWS_BATCH", "TEXT_BATCH", "Rebuilt", "rebuild"]

TEXT_BATCH = 1 << 22
"""Characters of new documents' text chunked, embedded and written at a time, at most (plus one document)."""
ROWS_BATCH = 4096
"""Rows of the previous generation carried into the next one at a time, at most (plus one document)."""
DOCS_BATCH = 4096
"""Documents taken at a time, at most (most have no rows to carry or are short)."""
VECTOR_BYTES = 1 << 22
"""Bytes of vectors found or embedded and written at a time, at most (at least one row)."""
BM25_STEP = 1 << 20
"""Postings of bm25.idx encoded and written, and of the readers' decoded arrays written, at a time (about)."""


@dataclass
class Rebuilt:
    """What a full rebuild made."""

    counts: dict[str, int] = field(default_factory=dict)
    """Every document's number of chunks (0 for one that has none)."""
    n_rows: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    published: bool = False
    bytes_written: int = 0
    derived: derive.Derivation | None = None


@dataclass(frozen=True)
class Plan:
    """What the rebuild is asked to make, and from what."""

    artifacts: Path
    index_id: str
    cache_dir: Path
    order: Sequence[str]
    """Every document of the next generation, in index order."""
    new_texts: MutableMapping[str, str]
    """The text of each document to chunk (``Texts``: past a bound, in a file); each is removed once chunked."""
    prev: Previous | None
    embedder: Embedder
    max_tokens: int
    overlap: int
    keep_ids: bool
    k1: float
    b: float
    meta: Callable[[int], IndexMeta]
    """meta.json for a number of chunks."""
    compare: Path | None = None
    """The published generation to compare with: nothing is written if the result is its bytes."""
    derive_all: bool = False
    """Make every derived entry of the generation (``derive.Derivation.everything``)."""


def rebuild(plan: Plan, journal: EmbedJournal, report: SyncReport, tick: Progress) -> Rebuilt:
    """Make and (unless it equals ``plan.compare``) publish the next generation; see the module docstring.

    Raises what chunking, embedding or writing raises; the previous
    generation then stays current and the new one is deleted.
    """
    with ExitStack() as stack:
        gen: list[NewGeneration] = []

        def start() -> NewGeneration:
            if not gen:
                gen.append(stack.enter_context(NewGeneration(plan.artifacts, plan.index_id)))
            return gen[0]

        docs = stack.enter_context(StreamedFile(DOCS, plan.compare, start))
        vectors = stack.enter_context(StreamedFile(VECTORS, plan.compare, start))
        reader = journal.reader()
        stack.callback(reader.close)
        # The batches' postings go to a file in the writer's state folder (removed with the builder), not memory.
        spill = state_dir(plan.artifacts, plan.index_id)
        spill.mkdir(parents=True, exist_ok=True)
        postings = PostingsBuilder(spill=spill)
        stack.callback(postings.close)
        run = _Run(plan, EmbedRun(plan.embedder, journal, tick, lookup=reader), docs, vectors, postings, report, tick)
        for batch in _batches(plan.order, plan.new_texts, plan.prev):
            run.batch(batch)
        return run.finish(start, stack)


def _batches(order: Sequence[str], new_texts: Mapping[str, str], prev: Previous | None) -> Iterator[list[str]]:
    """``order`` cut into batches of at most ``TEXT_BATCH`` characters of new text, ``ROWS_BATCH`` old rows and
    ``DOCS_BATCH`` documents (each bound passed by one document at most)."""
    old_rows = prev.rows if prev is not None else {}
    # Texts kept in a file are measured without being read back.
    size = new_texts.chars if isinstance(new_texts, Texts) else lambda d: len(new_texts[d])
    batch: list[str] = []
    chars = rows = 0
    for doc_id in order:
        batch.append(doc_id)
        if doc_id in new_texts:
            chars += size(doc_id)
        else:
            span = old_rows.get(doc_id)
            if span is not None:
                rows += span[1] - span[0]
        if chars >= TEXT_BATCH or rows >= ROWS_BATCH or len(batch) >= DOCS_BATCH:
            yield batch
            batch, chars, rows = [], 0, 0
    if batch:
        yield batch


class Digests:
    """SHA-256 digests, each with a row: what a dict of them holds in 40 bytes an entry instead of about 150.

    Kept as sorted runs of digests (``S32``) and their rows, looked up with
    ``searchsorted``; a run is merged with the one before it once that one is
    at most twice its size, so there are a logarithmic number of runs and
    each entry is merged a logarithmic number of times.
    """

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(keys.size for keys, _ in self._runs)

    def find(self, digests: np.ndarray) -> np.ndarray:
        """The row of each of ``digests`` (``S32``), or -1 where it was not added."""
        out = np.full(digests.size, -1, dtype=np.int64)
        for keys, rows in self._runs:
            if not digests.size:
                break
            at = np.minimum(np.searchsorted(keys, digests), keys.size - 1)
            hit = keys[at] == digests
            out[hit] = rows[at[hit]]
        return out

    def add(self, digests: np.ndarray, rows: np.ndarray) -> None:
        """Add ``digests`` (``S32``, none of them added before, each once) with their ``rows``."""
        if not digests.size:
            return
        order = np.argsort(digests)
        self._runs.append((digests[order], rows[order]))
        while len(self._runs) > 1 and self._runs[-2][0].size <= 2 * self._runs[-1][0].size:
            (k2, r2), (k1, r1) = self._runs.pop(), self._runs.pop()
            keys, rows = np.concatenate((k1, k2)), np.concatenate((r1, r2))
            order = np.argsort(keys)
            self._runs.append((keys[order], rows[order]))


class _Run:
    """The state kept from batch to batch (see the module docstring for what it holds)."""

    def __init__(self, plan: Plan, embed: EmbedRun, docs: StreamedFile, vectors: StreamedFile, postings: PostingsBuilder,
                 report: SyncReport, tick: Progress) -> None:
        self.plan, self.embed, self.docs, self.vectors, self.report, self.tick = plan, embed, docs, vectors, report, tick
        self.out = Rebuilt()
        self.dim = plan.embedder.dim
        self.postings = postings
        self.ends: list[np.ndarray] = []
        """The offset of each docs.jsonl line's newline, a batch at a time."""
        self.sizes: list[int] = []
        """Each document's number of rows (documents with rows only), in index order."""
        self.embedded = Digests()
        """The SHA-256 of each text embedded so far -> its first row."""
        self.no_grammar: dict[str, int] = {}
        self.chunked = 0
        self.n_new = len(plan.new_texts)
        self.seconds = {"chunk": 0.0, "analyze": 0.0, "write": 0.0}
        prev = plan.prev
        self.first: dict[bytes, int] = {}
        """The previous generation's first row of each fingerprint (ASCII)."""
        self.first_of = np.zeros(0, dtype=np.int64)
        self.present = np.zeros(0, dtype=bool)
        """Per previous row: whether the next generation holds its fingerprint (marked at its first row)."""
        if prev is not None and prev.n_chunks:
            fps = prev.fingerprints
            n = prev.n_chunks
            self.first = dict(zip(fps[::-1].tolist(), range(n - 1, -1, -1)))
            self.first_of = np.fromiter(map(self.first.__getitem__, fps.tolist()), dtype=np.int64, count=n)
            self.present = np.zeros(n, dtype=bool)

    def _chunk_tick(self, stage: str, done: int, total: int) -> None:
        self.tick(stage, self.chunked + done, self.n_new)

    def batch(self, doc_ids: list[str]) -> None:
        plan, prev, out = self.plan, self.plan.prev, self.out
        t0 = time.perf_counter()
        texts = {d: plan.new_texts.pop(d) for d in doc_ids if d in plan.new_texts}
        chunks = chunk_docs(texts, plan.embedder.tokenizer, plan.max_tokens, plan.overlap, self._chunk_tick,
                            self.no_grammar, plan.keep_ids)
        self.chunked += len(texts)
        del texts
        self.seconds["chunk"] += time.perf_counter() - t0

        records: list[ChunkRecord] = []
        ids: dict[str, np.ndarray] = {}
        carried: list[tuple[int, int, int]] = []  # (position in records, previous rows lo, hi) kept with their vectors
        for doc_id in doc_ids:
            doc_chunks = chunks.pop(doc_id, None)
            if doc_chunks is not None:
                recs = records_of(doc_id, doc_chunks)
                for ch, rec in zip(doc_chunks, recs):
                    if ch.ids is not None:
                        ids.setdefault(rec.fingerprint, ch.ids)
            elif prev is not None and doc_id in prev.rows:
                lo, hi = prev.rows[doc_id]
                recs = list(prev.records(lo, hi))
                if prev.reusable:
                    carried.append((len(records), lo, hi))
            else:
                out.counts[doc_id] = 0
                continue
            out.counts[doc_id] = len(recs)
            if recs:
                self.sizes.append(len(recs))
                records.extend(recs)
        del chunks
        src = np.full(len(records), -1, dtype=np.int64)  # the previous row whose vector a record keeps, or -1
        for at, lo, hi in carried:
            src[at : at + hi - lo] = np.arange(lo, hi)
        # The vectors are made and written VECTOR_BYTES at a time, whatever the dimension.
        step = max(1, VECTOR_BYTES // (4 * self.dim))
        for lo in range(0, len(records), step):
            self._rows(records[lo : lo + step], src[lo : lo + step], ids)

    def _rows(self, records: list[ChunkRecord], src: np.ndarray, ids: Mapping[str, np.ndarray]) -> None:
        """Find or embed the vectors of ``records`` (the next rows), and write them."""
        prev, out = self.plan.prev, self.out
        base = out.n_rows
        asm = Assembly(records=records)
        asm.vectors = vectors = np.zeros((len(records), self.dim), dtype=np.float32)
        carried = src >= 0
        if prev is not None and carried.any():
            vectors[carried] = prev.vectors[src[carried]]
            self.present[self.first_of[src[carried]]] = True
        again: list[tuple[int, int]] = []  # (position, row of the next generation already holding its vector)
        reuse = prev is not None and prev.reusable
        looked = np.flatnonzero(~carried)
        done_rows = self.embedded.find(np.array([bytes.fromhex(records[i].fingerprint) for i in looked.tolist()],
                                                dtype="S32"))
        for i, row in zip(looked.tolist(), done_rows.tolist()):
            fp = records[i].fingerprint
            src_row = self.first.get(fp.encode("ascii"))
            if src_row is None:
                out.chunks_added += 1
            else:
                self.present[src_row] = True
                if reuse:
                    vectors[i] = prev.vectors[src_row]  # type: ignore[union-attr]
                    continue
            if row >= 0:
                again.append((i, row))
            else:
                asm.pending.setdefault(fp, []).append(i)
        fresh = {fp: rows[0] for fp, rows in asm.pending.items()}
        asm.ids = {fp: ids[fp] for fp in fresh if fp in ids}
        self.embed.embed(asm)
        self.embedded.add(np.array([bytes.fromhex(fp) for fp in fresh], dtype="S32"),
                          np.fromiter(fresh.values(), dtype=np.int64, count=len(fresh)) + base)
        row_bytes = 4 * self.dim
        for i, row in again:
            vectors[i] = np.frombuffer(self.vectors.read_back(row * row_bytes, row_bytes), dtype="<f4")

        t0 = time.perf_counter()
        lines = encode_docs(records)
        self.ends.append(np.flatnonzero(np.frombuffer(lines, dtype=np.uint8) == 10) + self.docs.size)
        self.docs.write(lines)
        del lines
        self.vectors.write(encode_vectors(vectors))
        t1 = time.perf_counter()
        self.seconds["write"] += t1 - t0
        self.postings.add(analyze(r.text) for r in records)
        self.seconds["analyze"] += time.perf_counter() - t1
        out.n_rows += len(records)

    def finish(self, start: Callable[[], NewGeneration], stack: ExitStack) -> Rebuilt:
        """Encode bm25.idx and meta.json; publish unless every file is the compared generation's."""
        plan, out, report = self.plan, self.out, self.report
        self.tick("chunk", self.n_new, self.n_new)
        warn_no_grammar(report, self.no_grammar)
        report.seconds["chunk"] = self.seconds["chunk"]
        self.embed.finish(report)
        if self.present.size:
            out.chunks_removed = int(np.count_nonzero(~self.present[self.first_of]))
        del self.first, self.first_of, self.present, self.embedded
        give_back()  # what the batches freed (the texts, the chunks) before the postings are laid out
        t0 = time.perf_counter()
        postings = self.postings.finish()
        report.seconds["analyze"] = self.seconds["analyze"] + time.perf_counter() - t0
        t0 = time.perf_counter()
        meta = encode_meta(plan.meta(out.n_rows))
        # bm25.idx is written (or compared) as it is encoded, and hashed on the way: the readers' cache key.
        bm25 = stack.enter_context(StreamedFile(BM25, plan.compare, start))
        digest = hashlib.sha256()
        for piece in encode_pieces(postings, BM25_STEP):
            digest.update(piece)
            bm25.write(piece)
            del piece
        key = BM25Index.cache_key_of(digest, plan.k1, plan.b)
        if (plan.compare is not None and self.docs.same() and self.vectors.same() and bm25.same()
                and same_meta(plan.compare, meta)):
            # Every document "changed" only in ways that leave the index bytes identical (e.g. state was lost):
            # keep the current generation.
            report.seconds["write"] = self.seconds["write"] + time.perf_counter() - t0
            return out
        self.tick("write", 0, 1)
        new = start()
        for streamed in (self.docs, self.vectors, bm25):
            streamed.finish()
        new.write({META: meta})
        sizes = len(meta) + bm25.size
        # Readers find the decoded BM25 arrays ready instead of decoding the new file (written into their cache
        # entry a block at a time, then mapped from it), and what this writer checked of the files instead of
        # checking it again (core.index.verified).
        decoded = self._decoded(postings, key)
        del postings
        ends = np.concatenate(self.ends) if self.ends else np.zeros(0, dtype=np.int64)
        self.ends = []
        stops = np.cumsum(np.array(self.sizes, dtype=np.int64))
        spans = zip((stops - np.array(self.sizes, dtype=np.int64)).tolist(), stops.tolist())
        derived = derive.Derivation.plan(plan.cache_dir, plan.index_id, decoded, key, spans, everything=plan.derive_all)
        del decoded
        new.commit(before_swap=lambda d: derived.before_swap(d, ends=ends, bm25_key=key))
        out.published, out.derived = True, derived
        out.bytes_written = sizes + self.docs.size + self.vectors.size
        self.tick("write", 1, 1)
        report.seconds["write"] = self.seconds["write"] + time.perf_counter() - t0
        return out

    def _decoded(self, postings: Postings, key: str) -> BM25Index:
        """The readers' BM25 arrays of ``postings``, stored in the cache entry of ``key`` a block at a time and
        mapped from it (``BM25Index.store``'s entry); made in memory only when the entry cannot be written."""
        plan = self.plan
        entry = StreamedEntry(plan.cache_dir, "bm25", plan.index_id)
        try:
            BM25Index.stream_arrays(postings, plan.k1, plan.b, entry, BM25_STEP)
        except BaseException:
            entry.discard()
            raise
        return BM25Index.placed(entry, key, postings, plan.k1, plan.b, plan.cache_dir, plan.index_id)
