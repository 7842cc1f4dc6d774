"""The embedding backend failing during ingest, against the real loopback server (tests/helpers/embed_server).

Every case indexes version 1 of a folder with a healthy server, moves the
folder to version 2, makes the server misbehave, and runs ``sync`` again:

* the sync raises ``EmbeddingError`` with a message naming the server and
  the problem; nothing is published; the index is byte for byte version 1;
* once the server is healthy again, the next sync publishes version 2 and
  does not send any text the failed run already had embedded.

``DYING`` runs the server as its own process and SIGKILLs it after it has
answered some requests (while it holds the next one), so the client sees a
real connection reset and then a refused connection.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from ragtui.core.embedders.http import HTTPEmbedder
from ragtui.core.errors import EmbeddingError
from ragtui.core.ingest import assemble as sync_mod
from tests.helpers.embed_server import EmbedServer, Fault
from tests.reliability.cases import Case
from tests.reliability.helpers import REPO_ROOT, leftovers, make_folder, run_sync, snapshot
from tests.unit.fakes import HashEmbedder, WordTokenizer

MODEL = "test-hash"
DIM = 16
BATCH = 4
"""Texts per HTTP request and per sync batch here, so a run makes many requests and journals each."""

FAULTS = {
    "server answers HTTP 500 (every retry)": lambda: [Fault("status", 500)] * 2,
    "server refuses: HTTP 400": lambda: [Fault("status", 400, message="model not loaded")],
    "server answers garbage (not JSON)": lambda: [Fault("garbage")] * 2,
    "connection dropped mid-answer": lambda: [Fault("drop")] * 2,
    "embeddings of the wrong dimension": lambda: [Fault("wrong_dim")],
    "NaN in an embedding": lambda: [Fault("nan")],
    "an all-zero embedding": lambda: [Fault("zero")],
    "one embedding missing": lambda: [Fault("short")],
    "indexes that do not match the inputs": lambda: [Fault("bad_index")],
    "server hangs (client timeout)": lambda: [Fault("hang")] * 2,
    "a vector per token (server without pooling)": lambda: [Fault("per_token")],
}
"""name -> the faults the request after the first few healthy ones meets (enough for every retry)."""


def client(url: str, **kw) -> HTTPEmbedder:
    options = dict(model=MODEL, dim=DIM, tokenizer=WordTokenizer(), batch_size=BATCH, concurrency=1, retries=1,
                   backoff=0.0, timeout=1.0)
    options.update(kw)
    return HTTPEmbedder(url, **options)


def _embedded_texts(server) -> list[str]:
    return [t for body in server.seen_bodies("/v1/embeddings") for t in body["input"]]


class _SmallBatches:
    """Make ``sync`` embed ``BATCH`` texts per call, as it does 256 at a time on a large folder."""

    def __enter__(self):
        self.saved = sync_mod.EMBED_BATCH
        sync_mod.EMBED_BATCH = BATCH

    def __exit__(self, *exc):
        sync_mod.EMBED_BATCH = self.saved


def _start(base: Path, server_url: str):
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1)
    run_sync(folder, art, embedder=client(server_url))
    old = snapshot(art / "rag" / "docs")
    make_folder(folder, 2)
    return folder, art, old


def check_fault(base: Path, name: str, healthy_first: int = 2) -> None:
    with EmbedServer(HashEmbedder(DIM, MODEL), hang_limit=30.0) as server, _SmallBatches():
        folder, art, old = _start(base, server.url)
        # Healthy answers first ("reorder" is a valid answer listed backwards), then the fault.
        server.queue(*[Fault("reorder", path="/v1/embeddings")] * healthy_first,
                     *[_on_embeddings(f) for f in FAULTS[name]()])
        before = len(_embedded_texts(server))
        try:
            run_sync(folder, art, embedder=client(server.url))
        except EmbeddingError as e:
            message = str(e)
        else:
            raise AssertionError("the sync did not fail")
        server.release()
        assert server.pending_faults() == 0, "the fault script was not used up"
        assert server.url in message and "\n" not in message, f"unclear message: {message!r}"
        assert snapshot(art / "rag" / "docs") == old, "something was published"
        done = _embedded_texts(server)[before : before + healthy_first * BATCH]
        server.queue()  # healthy from here on
        report = run_sync(folder, art, embedder=client(server.url))
        again = set(_embedded_texts(server)[before + healthy_first * BATCH :]) & set(done)
        assert report.published and not again, f"the next run embedded again: {sorted(again)[:3]}"
        assert leftovers(art) == [], leftovers(art)


def _on_embeddings(fault: Fault) -> Fault:
    fault.path = "/v1/embeddings"
    return fault


def check_dying_server(base: Path) -> None:
    """The server process is SIGKILLed while it holds the third request."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.embed_server"], cwd=REPO_ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}"
        dim = 256  # the subprocess serves the embedded default model
        folder, art = base / "docs", base / "art"
        make_folder(folder, 1)
        with _SmallBatches():
            run_sync(folder, art, embedder=client(url, dim=dim))
            old = snapshot(art / "rag" / "docs")
            make_folder(folder, 2)
            seen_before = len(_admin(url, "seen"))
            faults = [{"kind": "reorder", "path": "/v1/embeddings"}] * 2 + [{"kind": "hang", "path": "/v1/embeddings"}]
            _admin(url, "faults", faults)
            outcome: dict = {}
            thread = threading.Thread(target=_sync_into, args=(folder, art, client(url, dim=dim, timeout=60), outcome))
            thread.start()
            _wait(lambda: len(_admin(url, "seen")) >= seen_before + 3, "the third request to arrive")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            thread.join(timeout=120)
        assert not thread.is_alive(), "the sync did not end after the server died"
        error = outcome.get("error")
        assert isinstance(error, EmbeddingError), f"expected EmbeddingError, got {outcome!r}"
        assert "cannot connect" in str(error) or "connection broke off" in str(error), str(error)
        assert snapshot(art / "rag" / "docs") == old
        journaled = len(list(_journal(art)))
        assert journaled == 2 * BATCH, f"{journaled} vectors kept for the next run, expected {2 * BATCH}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)


def _journal(art: Path):
    from ragtui.core.ingest.journal import EmbedJournal

    return EmbedJournal(art, "docs", MODEL, 256).load()


def _sync_into(folder, art, embedder, outcome):
    try:
        outcome["report"] = run_sync(folder, art, embedder=embedder)
    except Exception as e:  # noqa: BLE001 - handed to the test
        outcome["error"] = e


def _admin(url: str, what: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/_admin/{what}", data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _wait(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def backend_cases(size: str = "ci") -> list[Case]:
    """Each fault of the embedding backend during ingest (library), and its server process killed mid-run."""
    return [Case(name, functools.partial(_fault, name)) for name in FAULTS] + [Case("server-killed", check_dying_server)]


def _fault(name: str, base: Path) -> None:
    check_fault(base, name)
