"""The sync agent: keep one index in step with one folder, from filesystem events.

``WatchAgent`` owns three kinds of threads: watchdog's (inotify reader,
emitter, dispatcher), which only classify events into a ``ChangeBuffer``;
and one worker, which turns each quiet batch into one ``core.sync`` call and
calls the callbacks. Every callback runs on the worker thread, one at a
time, never on a watchdog thread; a callback may call ``stop()``.

Lifecycle: ``start()`` returns at once; the worker starts the observer first
and then reconciles the whole folder, so nothing changed during that
reconcile is missed. ``wait_idle()`` returns once that and every pending
batch are done. ``stop()`` abandons a sync that has not begun writing (the
next start's reconcile redoes it) and lets a publish in progress finish.

What the agent does on its own (each reported as an ``AgentEvent``):

* inotify queue overflow -> a full reconcile ("reconcile", reason "overflow");
* an ignore file (``.gitignore``, ``.ignore``) changed -> the folders are
  watched anew by the new rules and the whole folder is reconciled
  ("reconcile", reason "ignore-file");
* an inotify limit (watches or instances) -> polling, with a message naming
  the sysctl to raise ("fallback");
* the folder vanishes -> "paused": the index is kept as it is, the folder is
  looked for every ``root_check_seconds``; when it is back (or was replaced
  by another folder of that name) the observer restarts and a full
  reconcile follows ("resumed");
* a locked index, a storage error or an embedding backend failure -> the
  batch is kept and retried after 1, 2, 4 ... 60 s ("retry"); any other
  error stops the agent (``error`` holds it, ``on_error`` is called).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragtui.core.errors import EmbeddingError, StorageError, UsageError
from ragtui.core.ingest.keeper import KeeperLock
from ragtui.core.ingest.publish import check_index_id, index_dir
from ragtui.core.ingest.report import SyncReport
from ragtui.core.ingest.walk import WalkRules
from ragtui.core.ingest.writer import IndexWriter
from ragtui.watch.events import ROOT_GONE, Batch, ChangeBuffer, Scope, classify, compact_paths, is_ignore_file
from ragtui.watch.memory import grow_heap_for, release_before_save
from ragtui.watch.observers import EVENT_FILTER, LIMITS, Handler, Hooks, limit_message, make_observer, stop_observer

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

__all__ = ["AgentEvent", "AgentStats", "WatchAgent"]

TRANSIENT = (StorageError, EmbeddingError)
"""Errors worth retrying (LockedError is a StorageError): another writer, a full disk, a backend that is down."""

MAX_BACKOFF = 60.0


@dataclass(frozen=True)
class AgentEvent:
    """Something the agent did besides publishing.

    ``kind`` is one of "started", "batch" (a sync begins: ``data["paths"]``,
    ``data["full"]``), "reconcile" (a full one: ``data["reason"]``), "held",
    "fallback", "paused", "resumed", "retry", "stopped"; ``message`` is one
    line for people; ``data`` holds the details for machines.
    """

    kind: str
    message: str
    data: dict = field(default_factory=dict, compare=False)


@dataclass
class AgentStats:
    """Counters since the agent was built (read them from any thread)."""

    events: int = 0
    """Filesystem events received."""
    ignored: int = 0
    """Events that implied nothing (own writes, hidden or excluded paths, swap files)."""
    syncs: int = 0
    publishes: int = 0
    full_reconciles: int = 0
    errors: int = 0


class _Abandoned(Exception):
    """Raised from sync's progress callback to drop a sync that has not begun writing."""


def _identity(folder: str) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


class WatchAgent:
    """Keeps ``<artifacts>/rag/<index_id>`` in step with ``folder``.

    ``quiet_seconds``: events must pause this long before a batch is synced;
    ``max_delay``: the longest a complete file waits under endless churn;
    ``settle_seconds``: how long a file still open for writing must see no
    event before it is read anyway; ``reconcile_every``: seconds between
    full reconciles (None: never); ``poll``: use polling instead of inotify
    (``poll_seconds`` apart); ``max_batch_paths``: a batch naming more paths
    is synced as a full reconcile, which is cheaper then.

    Callbacks (all on the worker thread): ``on_publish(report)`` after a
    sync that published; ``on_sync(report)`` after every sync, published or
    not; ``on_event(AgentEvent)``; ``on_error(exc)`` for every failed sync.
    ``on_idle()``, once per idle spell: after ``idle_seconds`` without a
    sync (nothing more until another sync). The agent itself never changes
    process-wide state such as the allocator's settings: ``ragtui watch``,
    which owns its process, keeps freed memory and returns it from
    ``on_idle`` (``ragtui.watch.memory``).
    ``observer_factory(kind, hooks, poll_seconds)`` builds observers (the
    seam for tests; default ``observers.make_observer``).
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        *,
        artifacts: str | os.PathLike,
        embedder,
        index_id: str | None = None,
        rules: WalkRules | None = None,
        max_tokens: int = 256,
        overlap: int = 32,
        quiet_seconds: float = 0.1,
        max_delay: float = 3.0,
        settle_seconds: float = 2.0,
        reconcile_every: float | None = None,
        poll: bool = False,
        poll_seconds: float = 1.0,
        root_check_seconds: float = 1.0,
        max_batch_paths: int = 64,
        on_publish: Callable[[SyncReport], None] | None = None,
        on_sync: Callable[[SyncReport], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        idle_seconds: float = 600.0,
        observer_factory: Callable | None = None,
    ) -> None:
        self.folder = os.path.abspath(folder)
        self.artifacts = os.path.abspath(artifacts)
        self.index_id = index_id or os.path.basename(self.folder)
        check_index_id(self.index_id)
        self.index_path = index_dir(self.artifacts, self.index_id)
        self.embedder = embedder
        self.rules = rules or WalkRules()
        self.max_tokens, self.overlap = max_tokens, overlap
        # One writer for the agent's lifetime: each save starts from what the previous one published. Its derived
        # entries (document-level BM25; the stemmed arm and the IVF lists once a reader searched that way) are
        # built in one thread of the writer's after each publish, so a save is searchable without waiting for
        # them and the next save does not wait either. Before each spliced publish it writes the overlay of the
        # generation it splices from (core.index.overlay): readers that layer it search the save sooner.
        self._writer = IndexWriter(self.folder, artifacts=self.artifacts, embedder=embedder, index_id=self.index_id,
                                   max_tokens=max_tokens, overlap=overlap, rules=self.rules, derive_behind=True,
                                   overlay=True)
        self.poll, self.poll_seconds = poll, poll_seconds
        self.reconcile_every = reconcile_every
        self.root_check_seconds = root_check_seconds
        self.max_batch_paths = max_batch_paths
        self.on_publish, self.on_sync, self.on_error, self.on_event = on_publish, on_sync, on_error, on_event
        self.on_idle, self.idle_seconds = on_idle, idle_seconds
        self._factory = observer_factory or make_observer
        self._settle = settle_seconds
        self._buffer = ChangeBuffer(quiet_seconds, max_delay, settle_seconds)
        self._scope = Scope(self.folder, self.rules, self._ignored_roots())
        self.stats = AgentStats()
        self.mode = "stopped"
        """"inotify", "polling", "paused" (the folder is gone) or "stopped"."""
        self.error: BaseException | None = None
        """The error that stopped the agent, if one did."""
        self.last_report: SyncReport | None = None
        self._observer: BaseObserver | None = None
        self._root_id: tuple[int, int] | None = None
        self._fell_back = False
        self._paused = False
        self._backoff = 0.0
        self._said_ready = False
        self._next_periodic: float | None = None
        self._writing = False
        self._last_sync: float | None = None
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()
        self._keeper: KeeperLock | None = None

    def _ignored_roots(self) -> list[str]:
        """The artifacts root, also as seen from inside the folder when a link leads there."""
        roots = [self.artifacts]
        real_art, real_folder = os.path.realpath(self.artifacts), os.path.realpath(self.folder)
        if real_art == real_folder or real_art.startswith(real_folder + os.sep):
            roots.append(os.path.normpath(os.path.join(self.folder, os.path.relpath(real_art, real_folder))))
        return roots

    # -- public control ---------------------------------------------------------------

    def start(self) -> WatchAgent:
        """Start watching in the background (raises ``UsageError`` if the folder is not one)."""
        if self._thread is not None:
            raise RuntimeError("the agent was already started")
        if not os.path.isdir(self.folder):
            raise UsageError(f"{self.folder} is not a folder: give the folder of documents to watch")
        # Held until the worker ends: `ragtui rm` of this index is refused meanwhile (core.ingest.keeper),
        # and a removal under way refuses this start (LockedError) rather than racing it.
        self._keeper = KeeperLock(self.artifacts, self.index_id).keep()
        self._buffer.request_full("start")
        self._thread = threading.Thread(target=self._run, name=f"ragtui-watch-{self.index_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Stop and wait up to ``timeout`` s; True once the worker has ended.

        A sync that has not started writing is abandoned; a publish under way
        completes first (it is atomic either way).
        """
        self._buffer.signal_stop()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return thread is None or not thread.is_alive()
        thread.join(timeout)
        return not thread.is_alive()

    def reconcile(self, reason: str = "manual") -> None:
        """Ask for a full reconcile of the folder with the index (asynchronous)."""
        self._buffer.request_full(reason)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every pending change is synced (and the start reconcile done); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if self._buffer.wait_idle(0.2 if left is None else min(left, 0.2)):
                # Idle includes the derived entries of the last save (built behind it).
                self._writer.wait_derived(None if deadline is None else max(0.0, deadline - time.monotonic()))
                return True
        return True

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the agent has stopped (by ``stop()`` or an error); True if it has."""
        return self._finished.wait(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._finished.is_set()

    def run_once(self) -> SyncReport:
        """Reconcile the index with the folder now, in this thread, and return the report.

        No observer is started. Raises the ``RagtuiError`` that sync raises.
        """
        if not os.path.isdir(self.folder):
            raise UsageError(f"{self.folder} is not a folder: give the folder of documents to watch")
        self._emit("reconcile", "reconciling the whole folder (start)", reason="start")
        report = self._sync(None)
        self.stats.full_reconciles += 1
        self._reported(report)
        return report

    # -- watchdog side (its threads: record, never block) -----------------------------

    def _on_fs_event(self, event) -> None:
        self.stats.events += 1
        changes = classify(event, self._scope)
        if changes == ROOT_GONE:
            self._buffer.signal_root_gone()
        elif changes:
            self._buffer.record(changes)
        else:
            self.stats.ignored += 1

    def _on_watch_limit(self, error: OSError) -> None:
        self._buffer.signal_fallback(limit_message(error))

    # -- the worker -------------------------------------------------------------------

    def _call(self, callback, *args) -> None:
        """Run a user callback; its exception goes to ``on_error`` and never stops the agent."""
        if callback is None:
            return
        try:
            callback(*args)
        except Exception as e:  # noqa: BLE001 - the caller's bug, reported where the caller listens
            if callback is not self.on_error and self.on_error is not None:
                try:
                    self.on_error(e)
                except Exception:  # noqa: BLE001
                    pass

    def _emit(self, kind: str, message: str, **data) -> None:
        self._call(self.on_event, AgentEvent(kind, message, data))

    def _run(self) -> None:
        try:
            if self._start_observer():
                self._emit("started", f"watching {self.folder} ({self.mode}) for index {self.index_id!r}",
                           folder=self.folder, mode=self.mode, index_path=str(self.index_path))
            while True:
                batch = self._buffer.next_batch(self._tick())
                signals = self._buffer.take_signals()
                if signals.stop:
                    if batch is not None:
                        self._buffer.requeue(batch)
                    break
                if signals.fallback and self.mode == "inotify":
                    self._fall_back(signals.fallback)
                root = self._root_ok(signals.root_gone)
                if root != "ok":
                    if batch is not None:
                        # Covered by the full reconcile that follows a restart, or moot while paused.
                        self._buffer.requeue(batch) if root == "restarted" else self._buffer.done()
                    continue
                if self._next_periodic is not None and time.monotonic() >= self._next_periodic:
                    self._next_periodic = None
                    self._buffer.request_full("periodic")
                if batch is not None:
                    self._process(batch)
                    self._last_sync = time.monotonic()
                elif self._last_sync is not None and time.monotonic() - self._last_sync >= self.idle_seconds:
                    self._last_sync = None  # once per idle spell: the next sync starts another
                    self._call(self.on_idle)
        except BaseException as e:  # noqa: BLE001 - the agent's one place for fatal errors
            self.error = e
            self.stats.errors += 1
            self._call(self.on_error, e)
        finally:
            stop_observer(self._observer)
            self._observer = None
            self.mode = "stopped"
            why = f": {self.error}" if self.error is not None else ""
            try:
                self._emit("stopped", f"stopped{why}", error=str(self.error) if self.error else None)
            finally:
                self._writer.wait_derived()  # the last generation's derived entries, stored or given up
                if self._keeper is not None:
                    self._keeper.release()
                self._finished.set()

    def _tick(self) -> float:
        """How long the worker may sleep: until the next folder check or periodic reconcile."""
        wait = self.root_check_seconds
        if self._next_periodic is not None:
            wait = min(wait, max(0.0, self._next_periodic - time.monotonic()))
        return wait

    def _start_observer(self) -> bool:
        """Watch the folder (inotify unless polling was asked for or forced); False if it is gone."""
        kind = "polling" if (self.poll or self._fell_back) else "inotify"
        # A poller sees no closes: a file is complete once it went unchanged
        # across more than one poll, whatever settle_seconds says for inotify.
        self._buffer.settle_seconds = self._settle if kind == "inotify" else 1.5 * self.poll_seconds
        hooks = Hooks(overflow=lambda: self._buffer.request_full("overflow"), watch_limit=self._on_watch_limit,
                      enters=lambda path: path == self.folder or self._scope.matters(path, True))
        self._root_id = _identity(self.folder)
        observer = None
        try:
            observer = self._factory(kind, hooks, self.poll_seconds)
            observer.schedule(Handler(self._on_fs_event), self.folder, recursive=True, event_filter=EVENT_FILTER)
            observer.start()
        except OSError as e:
            stop_observer(observer)
            if kind == "inotify" and e.errno in LIMITS:
                self._fell_back = True
                self._emit("fallback", limit_message(e), errno=e.errno)
                return self._start_observer()
            if _identity(self.folder) is None:
                return False  # gone while we started: _root_ok pauses
            raise StorageError(f"cannot watch {self.folder}: {e.strerror or e}") from None
        self._observer = observer
        self.mode = kind
        return True

    def _fall_back(self, message: str) -> None:
        stop_observer(self._observer)
        self._observer = None
        self._fell_back = True
        self._emit("fallback", message)
        self._start_observer()
        self._buffer.request_full("polling")

    def _root_ok(self, root_gone: bool) -> str:
        """"ok", "restarted" (watching anew; a full reconcile is queued) or "paused" (the folder is gone)."""
        ident = _identity(self.folder)
        if ident is not None and self._observer is not None and not root_gone and ident == self._root_id:
            return "ok"
        stop_observer(self._observer)
        self._observer = None
        # Back, or replaced by another folder of the same name: the old
        # watches are dead either way, so watch anew and compare everything.
        if ident is not None and self._start_observer():
            resumed, self._paused = self._paused, False
            self._buffer.request_full("resumed")
            if resumed:
                self._emit("resumed", f"{self.folder} is back: reconciling the index with it", folder=self.folder)
            return "restarted"
        self._buffer.clear()
        if not self._paused:
            self._paused = True
            self.mode = "paused"
            self._emit("paused", f"{self.folder} vanished: keeping the index as it is until the folder is back",
                       folder=self.folder)
        return "paused"

    def _rewatch(self) -> None:
        """Watch anew: which folders get an inotify watch (or are polled) follows the ignore files."""
        stop_observer(self._observer)
        self._observer = None
        self._scope.invalidate()
        if not self._start_observer():
            self._buffer.wake()  # the folder is gone: _root_ok pauses next

    def _process(self, batch: Batch) -> None:
        if batch.full is None and self.rules.ignore_files and any(is_ignore_file(p) for p in batch.paths):
            # Started before the reconcile, so that nothing changed meanwhile is missed.
            self._rewatch()
            batch = Batch(full="ignore-file", held=batch.held, since=batch.since)
        if batch.full is not None:
            paths = None
            self.stats.full_reconciles += 1
            if batch.full == "overflow":
                self._emit("reconcile", "inotify queue overflowed (events were lost): reconciling the whole folder",
                           reason=batch.full)
            else:
                self._emit("reconcile", f"reconciling the whole folder ({batch.full})", reason=batch.full)
        else:
            paths = compact_paths(batch.paths)
            if len(paths) > self.max_batch_paths:
                # Cheaper as one walk than as many named paths (see spec/watch.md).
                paths = None
                self.stats.full_reconciles += 1
        self._emit("batch", f"syncing {'the whole folder' if paths is None else f'{len(paths)} path(s)'}",
                   paths=list(batch.paths), full=batch.full)
        if batch.held:
            self._emit("held", f"{batch.held} file(s) still open for writing: waiting for them to be closed",
                       held=batch.held)
        try:
            report = self._sync(paths)
        except _Abandoned:
            self._buffer.requeue(batch)
            return
        except UsageError:
            if _identity(self.folder) is not None:
                raise
            self._buffer.requeue(batch)  # the folder vanished mid-sync: _root_ok pauses next
            self._buffer.wake()
            return
        except TRANSIENT as e:
            self.stats.errors += 1
            self._backoff = min(MAX_BACKOFF, self._backoff * 2 or 1.0)
            self._buffer.requeue(batch, not_before=time.monotonic() + self._backoff)
            self._emit("retry", f"{e}; retrying in {self._backoff:.0f} s", error=str(e), seconds=self._backoff)
            self._call(self.on_error, e)
            return
        self._backoff = 0.0
        if paths is None and self.reconcile_every:
            self._next_periodic = time.monotonic() + self.reconcile_every
        try:
            self._reported(report, latency=time.monotonic() - batch.since if batch.since else None)
        finally:
            self._buffer.done()  # after the callbacks: wait_idle() then sees what they did
        if paths is None:
            self._prepare()

    def _prepare(self) -> None:
        """Have the index open before the first save needs it (a no-op once this process published).

        The first time it is done, the agent says ``ready``: from then on a save is spliced
        from memory (a save that comes earlier waits for the warm-up, or reads what it needs).
        """
        t0 = time.monotonic()
        try:
            # The warm-up only saves time later: a save already waiting goes first.
            opened = self._writer.prepare(warm_up=True, should_stop=self._buffer.has_work)
            if opened and not self._said_ready and not self._buffer.has_work():
                # The heap the first save works in, faulted in now; or, for an index too large for that, what the
                # opening freed given back (only where freed memory is kept: ragtui watch).
                postings = self._writer.open_postings()
                grow_heap_for(postings)
                release_before_save(postings)
        except Exception:  # noqa: BLE001 - it only saves time; the next sync reads what it needs itself
            opened = False
        if not self._said_ready:
            self._said_ready = True
            how = "open in memory" if opened else "not opened ahead (the next save reads it)"
            self._emit("ready", f"ready: index {self.index_id!r} {how}", warm=opened,
                       seconds=round(time.monotonic() - t0, 3))

    def _sync(self, paths: list[str] | None) -> SyncReport:
        self._writing = False
        release_before_save(self._writer.open_postings())  # only where freed memory is kept: ragtui watch
        return self._writer.sync(paths, progress=self._progress)

    def _progress(self, stage: str, done: int, total: int) -> None:
        if stage == "write":
            self._writing = True  # from here on the publish completes: abandoning could only lose state
        elif self._buffer.stopping and not self._writing:
            raise _Abandoned()

    def _reported(self, report: SyncReport, latency: float | None = None) -> None:
        self.stats.syncs += 1
        self.last_report = report
        if latency is not None:
            report.seconds["latency"] = latency
        self._call(self.on_sync, report)
        if report.published:
            self.stats.publishes += 1
            self._call(self.on_publish, report)
