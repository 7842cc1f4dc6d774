"""The terminal UI: Pilot tests with assertions on the app's state, SVG snapshots, and one run in tmux.

Shared harness here: ``build_demo`` makes an index from assets/demo with the
deterministic ``HashEmbedder`` (and a fixed ``created_at``), ``make_app``
builds the app the way the CLI does but with that embedder and no history
file, and ``wait_for`` waits on the app's state (re-checked after each
pause) instead of sleeping for a fixed time. ``Notices`` records the app's
notifications through Textual's public test hook (``run_test(message_hook=...)``
sees every ``Notify`` message), so no test reads the app's private toast list.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from unittest import mock

from textual.message import Message
from textual.notifications import Notify

from ragtui.config import Settings
from ragtui.core.ingest.sync import sync
from ragtui.tui.history import QueryHistory
from ragtui.tui.ragtui_app import RagtuiApp, create_app
from tests.unit.fakes import HashEmbedder

DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo"
FIXED_TIME = "2026-01-01T12:00:00Z"
WAIT = 30.0
"""Seconds before a wait fails (a loaded 2-core CI machine is slow, never this slow)."""

# Small chunks, so each demo document has several and line ranges mean something.
MAX_TOKENS, OVERLAP = 48, 8


def ingest(folder: Path, artifacts: Path, index_id: str | None = None):
    """Index ``folder`` as ``ragtui ingest`` would, with the test embedder and a fixed created_at."""
    with mock.patch("ragtui.core.ingest.writer.utc_now", return_value=FIXED_TIME):
        return sync(folder, artifacts=artifacts, embedder=HashEmbedder(), index_id=index_id,
                    max_tokens=MAX_TOKENS, overlap=OVERLAP)


def build_demo(root: Path, name: str = "demo") -> tuple[Path, Path]:
    """Copy assets/demo to ``root/src/<name>`` and index it into ``root/artifacts``; (artifacts, folder)."""
    folder = root / "src" / name
    shutil.copytree(DEMO, folder)
    artifacts = root / "artifacts"
    ingest(folder, artifacts)
    return artifacts, folder


class Notices:
    """Every notification the app was sent, in order; pass it as ``app.run_test(message_hook=notices)``.

    Unlike the toasts on screen, none expires: what was said stays said.
    """

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Notify):
            self.sent.append(message.notification.message)

    def count(self, words: str) -> int:
        """How many notifications contain ``words``."""
        return sum(words in said for said in self.sent)

    def any(self, words: str) -> bool:
        return self.count(words) > 0


def make_app(artifacts: Path, *, index: str | None = None, embedder_factory=None, **options) -> RagtuiApp:
    """The app as the CLI builds it, with the test embedder, no debounce pause and no history file."""
    options.setdefault("debounce", 0.0)
    options.setdefault("poll_seconds", 0.1)
    options.setdefault("history", QueryHistory(None))
    factory = embedder_factory or (lambda settings: HashEmbedder())
    return create_app(Settings(artifacts=artifacts, index=index), embedder_factory=factory, **options)


async def wait_for(pilot, predicate, what: str, timeout: float = WAIT) -> None:
    """Pause until ``predicate()`` holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


def idle(app: RagtuiApp) -> bool:
    """No search or citation worker is running (what the results and detail show is final)."""
    return not any(w.is_running for w in app.workers if w.group in ("search", "cite", "jump", "compare"))


async def ready(pilot, vectors: str = "ready") -> RagtuiApp:
    """Wait until the index is open, the embedder settled (``vectors``) and IVF built when on."""
    app = pilot.app
    await wait_for(pilot, lambda: app.index_state == "ready", "the index to open")
    await wait_for(pilot, lambda: app.vectors == vectors, f"vectors to be {vectors}")
    if vectors == "ready":
        await wait_for(pilot, lambda: app.ivf_state == "built", "the IVF lists")
    return app


async def search(pilot, query: str) -> RagtuiApp:
    """Type ``query`` into the (focused) query box and wait for its results to be painted."""
    app = pilot.app
    await pilot.press(*query)
    await settled(pilot, query)
    return app


async def settled(pilot, query: str | None = None) -> None:
    """Wait until the newest search is painted (for ``query`` when given) and the detail pane resolved."""
    app = pilot.app

    def done() -> bool:
        if query is not None and app.query_text != query:
            return False
        return app.rendered_seq == app.requested_seq and idle(app)

    await wait_for(pilot, done, f"results for {query!r}")
    await pilot.pause()
