"""Live updates from ``ragtui.watch``, turned into app messages.

``LiveAgent``: ``ragtui --watch FOLDER`` runs the sync agent in-process,
built by ``ragtui.app.build_agent`` as ``ragtui watch`` builds its own (the
same walk rules and ignore files, the same periodic reconcile).
``LiveFollower``: notices, through filesystem events on ``<artifacts>/rag/``,
when anyone (the agent, an ingest in another process) publishes the open
index. Both know nothing of Textual and call back on their own threads;
``post_message`` is thread-safe, so each callback only posts. The app then
reloads the index and re-runs the query (its 1 s poll does the same when
filesystem events are not available).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragtui import app as app_layer
from ragtui.config import Settings
from ragtui.core.errors import RagtuiError
from ragtui.tui.messages import IndexChanged, IndexPublished, WatchActivity

if TYPE_CHECKING:
    from ragtui.watch import WatchAgent

__all__ = ["LiveAgent", "LiveFollower", "describe_sync"]


def describe_sync(report) -> str:
    """One short line about a sync (a ``core.sync.SyncReport``)."""
    files = len(report.added) + len(report.changed) + len(report.removed)
    if not report.published:
        return f"up to date ({report.chunks_total} chunks)"
    return (
        f"published {report.chunks_total} chunks "
        f"(+{report.chunks_added} −{report.chunks_removed}, {files} file{'s' if files != 1 else ''})"
    )


class LiveAgent:
    """Owns one ``WatchAgent`` on ``folder`` for ``index_id``; ``post`` receives the messages.

    ``rules`` are the walk rules (None: ``ragtui.app.walk_rules()``, what ``ragtui
    watch FOLDER`` uses without walk flags). ``start()`` returns at once (the
    agent reconciles the folder first, in its thread); ``stop()`` waits up to
    ``timeout`` seconds for a publish in progress to finish.
    """

    def __init__(self, post: Callable, folder: str | os.PathLike, settings: Settings, index_id: str, embedder,
                 rules=None) -> None:
        self.post = post
        self.folder = Path(folder)
        self.settings = settings
        self.index_id = index_id
        self.embedder = embedder
        self.rules = rules
        self.agent: WatchAgent | None = None

    @staticmethod
    def index_id_for(folder: str | os.PathLike, settings: Settings) -> str:
        """The index the agent writes: ``--index``, else the folder's name (as ``ragtui ingest``)."""
        return app_layer.index_id_for(folder, settings)

    def start(self) -> None:
        self.agent = app_layer.build_agent(
            self.settings,
            self.folder,
            self.rules,
            index_id=self.index_id,
            embedder=self.embedder,
            on_publish=self._published,
            on_sync=self._synced,
            on_error=self._failed,
            on_event=self._event,
        )
        self.agent.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self.agent is not None:
            self.agent.stop(timeout=timeout)

    # -- callbacks: the agent's thread ---------------------------------------------------

    def _published(self, report) -> None:
        self.post(IndexPublished(describe_sync(report)))

    def _synced(self, report) -> None:
        self.post(WatchActivity(f"watch: {describe_sync(report)}"))

    def _failed(self, error: BaseException) -> None:
        self.post(WatchActivity(f"watch: {error}", error=True))

    def _event(self, event) -> None:
        if event.kind != "stopped" or event.data.get("error"):
            self.post(WatchActivity(f"watch: {event.message}", error=event.kind in ("paused", "retry")))


class LiveFollower:
    """Posts ``IndexChanged`` when a generation of ``index_id`` is published; ``start`` never raises.

    ``active`` tells whether it is following (it is not when ``rag/`` cannot
    be watched; the app's poll covers that case).
    """

    def __init__(self, post: Callable, artifacts: str | os.PathLike, index_id: str) -> None:
        self.post = post
        self.artifacts, self.index_id = artifacts, index_id
        self._follower: Any = None  # an IndexFollower while events are followed

    @property
    def active(self) -> bool:
        return self._follower is not None

    def start(self) -> LiveFollower:
        try:
            from ragtui.watch import IndexFollower

            self._follower = IndexFollower(self.artifacts, self.index_id, lambda: self.post(IndexChanged())).start()
        except (ImportError, OSError, RagtuiError):
            self._follower = None  # no events (an inotify limit, no rag/ folder): polling alone
        return self

    def stop(self) -> None:
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()
