"""From noisy filesystem events to quiet batches of paths: classification and debouncing.

Two pieces, both free of threads of their own and of watchdog observers:

``Scope`` and ``classify(event, scope)``
    turn one watchdog event into the ``Change`` values it implies (a path that
    may have changed, and whether a writer may still hold it open), or
    ``ROOT_GONE`` when the watched folder itself was deleted. Events under
    the artifacts root, in hidden, excluded or ignored folders, and for files
    that are not documents (swap, backup and temp files, files an ignore file
    or pattern leaves out) imply nothing. An event for an ignore file
    (``.gitignore``, ``.ignore``) the walk reads is a change of its own kind:
    the agent reconciles the whole folder.

``ChangeBuffer``
    coalesces changes per path and hands the worker one ``Batch`` once the
    events have been quiet for ``quiet_seconds`` (or, under endless churn,
    after ``max_delay`` seconds), holding back files still being written.
    Built like watchdog's ``utils.event_debouncer.EventDebouncer`` (one
    condition variable), but without a thread of its own: producers call
    ``record``, the agent's worker blocks in ``next_batch``.

Nothing here decides what changed: core.sync does, by size, times and
content hash. A path in a batch only means "look here".
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Literal

from ragtui.core.ingest.patterns import IGNORE_FILES
from ragtui.core.ingest.walk import WalkRules

__all__ = ["CLOSED_FAST_PATHS", "ROOT_GONE", "Batch", "Change", "ChangeBuffer", "Scope", "classify", "compact_paths", "is_ignore_file"]

ROOT_GONE: Final = "root-gone"
"""What ``classify`` returns when the watched folder itself was deleted."""


@dataclass(frozen=True)
class Change:
    """A path that may have changed.

    ``writing`` is True when the event says a writer has the file open (it
    was created or modified and not yet closed), False when the content is
    complete (closed after writing, renamed into place, deleted), and None
    when the event says nothing about writing (a touch, a folder).
    """

    path: str
    writing: bool | None = None
    closed: bool = False
    """True for a close after writing (inotify IN_CLOSE_WRITE): the writer is done with the file."""


class Scope:
    """Which paths under ``folder`` can hold documents, by the same rules as the walk.

    ``ignore_under`` are absolute folders whose events never matter (the
    artifacts root: the agent's own writes). Paths are compared as given by
    the observer, which reports them under ``folder`` exactly as it was
    scheduled, so every path here is absolute and not resolved. The
    folder's ignore files are read once per folder and remembered until
    ``invalidate()`` (``classify`` calls it when an ignore file or a folder
    changes).
    """

    def __init__(self, folder: str | os.PathLike, rules: WalkRules, ignore_under: Iterable[str | os.PathLike] = ()) -> None:
        self.folder = os.path.abspath(folder)
        self.rules = rules
        self._prefix = self.folder + os.sep
        self._ignore = tuple(os.path.abspath(p) for p in ignore_under)
        self._filter = rules.path_filter(self.folder)

    def inside(self, path: str) -> bool:
        return path.startswith(self._prefix)

    def ignored(self, path: str) -> bool:
        return any(path == p or path.startswith(p + os.sep) for p in self._ignore)

    def _rel(self, path: str) -> str:
        return path[len(self._prefix):].replace(os.sep, "/")

    def matters(self, path: str, is_directory: bool) -> bool:
        """Whether an event at ``path`` can change a document of the index."""
        if not self.inside(path) or self.ignored(path):
            return False
        return self._filter.wants(self._rel(path), is_directory)

    def is_ignore_file(self, path: str) -> bool:
        """Whether ``path`` is an ignore file the walk reads (in a folder it enters)."""
        if not self.rules.ignore_files or not self.inside(path):
            return False
        parent, name = os.path.split(path)
        if name not in IGNORE_FILES or self.ignored(parent):
            return False
        return parent == self.folder or self._filter.wants(self._rel(parent), True)

    def invalidate(self) -> None:
        """Read the ignore files again on the next question (they, or the folders, changed)."""
        self._filter.invalidate()


def is_ignore_file(path: str) -> bool:
    """Whether ``path`` is named like an ignore file (``.gitignore``, ``.ignore``)."""
    return os.path.basename(path) in IGNORE_FILES


def _text(path: bytes | str) -> str:
    return os.fsdecode(path) if isinstance(path, bytes) else path


def classify(event, scope: Scope) -> list[Change] | Literal["root-gone"]:
    """The changes one watchdog event implies, or ``ROOT_GONE``.

    A move yields its source (now gone) and its destination (now present),
    each only if it matters: a temp file renamed over ``a.md`` yields just
    ``a.md``; ``a.md`` renamed to the backup ``a.md~`` yields just ``a.md``.
    Opens, closes without writing and folder "modified" events yield nothing
    (the agent subscribes to none of them, and a read must never cause work).
    """
    kind = event.event_type
    is_dir = bool(event.is_directory)
    src = _text(event.src_path)
    if src == scope.folder:
        return ROOT_GONE if kind == "deleted" else []
    dest = _text(event.dest_path) if kind == "moved" else ""
    if is_dir and kind in ("created", "deleted", "moved"):
        scope.invalidate()  # a folder's ignore files come and go with it
    if not is_dir:
        touched = [p for p in (src, dest) if p and scope.is_ignore_file(p)]
        if touched:
            # The rules changed: what the walk enters or takes may differ anywhere below.
            scope.invalidate()
            return [Change(p, False) for p in touched]
    if kind == "moved":
        out = []
        if src and scope.matters(src, is_dir):
            out.append(Change(src, False))
        if dest and scope.matters(dest, is_dir):
            # A rename is atomic: whatever arrives under the new name is complete.
            out.append(Change(dest, False))
        return out
    if not scope.matters(src, is_dir):
        return []
    if is_dir:
        return [Change(src, None)] if kind in ("created", "deleted") else []
    if kind in ("created", "modified"):
        return [Change(src, True)]
    if kind == "closed":
        return [Change(src, False, closed=True)]
    if kind == "deleted":
        return [Change(src, False)]
    if kind == "attrib":
        return [Change(src, None)]
    return []


def compact_paths(paths: Iterable[str]) -> list[str]:
    """``paths`` sorted, without those that lie under another path of the set.

    A folder in a batch makes sync rescan everything under it, so the files
    a moved-in folder also reported add nothing but cost.
    """
    out: list[str] = []
    for p in sorted(set(paths), key=lambda s: s.split(os.sep)):
        if out and (p == out[-1] or p.startswith(out[-1] + os.sep)):
            continue
        out.append(p)
    return out


@dataclass(frozen=True)
class Batch:
    """One unit of work for the worker: some paths, or a full reconcile.

    ``full`` holds the reason of a full reconcile ("start", "overflow", "ignore-file",
    "periodic", "resumed", "polling", "manual", ...); it is None for a batch
    of ``paths``. ``held`` counts files left pending because a writer still
    holds them. ``since`` is the monotonic time of the oldest event covered.
    """

    paths: tuple[str, ...] = ()
    full: str | None = None
    held: int = 0
    since: float = 0.0


@dataclass
class _Pending:
    first: float
    last: float
    writing: bool = False
    closed: bool = False
    """Its last event was a close after writing."""


CLOSED_FAST_PATHS = 64
"""Up to this many pending paths, all closed after writing, wait only ``closed_quiet_seconds``."""


@dataclass
class _Signals:
    root_gone: bool = False
    fallback: str | None = None
    stop: bool = False
    wake: bool = False


class ChangeBuffer:
    """Thread-safe per-path coalescing with a quiet period (one consumer).

    Guarantees callers may rely on:

    * every recorded path is returned in exactly one later batch (or covered
      by a full reconcile), unless ``clear`` drops it;
    * a batch is released only after no event arrived for ``quiet_seconds``,
      or once its oldest event is ``max_delay`` seconds old;
    * a file still held by a writer (created or modified, not yet closed) is
      left out until it is closed or no event touched it for
      ``settle_seconds``. For inotify every write is an IN_MODIFY event, so
      "no event for settle_seconds" is exactly "size and mtime settled";
    * when every pending path's last event is a close after writing (and
      there are at most ``CLOSED_FAST_PATHS`` of them), the quiet period is
      ``closed_quiet_seconds`` instead: an editor's save is one close, and
      nothing more is coming for that file.
    """

    def __init__(
        self,
        quiet_seconds: float = 0.1,
        max_delay: float = 3.0,
        settle_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        closed_quiet_seconds: float = 0.01,
    ) -> None:
        self.quiet_seconds = quiet_seconds
        self.closed_quiet_seconds = closed_quiet_seconds
        self.max_delay = max_delay
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: dict[str, _Pending] = {}
        self._last_event = 0.0
        self._full: str | None = None
        self._full_since = 0.0
        self._not_before = 0.0
        self._signals = _Signals()
        self._busy = False
        self.recorded = 0
        """How many changes were recorded (for stats; no lock needed to read)."""

    # -- producers (watchdog threads, signal-free callers) ---------------------------

    def record(self, changes: Iterable[Change]) -> None:
        now = self._clock()
        with self._cond:
            n = 0
            # New events only push the consumer's deadline later, so it is
            # woken only when it may be waiting without one (nothing was
            # pending) or a held file was closed; a burst of 10,000 events
            # then costs one wake-up per quiet period, not one per event.
            wake = not self._pending
            for ch in changes:
                n += 1
                p = self._pending.get(ch.path)
                if p is None:
                    p = self._pending[ch.path] = _Pending(now, now)
                p.last = now
                p.closed = ch.closed
                # A close may make the release due sooner than the deadline the consumer waits for.
                wake = wake or ch.closed
                if ch.writing is not None:
                    wake = wake or (p.writing and not ch.writing)
                    p.writing = ch.writing
            if n:
                self.recorded += n
                self._last_event = now
                if wake:
                    self._cond.notify_all()

    def request_full(self, reason: str) -> None:
        """Ask for a full reconcile; it replaces (covers) every pending path."""
        with self._cond:
            if self._full is None:
                self._full = reason
                self._full_since = self._clock()
            self._cond.notify_all()

    def signal_root_gone(self) -> None:
        with self._cond:
            self._signals.root_gone = True
            self._cond.notify_all()

    def signal_fallback(self, message: str) -> None:
        with self._cond:
            if self._signals.fallback is None:
                self._signals.fallback = message
            self._cond.notify_all()

    def signal_stop(self) -> None:
        with self._cond:
            self._signals.stop = True
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._signals.wake = True
            self._cond.notify_all()

    # -- the consumer ---------------------------------------------------------------

    def take_signals(self) -> _Signals:
        """The signals raised since the last call (stop stays raised)."""
        with self._cond:
            s = self._signals
            self._signals = _Signals(stop=s.stop)
            return s

    @property
    def stopping(self) -> bool:
        return self._signals.stop

    def next_batch(self, timeout: float | None) -> Batch | None:
        """Block until a batch is ready, a signal is raised, or ``timeout`` passes.

        Returns None on a signal or a timeout (check ``take_signals``).
        """
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                s = self._signals
                if s.stop or s.root_gone or s.fallback or s.wake:
                    return None
                now = self._clock()
                wait_until = deadline
                if now >= self._not_before:
                    batch, ready_at = self._ready(now)
                    if batch is not None:
                        self._busy = True
                        return batch
                    if ready_at is not None:
                        wait_until = ready_at if wait_until is None else min(wait_until, ready_at)
                elif self._full is not None or self._pending:
                    wait_until = self._not_before if wait_until is None else min(wait_until, self._not_before)
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(None if wait_until is None else max(0.0, wait_until - now))

    def _ready(self, now: float) -> tuple[Batch | None, float | None]:
        """(the batch to release now, or None; when to look again)."""
        if self._full is not None:
            batch = Batch(full=self._full, since=self._full_since)
            self._full = None
            self._pending.clear()
            return batch, None
        if not self._pending:
            return None, None
        # A complete file is overdue max_delay after its first event (endless
        # churn elsewhere must not starve it); a file still being written is
        # due once it settled. Held files must not make new paths overdue, or
        # a long-open file would cut every later save into pieces.
        quiet = self.quiet_seconds
        if len(self._pending) <= CLOSED_FAST_PATHS and all(p.closed for p in self._pending.values()):
            quiet = min(quiet, self.closed_quiet_seconds)
        due_at = self._last_event + quiet
        for p in self._pending.values():
            due_at = min(due_at, p.last + self.settle_seconds if p.writing else p.first + self.max_delay)
        if now < due_at:
            return None, due_at
        ready, held, settle_at = [], 0, None
        for path, p in self._pending.items():
            if not p.writing or now >= p.last + self.settle_seconds:
                ready.append(path)
            else:
                held += 1
                at = p.last + self.settle_seconds
                settle_at = at if settle_at is None else min(settle_at, at)
        if held and ready:
            # A folder in the batch makes sync read everything under it, so a
            # folder that holds an open file waits for that file too.
            busy = [path for path, p in self._pending.items() if p.writing and path not in ready]
            keep = [r for r in ready if any(b.startswith(r + os.sep) for b in busy)]
            if keep:
                ready = [r for r in ready if r not in keep]
                held += len(keep)
        if not ready:
            return None, settle_at
        since = min(self._pending[p].first for p in ready)
        for path in ready:
            del self._pending[path]
        return Batch(paths=tuple(ready), held=held, since=since), None

    def done(self) -> None:
        """The consumer finished the batch it took (``idle`` may become True)."""
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def requeue(self, batch: Batch, not_before: float = 0.0) -> None:
        """Give a batch back (it failed or was abandoned); retry it no sooner than ``not_before``."""
        now = self._clock()
        with self._cond:
            if batch.full is not None:
                if self._full is None:
                    self._full, self._full_since = batch.full, batch.since
            else:
                for path in batch.paths:
                    self._pending.setdefault(path, _Pending(batch.since, now))
            self._not_before = max(self._not_before, not_before)
            self._busy = False
            self._cond.notify_all()

    def clear(self) -> None:
        """Drop every pending path and full request (the folder is gone; a reconcile will follow)."""
        with self._cond:
            self._pending.clear()
            self._full = None
            self._cond.notify_all()

    def has_work(self) -> bool:
        """Whether a change or a full reconcile is waiting (cheap; for work that may be skipped)."""
        return bool(self._pending) or self._full is not None

    def pending_paths(self) -> list[str]:
        with self._cond:
            return sorted(self._pending)

    def idle(self) -> bool:
        with self._cond:
            return not self._pending and self._full is None and not self._busy

    def wait_idle(self, timeout: float | None) -> bool:
        """Block until nothing is pending or being processed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending or self._full is not None or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True

