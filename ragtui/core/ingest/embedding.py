"""Embedding the records an assembly left without a vector: from the embed journal, else from the embedder.

``embed_pending`` embeds one assembly and reports it. ``EmbedRun`` is the
same work spread over several assemblies (the full rebuild embeds batch by
batch): what it reports, the texts embedded, the time and the embedding
server's pace, covers them all, and the journal's records are looked up
through ``lookup`` (by default ``EmbedJournal.load``; the full rebuild passes
``EmbedJournal.reader()``, which reads the journal once, not once a batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragtui.core.embedders.base import Embedder
from ragtui.core.errors import EmbeddingError
from ragtui.core.index.index_format import bad_vector_rows, vector_row_problem
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.report import Progress, SyncReport

if TYPE_CHECKING:
    from ragtui.core.ingest.assemble import Assembly

__all__ = ["EMBED_BATCH", "JOURNAL_SECONDS", "EmbedRun", "embed_pending"]

EMBED_BATCH = 256
JOURNAL_SECONDS = 2.0
"""Vectors the embedder answered are in the journal within about this long (plus one batch)."""

Vectors = npt.NDArray[np.float32]


def embed_pending(asm: Assembly, embedder: Embedder, journal: EmbedJournal, report: SyncReport, tick: Progress,
                  *, clock: Callable[[], float] = time.monotonic) -> None:
    """Fill the vector of every pending record: from the journal, else from the embedder (once per fingerprint).

    What the embedder answered is appended to the journal at least every
    ``JOURNAL_SECONDS`` and every ``EMBED_BATCH`` vectors, and once more when
    embedding fails, so a failed or killed run loses at most a few seconds of
    the backend's work. An embedder with ``embed_parts`` (the HTTP one) is
    given every pending text at once and answers batch by batch; others are
    called with groups of at most ``EMBED_BATCH`` texts, smaller when a group
    takes longer than ``JOURNAL_SECONDS``.
    """
    run = EmbedRun(embedder, journal, tick, clock=clock)
    run.embed(asm)
    run.finish(report)


class EmbedRun:
    """``embed_pending`` over several assemblies, reported once (``finish``); see the module docstring."""

    def __init__(self, embedder: Embedder, journal: EmbedJournal, tick: Progress, *,
                 clock: Callable[[], float] = time.monotonic,
                 lookup: Callable[[dict[str, list[int]]], dict[str, np.ndarray]] | None = None) -> None:
        self.embedder, self.journal, self.tick, self.clock = embedder, journal, tick, clock
        self.lookup = lookup if lookup is not None else journal.load
        pace = getattr(embedder, "pace", None)
        self._paced = pace.counters() if pace is not None and callable(getattr(pace, "counters", None)) else None
        self._retried = getattr(embedder, "retried", 0)
        self.embedded = 0
        """Texts embedded (or taken from the journal) so far."""
        self._asked = 0
        self.seconds = 0.0

    def finish(self, report: SyncReport) -> None:
        """Put what every ``embed`` did into ``report``."""
        if self._paced is not None and self.embedded:
            _report_pace(report, self.embedder, self._paced, self._retried)
        report.chunks_embedded = self.embedded
        report.seconds["embed"] = self.seconds

    def embed(self, asm: Assembly) -> None:
        """Fill the vector of every pending record of ``asm`` (``embed_pending``, without the report)."""
        t0 = time.perf_counter()
        try:
            self._embed(asm)
        finally:
            self.seconds += time.perf_counter() - t0

    def _embed(self, asm: Assembly) -> None:
        embedder, journal, clock = self.embedder, self.journal, self.clock
        pending, vectors = asm.pending, asm.vectors
        texts_for = {f: asm.records[rows[0]].text for f, rows in pending.items()}
        if pending:
            # Vectors a failed earlier run already had embedded are not asked for again.
            for f, vec in self.lookup(pending).items():
                if f in pending:
                    vectors[pending.pop(f)] = vec
        fps = list(pending)
        self._asked += len(fps)
        # The chunker's token ids, where it kept them, spare the embedder tokenizing those texts again.
        found = getattr(embedder, "embed_ids", None) if asm.ids else None
        embed_ids: Callable[[list[np.ndarray]], np.ndarray] | None = found if callable(found) else None

        def embed(batch: list[str]) -> Vectors:
            with_ids = [i for i, f in enumerate(batch) if f in asm.ids] if embed_ids is not None else []
            if embed_ids is None or not with_ids:
                return np.asarray(embedder.embed([texts_for[f] for f in batch]), dtype=np.float32)
            # An embedder's vector of a text does not depend on the other texts of the call.
            out = np.empty((len(batch), vectors.shape[1]), dtype=np.float32)
            out[with_ids] = np.asarray(embed_ids([asm.ids[batch[i]] for i in with_ids]), dtype=np.float32)
            rest = [i for i, f in enumerate(batch) if f not in asm.ids]
            if rest:
                out[rest] = np.asarray(embedder.embed([texts_for[batch[i]] for i in rest]), dtype=np.float32)
            return out

        unsaved: list[tuple[list[str], Vectors]] = []
        n_unsaved = 0
        saved_at = clock()
        done = 0
        before = self.embedded

        def take(batch: list[str], emb: Vectors) -> None:
            nonlocal n_unsaved, saved_at, done
            emb = np.asarray(emb, dtype=np.float32)
            if emb.shape != (len(batch), vectors.shape[1]):
                raise EmbeddingError(f"embedder {embedder.model}: {emb.shape} embeddings for {len(batch)} texts of dim {vectors.shape[1]}")
            bad = bad_vector_rows(emb)
            if bad.size:
                # Never published: a row that is not a unit vector ranks wrongly in every later search.
                raise EmbeddingError(f"embedder {embedder.model}: {vector_row_problem(emb, int(bad[0]))}")
            for f, vec in zip(batch, emb):
                vectors[pending[f]] = vec
            unsaved.append((batch, emb))
            n_unsaved += len(batch)
            done += len(batch)
            if n_unsaved >= EMBED_BATCH or clock() - saved_at >= JOURNAL_SECONDS:
                save()
            self.tick("embed", before + done, self._asked)

        def save() -> None:
            nonlocal n_unsaved, saved_at
            if unsaved:
                journal.append([f for batch, _ in unsaved for f in batch], np.concatenate([emb for _, emb in unsaved]))
                unsaved.clear()
            n_unsaved, saved_at = 0, clock()

        parts = getattr(embedder, "embed_parts", None)
        try:
            if parts is not None and fps:
                answers = parts([texts_for[f] for f in fps])
                try:
                    for positions, emb in answers:
                        take([fps[i] for i in positions], emb)
                finally:
                    answers.close()  # on failure: the requests still in flight are abandoned now
            else:
                lo, size = 0, EMBED_BATCH
                while lo < len(fps):
                    batch = fps[lo : lo + size]
                    started = clock()
                    take(batch, embed(batch))
                    took = clock() - started
                    if took > JOURNAL_SECONDS:  # a slow backend: smaller groups, so the journal keeps up
                        size = max(1, int(len(batch) * JOURNAL_SECONDS / took))
                    lo += len(batch)
        finally:
            save()
        if done != len(fps):
            raise EmbeddingError(f"embedder {embedder.model}: answered {done} of {len(fps)} texts")
        pending.clear()
        asm.ids.clear()
        self.embedded += len(fps)


def _report_pace(report: SyncReport, embedder: Any, before: dict[str, float], retried_before: int) -> None:
    """This run's embedding requests in ``report.embedding``, and a warning for each kind of work done twice."""
    pace: Any = embedder.pace
    now = pace.counters()
    run = {k: now[k] - before.get(k, 0) for k in now}
    retried = int(getattr(embedder, "retried", 0)) - int(retried_before)
    report.embedding = {**run, "lost_seconds": round(run["lost_seconds"], 3), "retried": retried,
                        "batch_tokens": pace.batch_tokens, "concurrency": pace.concurrency}
    if run["timeouts"]:
        report.warnings.append(
            f"the embedding server did not answer {run['timeouts']:.0f} request(s) within {pace.timeout:g}s: "
            f"{run['resent_texts']:.0f} text(s) (about {run['resent_tokens']:,.0f} tokens) were sent again in smaller "
            f"batches, {run['lost_seconds']:.1f} s lost; the batch is now {pace.batch_tokens:,} tokens (raise "
            "[embedder] timeout or lower max_batch_tokens if this recurs)")
    if retried:
        report.warnings.append(f"{retried} request(s) to the embedding server were repeated after a failure "
                               "(HTTP 429/5xx or a broken connection)")
