"""``IndexWriter``: brings one index up to date with one folder, writing nothing when nothing changed.

A sync walks the folder (or re-examines just the paths it is given),
decides per file whether its content changed (size, times and inode first;
a SHA-256 of the bytes when those differ), chunks and embeds only what is
new, reuses the stored vectors of every chunk whose fingerprint it already
has, and publishes the four files atomically under the index lock. When no
document changed it writes nothing at all: no index file, no state.

A writer object remembers what it published last (the state, and the
generation opened for the next splice); a long-running writer such as the
watch agent keeps one for its lifetime, so each save starts from memory
instead of re-reading the index. What it remembers is used only while the
files on disk are provably the ones it describes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

import numpy as np

from ragtui.core.code.languages import chunker_identity
from ragtui.core.documents.registry import reader_versions
from ragtui.core.embedders.base import Embedder, known_dim, tokenizer_name
from ragtui.core.errors import IndexFormatError, IndexMissingError, UsageError
from ragtui.core.index.bm25 import check_bm25_params
from ragtui.core.index.index_format import IndexData, generation_of, read_index
from ragtui.core.index.overlay import write_overlay
from ragtui.core.index.records import IndexMeta
from ragtui.core.index.release import release_later
from ragtui.core.ingest import derive
from ragtui.core.ingest.assemble import Assembly, Previous, assemble, chunk_all, embed_pending
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.patterns import IGNORE_FILES
from ragtui.core.ingest.publish import (
    IndexLock,
    check_index_id,
    index_dir,
    rag_root,
    remove_leftovers,
    remove_stale_generations,
    state_dir,
    utc_now,
)
from ragtui.core.ingest.rebuild import Plan, rebuild
from ragtui.core.ingest.report import Progress, SyncReport
from ragtui.core.ingest.scan import Scan, by_bytes, classify, keep_unreadable, scan
from ragtui.core.ingest.skips import Skips, load_skips, save_skips
from ragtui.core.ingest.splice import Generation, following, new_docs_lines, open_generation, publish_splice, warm
from ragtui.core.ingest.state import FileEntry, FileTable, IndexSettings, WriterState, chunk_total, index_stamp
from ragtui.core.ingest.state_store import StateStore
from ragtui.core.ingest.streamed import give_back
from ragtui.core.ingest.texts import Texts
from ragtui.core.ingest.walk import WalkRules

__all__ = ["IndexWriter", "open_published"]

PathLike = str | os.PathLike[str]


DERIVED_WAIT_SECONDS = 60.0
"""The longest a publish whose save is searchable through its overlay waits for the derived entries under way."""


def _quiet(stage: str, done: int, total: int) -> None:
    pass


class IndexWriter:
    """The writer of ``<artifacts>/rag/<index_id>`` for ``folder`` (see the module docstring).

    ``sync`` and ``prepare`` may be called from any thread; a writer runs
    one at a time. Another process (or another writer object) may write the
    same index in between: the lock keeps them apart, and what this writer
    remembers is dropped as soon as the files differ from it.
    """

    def __init__(
        self,
        folder: PathLike,
        *,
        artifacts: PathLike,
        embedder: Embedder,
        index_id: str | None = None,
        max_tokens: int = 256,
        overlap: int = 32,
        k1: float = 1.2,
        b: float = 0.75,
        rules: WalkRules | None = None,
        derive_behind: bool = False,
        derive_all: bool | None = None,
        overlay: bool = False,
    ) -> None:
        check_bm25_params(k1, b)
        self.folder = Path(os.path.abspath(folder))
        self.artifacts = Path(os.path.abspath(artifacts))
        self.index_id = index_id or self.folder.name
        check_index_id(self.index_id)
        self.target = index_dir(self.artifacts, self.index_id)
        self.embedder = embedder
        # An embedder with embed_ids (wordllama) takes its own tokenizer's ids: the chunker then keeps the ids it
        # counted each chunk from, and no chunk is tokenized twice.
        self._embeds_ids = callable(getattr(embedder, "embed_ids", None))
        self.max_tokens, self.overlap, self.k1, self.b = max_tokens, overlap, k1, b
        base_rules = rules or WalkRules()
        self.rules = dataclasses.replace(base_rules, skip_under=(*base_rules.skip_under, self.artifacts))
        self.walk = self.rules.describe()
        self._cache_dir = rag_root(self.artifacts) / ".cache"
        self._busy = threading.Lock()
        self._texts: list[Texts] = []
        """The texts the sync under way read (closed, with their file, when it ends)."""
        self._store = StateStore(self.artifacts, self.index_id)
        """The writer state, kept in memory while the file is the one this writer read or wrote last."""
        self._generation: Generation | None = None
        """The generation this writer published (or opened) last, the next splice's starting point."""
        self._derive_behind = derive_behind
        """Build a published generation's derived entries in a thread (a long-running writer: its next save
        need not wait for them); by default ``sync`` returns once they are stored."""
        self._derive_all = not derive_behind if derive_all is None else derive_all
        """Make the stemmed arm and the IVF lists at every publish (default: a one-shot writer does, so that a
        fresh reader builds nothing; a long-running one makes them once a reader searched that way)."""
        self._deriver: concurrent.futures.ThreadPoolExecutor | None = None
        """The one thread that derives behind: every build runs in it, one after another, so the memory a build
        frees stays where the next build takes it (glibc gives each thread an arena of its own: builds in
        threads of their own, overlapping when saves come faster than the builds, each kept what it had freed)."""
        self._deriving: concurrent.futures.Future[None] | None = None
        self._published = 0
        """Generations this writer published: a thread deriving an older one stops between its steps."""
        self._overlay = overlay
        """Before a spliced publish, write the overlay of the generation it splices from (``core.index.overlay``):
        readers that layer it search the save before the full generation is published (the watch agent's
        writer; a one-shot writer's readers have nothing to wait for). The publish then waits for the lexical
        entries the previous publish is deriving behind (``_after_derived``)."""
        self._publish_waiting = False
        """An overlaid save's publish is waiting or under way: IVF lists being derived stop at their next step."""

    # -- what this writer remembers -------------------------------------------------------------

    def _current_state(self) -> WriterState | None:
        return self._store.current()

    def _save(self, state: WriterState, changed: Collection[str] | None = None) -> bool:
        return self._store.save(state, changed)

    def settings(self, recorded: IndexSettings | None = None) -> IndexSettings:
        """The settings this writer builds with.

        With ``recorded`` (the last sync's), an embedder that would have to ask
        its server for the dimension (HTTP) is taken to have the recorded one
        when its model is the recorded model: a sync that finds nothing to do
        then contacts no server. ``_sync_locked`` checks the guess before it embeds.
        """
        e = self.embedder
        dim = known_dim(e)
        if dim is None:
            same_model = recorded is not None and recorded.embedding_model == e.model
            dim = recorded.dim if recorded is not None and same_model else e.dim
        return IndexSettings(e.model, dim, tokenizer_name(e), self.max_tokens, self.overlap, self.k1, self.b,
                        chunker_identity())

    def prepare(self, *, warm_up: bool = False, should_stop: Callable[[], bool] | None = None) -> bool:
        """Open the current generation for the next sync, so that it does not pay for reading it.

        A long-running writer calls this when idle. With ``warm_up``, it also
        runs the BM25 splice once without publishing, so the arrays a save
        works on are read in and the heap has grown to its working size
        (skipped when ``should_stop()`` says work is waiting). Only reads;
        True when the next sync can start from it.
        """
        with self._busy:
            if self._generation is not None and self._generation.still_published(self.target):
                return True  # this writer published it: everything is in memory already
            if self._generation is not None:
                self._generation.drop_changed()
            gen = open_published(self.target, self._current_state(), self._cache_dir)
            if gen is None:
                return False
            self._generation = gen
            if warm_up and not (should_stop is not None and should_stop()):
                warm(gen)
                # The tokenizer builds its document path's tables on first use (0.4 s with wordllama's):
                # here, not in the first save.
                encode_docs = getattr(self.embedder.tokenizer, "encode_docs", None)
                if encode_docs is not None:
                    encode_docs(["Warm up: the first save after start must not build the tokenizer's tables.\n"])
            return True

    def open_postings(self) -> int:
        """The postings of the generation open for the next save (0 when none is): the size of what a save
        spliced from it works on (``ragtui.watch.memory.grow_heap_for``)."""
        gen = self._generation
        return 0 if gen is None else int(gen.data.bm25.post_doc.size)

    # -- the sync ---------------------------------------------------------------------------------

    def _remember_skips(self, found: Scan, old: Skips, partial: bool) -> None:
        """Keep what the readers skipped (a partial sync keeps what it did not look at too)."""
        now = dict(found.skips)
        if partial:
            for doc_id, entry in old.items():
                if doc_id not in now and doc_id not in found.seen:
                    now[doc_id] = entry
        save_skips(state_dir(self.artifacts, self.index_id), now, old)

    def sync(self, paths: Iterable[PathLike] | None = None, *, progress: Progress | None = None,
             replace: bool = False) -> SyncReport:
        """Bring the index up to date with the folder; see ``ragtui.core.ingest.sync.sync``."""
        t_start = time.perf_counter()
        folder = self.folder
        if not folder.is_dir():
            raise UsageError(f"{folder} is not a folder: give the folder of documents to index")
        if folder.parent == folder:
            raise UsageError("cannot index the root folder itself: give a folder below it")
        if paths is not None and self.rules.ignore_files:
            paths = list(paths)
            if any(os.path.basename(os.fspath(p)) in IGNORE_FILES for p in paths):
                paths = None  # an ignore file changed: any document of the folder may be in or out now
        report = SyncReport(self.index_id, str(self.target))
        tick = progress or _quiet
        with self._busy, IndexLock(self.artifacts, self.index_id):
            try:
                self._sync_locked(paths, replace, report, tick)
            finally:
                for texts in self._texts:
                    texts.close()
                self._texts.clear()
        report.seconds["total"] = time.perf_counter() - t_start
        return report

    def _sync_locked(self, paths: Iterable[PathLike] | None, replace: bool, report: SyncReport, tick: Progress) -> None:
        # A writer killed earlier may have left a half-written generation or state file.
        t0 = time.perf_counter()
        remove_leftovers(self.artifacts, self.index_id)
        state = self._current_state()
        report.seconds["load"] = time.perf_counter() - t0
        settings = self.settings(state.settings if state is not None else None)
        current_gen = generation_of(self.target)
        if not replace:
            _refuse_other_folder(state, self.folder, self.index_id, current_gen)
        # The state stands in for the index only while the published generation is
        # the one it describes: the same meta.json and the same four files, unchanged
        # since (size, mtime, ctime, inode). A damaged or replaced file breaks that:
        # any of the four files replaced or touched since (a FIFO, a bomb, an edit) is
        # read again, so that a damaged generation is rebuilt rather than kept.
        trusted = (
            state is not None
            and state.settings == settings
            and state.generation is not None
            and state.generation == current_gen
            and state.folder == str(self.folder)
            and state.index_files is not None
            and state.index_files == index_stamp(self.target)
        )
        if state is not None and state.settings.code != settings.code:
            report.rebuilt = ("the code grammars installed changed: every document read again, source files "
                              "re-chunked (spec/chunker.md, Code)")
        old_files: Mapping[str, FileEntry] = state.files if state is not None and trusted else {}
        if state is not None and trusted:
            old_files = _read_again(old_files, state.walk.get("readers"), reader_versions())
        # Other patterns or limits than the last sync's choose other documents: only a whole walk
        # finds them (the files it already knows keep their stamps and vectors).
        same_walk = state is not None and state.walk == self.walk

        # 1-2. Which documents exist now, and the text of those that changed.
        skips = load_skips(state_dir(self.artifacts, self.index_id))
        partial = paths if trusted and same_walk else None
        found = self._scan(partial, old_files, report, tick, skips)
        self._remember_skips(found, skips, partial is not None)
        if found.same is None and isinstance(old_files, FileTable):
            old_files = old_files.as_dict()  # (made once by the scan already)
        if trusted and found.unreadable:
            keep_unreadable(found.seen, found.unreadable, old_files)
        classify(report, found, old_files)

        if state is not None and trusted and found.same is not None:
            # The walk found every document as the state has it: nothing to read, build or write
            # (unless the walk rules changed without changing any document: they are remembered).
            report.chunks_total = chunk_total(found.same)
            if not same_walk:
                self._save(dataclasses.replace(state, walk=self.walk))
            return
        if state is not None and trusted and not found.new_texts and not report.removed:
            report.chunks_total = chunk_total(found.seen)
            if found.seen != old_files or not same_walk:
                # Only times changed (a touch, a save of the same bytes): remember
                # the new stamps so the next sync need not read these files again.
                # New walk rules that changed no document are remembered too.
                self._save(dataclasses.replace(state, files=found.seen, walk=self.walk))
            return

        if self.embedder.dim != settings.dim:
            # The dimension was taken from the last sync (no server asked); the server
            # now answers another one under the same model name. Start again with
            # the real settings: nothing was written yet.
            fresh = SyncReport(report.index_id, report.index_path)
            for f in dataclasses.fields(SyncReport):
                setattr(report, f.name, getattr(fresh, f.name))
            self._sync_locked(None, replace, report, tick)
            return
        journal = EmbedJournal(self.artifacts, self.index_id, self.embedder.model, self.embedder.dim)
        t0 = time.perf_counter()
        gen, self._generation = self._generation, None  # dropped if this sync fails: it is re-opened then
        if not (state is not None and trusted and current_gen):
            gen = None
        elif gen is None or gen.stamp != state.index_files or not gen.intact():
            if gen is not None:
                gen.drop_changed()
            gen = open_generation(self.target, state.index_files, state.generation, state.files, self._cache_dir)
        report.seconds["open"] = time.perf_counter() - t0
        if gen is not None:
            # 3'. The common case: keep the previous generation's bytes for every
            # unchanged document and build only what changed.
            try:
                self._splice(gen, found, settings, report, tick, journal)
            finally:
                # Its maps of removed files: unmapping them frees their pages, which need not hold this sync up.
                release_later(gen)
                del gen
        else:
            self._rebuild(found, state if trusted else None, current_gen, settings, report, tick, journal)

    def _scan(self, paths: Iterable[PathLike] | None, old_files: Mapping[str, FileEntry], report: SyncReport,
              tick: Progress, skips: Mapping[str, tuple[tuple[int, int, int, int], str]]) -> Scan:
        """``scan``, the texts read past a bound kept in a file of the state folder (``Texts``) until the sync ends."""
        found = scan(self.folder, self.rules, paths, old_files, report, tick, skips,
                     spool=state_dir(self.artifacts, self.index_id))
        self._texts.append(found.new_texts)
        return found

    def _derive(self, derived: derive.Derivation, report: SyncReport) -> None:
        """Build the derived entries of the generation just published (``Derivation.after_swap``), then keep the
        two newest of each kind: here, or in a thread with ``derive_behind`` (``wait_derived`` joins it)."""
        self._published += 1
        mine = self._published

        def run() -> None:
            try:
                # A one-shot writer gives the heap back between the builds (each frees hundreds of MB at 100k
                # chunks); a long-running one keeps it for the next save (``ragtui.watch.memory``).
                between = None if self._derive_behind else give_back
                derived.after_swap(still_wanted=lambda: self._published == mine, embedder=self.embedder,
                                   between=between,
                                   lists_wanted=lambda: self._published == mine and not self._publish_waiting)
                derive.tidy(self._cache_dir, self.index_id)
            except Exception:  # noqa: BLE001 - derived entries only save readers time; a reader builds its own
                pass

        if not self._derive_behind:
            t0 = time.perf_counter()
            run()
            report.seconds["derive"] = time.perf_counter() - t0
            return
        if self._deriver is None:
            self._deriver = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"derive {self.index_id}")
        # A build of an older generation still running stops at its next step (still_wanted): this one follows.
        self._deriving = self._deriver.submit(run)

    def _after_derived(self, report: SyncReport, tick: Progress) -> None:
        """Before a publish whose save readers search through its overlay already: wait (at most
        ``DERIVED_WAIT_SECONDS``) for the lexical entries of the generation before, still being derived behind.

        Readers layer the overlay over that generation, so its entries are what their hybrid and document-level
        searches of the save wait for; and the builds' memory is not added to the publish's own. IVF lists under
        way are told to stop at their next step (``_publish_waiting``, until the publish is done): they would be
        useless once it is, and each of their steps is short (a block of rows). ``tick`` is told of the wait every
        quarter of a second (stage ``derived``): a caller stopping may abandon the sync there, as before any write.
        """
        future = self._deriving
        self._publish_waiting = True
        if future is None or future.done():
            return
        t0 = time.perf_counter()
        while not future.done() and time.perf_counter() - t0 < DERIVED_WAIT_SECONDS:
            tick("derived", 0, 1)
            concurrent.futures.wait([future], 0.25)
        report.seconds["derived_wait"] = time.perf_counter() - t0

    def wait_derived(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` s) until the derived entries of the last generation this writer published
        are stored (or given up)."""
        future = self._deriving
        if future is not None:
            concurrent.futures.wait([future], timeout)

    def _meta(self, n_chunks: int) -> IndexMeta:
        e = self.embedder
        return IndexMeta(self.index_id, utc_now(), n_chunks, e.dim, e.model, e.tokenizer.name,
                         self.max_tokens, self.overlap, self.k1, self.b)

    def _next_state(self, settings: IndexSettings, seen: dict[str, FileEntry], counts: Mapping[str, int],
                    only: Collection[str] | None = None) -> WriterState:
        """The state after a publish: ``seen`` with each document's chunk count from ``counts`` (those of ``only``,
        when given: the documents whose count may have changed, every other entry's count being right already)."""
        for doc_id in seen if only is None else only:
            entry = seen.get(doc_id)
            if entry is not None and entry.n_chunks != (n := counts.get(doc_id, 0)):
                seen[doc_id] = entry._replace(n_chunks=n)
        return WriterState(str(self.folder), settings, self.walk, generation_of(self.target),
                           index_stamp(self.target), seen)

    def _splice(self, gen: Generation, found: Scan, settings: IndexSettings, report: SyncReport, tick: Progress,
                journal: EmbedJournal) -> None:
        e = self.embedder
        new_chunks = chunk_all(found.new_texts, e.tokenizer, self.max_tokens, self.overlap, report, tick,
                               keep_ids=self._embeds_ids)
        t0 = time.perf_counter()
        asm = assemble(found.seen, new_chunks, gen.previous(), e.dim, found.touched)
        report.chunks_added, report.chunks_removed, report.chunks_total = asm.chunks_added, asm.chunks_removed, asm.n_rows
        report.seconds["plan"] = time.perf_counter() - t0
        embed_pending(asm, e, journal, report, tick)
        new_docs = None
        if self._overlay:
            t0 = time.perf_counter()
            new_docs = new_docs_lines(asm)
            _write_overlay(gen, asm, new_docs, report)
            report.seconds["overlay"] = time.perf_counter() - t0
        try:
            if self._overlay:
                self._after_derived(report, tick)
            done = publish_splice(self.artifacts, self.index_id, gen, asm, self._meta(asm.n_rows), report, tick,
                                  self._cache_dir, derive_all=self._derive_all, new_docs=new_docs)
            # Readers already see the new generation; what follows only saves readers time and tidies up.
            self._derive(done.derived, report)
        finally:
            self._publish_waiting = False  # (after _derive: the generation before is no longer the newest)
        t0 = time.perf_counter()
        nxt = following(self.target, gen, asm, done, self._cache_dir)
        remove_stale_generations(self.artifacts, self.index_id)
        journal.clear()
        report.seconds["tidy"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        # After a partial scan, the entries that may differ from the state's are those the scan touched; the
        # chunk counts that may differ, those of the documents chunked now (the others' rows were carried over).
        if self._save(self._next_state(settings, found.seen, asm.counts, new_chunks.keys()), found.touched):
            self._generation = nxt
        report.seconds["state"] = time.perf_counter() - t0

    def _rebuild(self, found: Scan, state: WriterState | None, current_gen: str | None, settings: IndexSettings,
                 report: SyncReport, tick: Progress, journal: EmbedJournal) -> None:
        """3. The full path: the previous index is read and checked in full; its chunks and vectors are reused where they fit."""
        e = self.embedder
        old: IndexData | None = None
        if current_gen is not None or os.path.lexists(self.target):  # a link whose meta.json is gone is damage too
            try:
                old = read_index(self.target, cache_dir=self._cache_dir)
            except (IndexFormatError, IndexMissingError) as err:
                report.rebuilt = f"the existing index could not be read ({err}); rebuilt from every file of the folder"
        trusted = state is not None
        old_rows = _doc_rows(old) if old is not None else {}
        if state is not None and (old is None or not _state_matches(old_rows, state.files)):
            # The unchanged documents were to come from that index: without it
            # (or when it does not hold what the state says), read them all.
            trusted = False
            report.skipped.clear()
            skips = load_skips(state_dir(self.artifacts, self.index_id))
            found.new_texts.close()
            found = self._scan(None, {}, report, tick, skips)
            self._remember_skips(found, skips, False)
        prev = _previous_of(old, old_rows, e) if old is not None else None
        if old is not None and not trusted:
            # meta.json does not record the code chunker: that difference re-chunks, it is not reported.
            old_settings = dataclasses.replace(IndexSettings.of_meta(old.meta), code=settings.code)
            if old_settings != settings:
                report.rebuilt = f"settings changed ({', '.join(settings.differing(old_settings))}); every document re-chunked"
        if not trusted:
            # Without trustworthy state every present document is re-read above,
            # so every one of them is in new_texts; classify against the old index.
            old_docs = prev.rows if prev is not None else {}
            # Their previous chunks are in the old index only: the entry has no stamp, so
            # the next sync reads the file again.
            keep_unreadable(found.seen, found.unreadable, dict.fromkeys(old_docs, FileEntry(None, None)))
            classify(report, found, old_docs)

        # 3-4. Chunked, embedded and written a batch of documents at a time, then published as one unit.
        plan = Plan(self.artifacts, self.index_id, self._cache_dir, by_bytes(found.seen), found.new_texts, prev, e,
                    self.max_tokens, self.overlap, self._embeds_ids, self.k1, self.b, self._meta,
                    compare=old.path if old is not None and not trusted else None, derive_all=self._derive_all)
        done = rebuild(plan, journal, report, tick)
        report.chunks_added, report.chunks_removed, report.chunks_total = done.chunks_added, done.chunks_removed, done.n_rows
        report.published, report.bytes_written = done.published, done.bytes_written
        if done.derived is not None:
            self._derive(done.derived, report)
        journal.clear()
        self._save(self._next_state(settings, found.seen, done.counts))


def _write_overlay(gen: Generation, asm: Assembly, new_docs: list[bytes], report: SyncReport) -> None:
    """Write the overlay of ``gen`` for the next generation ``asm`` lays out (its new lines: ``new_docs``).

    A failure to write it is not the save's: the full publish follows and
    readers see the save then. It is said once in the report's warnings (as
    is a layout too large for an overlay's header, a save of some 40,000
    scattered documents, which readers wait for the publish to see).
    """
    try:
        write_overlay(gen.stamp.dir, base_chunks=gen.data.n_chunks, dim=gen.data.meta.dim,
                      segments=[(seg.source, seg.lo, seg.hi) for seg in asm.segments], docs_lines=new_docs,
                      vectors=asm.vectors)
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        report.warnings.append(f"could not write the overlay of this save ({why}); searches see the save once its "
                               "generation is published")


def open_published(target: Path, state: WriterState | None, cache_dir: Path) -> Generation | None:
    """The generation ``target`` names, opened for a splice, if it is the one ``state`` describes."""
    if state is None or state.index_files is None or state.generation != generation_of(target):
        return None
    return open_generation(target, state.index_files, state.generation, state.files, cache_dir)


def _previous_of(old: IndexData, rows: dict[str, tuple[int, int]], embedder: Embedder) -> Previous:
    """What a full rebuild may take from the previous index (read and checked in full; ``rows``: ``_doc_rows``)."""
    records = old.records
    fps = records.written_fingerprints()
    if fps is None:  # not laid out as this writer lays lines out: each line's own field
        fps = np.empty(len(records), dtype="S64")
        for lo, hi in records.blocks(4 << 20):
            fps[lo:hi] = [r.fingerprint.encode("ascii") for r in records[lo:hi]]
    reusable = old.meta.embedding_model == embedder.model and old.meta.dim == embedder.dim
    return Previous(rows, fps, old.vectors, lambda lo, hi: records[lo:hi], reusable)


def _doc_rows(old: IndexData) -> dict[str, tuple[int, int]]:
    """Each document's rows [lo, hi) in ``old``: from the documents' first lines, which the full read found."""
    starts = old.records.doc_starts().tolist()
    ends = [*starts[1:], len(old.records)]
    return {doc_id: (lo, hi) for doc_id, lo, hi in zip(old.records.doc_ids(), starts, ends)}


def _state_matches(rows: dict[str, tuple[int, int]], old_files: Mapping[str, FileEntry]) -> bool:
    """Whether the index holds, per document (its ``_doc_rows``), the number of chunks the state says it does."""
    held = {doc_id: hi - lo for doc_id, (lo, hi) in rows.items()}
    wanted = {d: f.n_chunks for d, f in old_files.items() if f.n_chunks != 0}
    return held == wanted


def _read_again(files: Mapping[str, FileEntry], before: object, now: dict[str, int]) -> Mapping[str, FileEntry]:
    """``files`` with every document of a kind whose reader changed since ``before`` (the state's reader
    versions; absent in a state from before the document readers: every kind but text) to be read
    again: its entry keeps its chunk count and loses its stamp and hash, as one taken from an index."""
    from ragtui.core.documents import TEXT, by_extension

    old = before if isinstance(before, dict) else {}
    changed = {k for k, v in now.items() if old.get(k) != v}
    if not changed:
        return files
    stale = [d for d in files if (by_extension(d) or TEXT).name in changed]
    if not stale:
        return files
    out = dict(files.as_dict() if isinstance(files, FileTable) else files)
    for d in stale:
        out[d] = FileEntry(None, None, out[d].n_chunks)
    return out


def _refuse_other_folder(state: WriterState | None, folder: Path, index_id: str, current_gen: str | None) -> None:
    """``UsageError`` when the published index ``index_id`` belongs to another folder that still exists.

    The writer's state records the folder; the same folder by another path
    (a link, a bind mount) is the same folder. When the recorded one is gone
    (moved, deleted) there is nothing of it to keep apart: a re-ingest from the
    new place takes the index over.
    """
    recorded = state.folder if state is not None else None
    if current_gen is None or not recorded or recorded == str(folder):
        return
    try:
        if os.path.samefile(recorded, folder) or not os.path.isdir(recorded):
            return
    except OSError:
        return
    raise UsageError(
        f"index {index_id!r} holds the folder {recorded}, not {folder} (same name): "
        "give this one another index id with --index ID, or pass --replace to replace that index"
    )
