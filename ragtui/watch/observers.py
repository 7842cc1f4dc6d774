"""The watchdog side: observers that report what watchdog itself only logs.

watchdog 7.1's inotify backend handles two kernel conditions on its own and
tells its caller nothing:

* **queue overflow** (``IN_Q_OVERFLOW``: events were lost): ``InotifyFD``
  logs a warning and calls ``on_queue_overflow()`` on each watch group, which
  rebuilds its watches. No event reaches the handler.
* **the watch limit** (``ENOSPC`` from ``inotify_add_watch``,
  ``fs.inotify.max_user_watches``): raised for the root folder, but
  swallowed for every subfolder, which then goes silently unwatched.

``HookedInotifyObserver`` is watchdog's ``InotifyObserver`` with an
``InotifyFD`` subclass that calls ``Hooks.overflow()`` after watchdog has
handled an overflow and ``Hooks.watch_limit(error)`` whenever adding a watch
hits a kernel limit, root or not. Both run on watchdog's reader thread and
must only record the fact.

``make_observer(kind, hooks, poll_seconds)`` is the seam the agent builds
observers through (tests replace it to inject failures).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver

from ragtui.core.index.overlay import OVERLAY_SUFFIX

__all__ = ["EVENT_FILTER", "Hooks", "IndexFollower", "limit_message", "make_observer"]

EVENT_FILTER = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
"""The events the agent subscribes to. Leaving out opens, closes without
writing and folder "modified" events keeps them out of the kernel queue
altogether: the agent's own reads of the documents then cause no event."""

LIMITS = {
    errno.ENOSPC: "fs.inotify.max_user_watches",
    errno.EMFILE: "fs.inotify.max_user_instances",
}
"""The kernel limits behind inotify's two out-of-resources errors."""


@dataclass
class Hooks:
    """What an observer reports besides events, and asks of the agent (called from watchdog's threads)."""

    overflow: Callable[[], None] = lambda: None
    watch_limit: Callable[[OSError], None] = lambda error: None
    enters: Callable[[str], bool] = lambda path: True
    """Whether to watch (inotify) or descend into (polling) this folder: the walk's rules (not hidden, not
    excluded, not the artifacts root). Must be True for the watched folder itself."""


def limit_message(error: OSError) -> str:
    """One line naming the kernel setting to raise, with its current value."""
    setting = LIMITS[error.errno] if error.errno in LIMITS else "fs.inotify.max_user_watches"
    try:
        value = Path("/proc/sys", *setting.split(".")).read_text().strip()
    except OSError:
        value = "?"
    return (
        f"inotify limit reached ({error.strerror or error}; {setting} = {value}): "
        f"falling back to polling; raise it with `sysctl {setting}=524288` for instant updates"
    )


def make_observer(kind: str, hooks: Hooks, poll_seconds: float = 1.0) -> BaseObserver:
    """A new, unstarted observer: ``"inotify"`` (hooked) or ``"polling"``.

    Constructing an inotify observer may raise ``OSError`` (EMFILE: too many
    inotify instances); so may its ``schedule``/``start`` (ENOSPC: too many
    watches). The caller falls back to ``"polling"``.
    """
    if kind == "polling":
        from watchdog.observers.polling import PollingObserverVFS

        def listdir(folder):
            # Prune where the walk never goes (.git, node_modules, the artifacts):
            # a poller's cost is one stat per entry per poll.
            with os.scandir(folder) as entries:
                return [e for e in entries if not (e.is_dir(follow_symlinks=False) and not hooks.enters(e.path))]

        # lstat, like the walk: never follow a link into another folder (or a loop).
        return PollingObserverVFS(os.lstat, listdir, polling_interval=poll_seconds)
    if kind == "inotify":
        return _hooked_inotify_observer(hooks)
    raise ValueError(f"unknown observer kind {kind!r}")


def _hooked_inotify_observer(hooks: Hooks) -> BaseObserver:
    # Imported here: the module only exists on Linux, and polling must still work elsewhere.
    try:
        from watchdog.observers.inotify import InotifyEmitter
        from watchdog.observers.inotify_c import InotifyFD

        if not all(hasattr(InotifyFD, name) for name in ("handle_event", "add_callback")):
            raise ImportError("watchdog's InotifyFD lacks the methods hooked below")
    except ImportError:
        from importlib.metadata import version

        from ragtui.core.errors import UsageError

        raise UsageError(
            f"watching with inotify needs watchdog >= 7.1 (found {version('watchdog')}), whose inotify "
            "reader reports queue overflows: pip install -U 'watchdog>=7.1', or watch with --poll"
        ) from None

    class _HookedFD(InotifyFD):
        def handle_event(self, event) -> None:
            super().handle_event(event)
            if event.is_queue_overflow:
                # After watchdog rebuilt its watches, so the reconcile that
                # follows cannot miss a folder created meanwhile.
                hooks.overflow()

        def add_callback(self, path, mask, callback, id_):
            if not hooks.enters(os.fsdecode(path)):
                # A folder the walk never enters (.git, node_modules, hidden
                # ones, the artifacts root): no watch, so its churn costs
                # nothing. watchdog passes over a sub-folder it cannot watch.
                raise OSError(errno.EPERM, "not watched: the walk does not enter this folder", os.fsdecode(path))
            try:
                return super().add_callback(path, mask, callback, id_)
            except OSError as e:
                if e.errno in LIMITS:
                    hooks.watch_limit(e)
                raise

    class HookedInotifyObserver(BaseObserver):
        """``InotifyObserver`` whose inotify reader reports overflows and watch limits."""

        def __init__(self) -> None:
            self.inotify_fd = _HookedFD()
            self.inotify_fd.start()
            super().__init__(InotifyEmitter, inotify_fd=self.inotify_fd)

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            self.inotify_fd.stop()
            self.inotify_fd.join()

    return HookedInotifyObserver()


class Handler(FileSystemEventHandler):
    """Passes every event to ``sink`` on watchdog's dispatch thread (sink must be quick)."""

    def __init__(self, sink: Callable[[object], None]) -> None:
        self._sink = sink

    def dispatch(self, event) -> None:
        self._sink(event)


def stop_observer(observer: BaseObserver | None, timeout: float = 10.0) -> None:
    """Stop and join an observer, started or not (a failed start leaves threads to stop)."""
    if observer is None:
        return
    try:
        observer.stop()
    except Exception:  # noqa: BLE001 - stopping a half-built observer must not mask the real error
        pass
    if observer.is_alive():
        observer.join(timeout)


class IndexFollower:
    """Calls ``on_change()`` when a new generation of ``<artifacts>/rag/<index_id>`` is published.

    For a reader in another process than the writer (the TUI following a
    ``ragtui watch`` daemon): publishing renames a fresh link over
    ``rag/<index_id>``, which arrives as one "moved" event in ``rag/``; the
    overlay a watch agent writes before it publishes (``core.index.overlay``)
    is renamed into ``rag/.gen/<index_id>/``, watched too once it exists. The
    callback runs on watchdog's thread and should only schedule the reload
    (``Retriever.reload()`` is cheap when nothing changed). ``rag/`` must
    exist (it does once any index was built). Nothing is written anywhere.
    """

    def __init__(self, artifacts: str | os.PathLike, index_id: str, on_change: Callable[[], None], *,
                 poll: bool = False, poll_seconds: float = 1.0) -> None:
        from ragtui.core.ingest.publish import index_dir, rag_root

        self.root = os.path.abspath(rag_root(artifacts))
        self.link = os.path.abspath(index_dir(artifacts, index_id))
        self.generations = os.path.join(self.root, ".gen", index_id)
        self._watching_generations = False
        self._on_change = on_change
        self._kind = "polling" if poll else "inotify"
        self._poll_seconds = poll_seconds
        self._observer: BaseObserver | None = None

    def _sink(self, event) -> None:
        paths = {os.fsdecode(event.src_path), os.fsdecode(event.dest_path)}
        if self.link in paths:
            self._watch_generations()  # the first publish makes the folder
            self._on_change()
        elif any(p.endswith(OVERLAY_SUFFIX) and os.path.dirname(p) == self.generations for p in paths):
            self._on_change()

    def _watch_generations(self) -> None:
        observer = self._observer
        if observer is None or self._watching_generations or not os.path.isdir(self.generations):
            return
        try:
            observer.schedule(Handler(self._sink), self.generations, recursive=False)
            self._watching_generations = True
        except OSError:
            pass  # overlays go unseen; publishes are still followed

    def start(self) -> IndexFollower:
        from ragtui.core.errors import IndexMissingError

        if not os.path.isdir(self.root):
            raise IndexMissingError(f"no index under {self.root}: build one with `ragtui ingest FOLDER`")
        observer = make_observer(self._kind, Hooks(), self._poll_seconds)
        try:
            # Every event kind: rag/ only changes when something is published, and a
            # poller reports the replaced link as deleted + created, inotify as moved.
            observer.schedule(Handler(self._sink), self.root, recursive=False)
            observer.start()
        except OSError:
            stop_observer(observer)
            raise
        self._observer = observer
        self._watch_generations()
        return self

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        stop_observer(observer)

    def __enter__(self) -> IndexFollower:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
