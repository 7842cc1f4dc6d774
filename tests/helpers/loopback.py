"""What the tests' HTTP servers on 127.0.0.1 share: a threaded server that stops cleanly, and a quiet handler.

``LoopbackServer`` (the owner object a test talks to) starts a ``ThreadingHTTPServer`` on a free
port in a thread, and ``stop()`` shuts it down without abandoning anything: it stops accepting,
sets ``_release`` (so handlers that hang on purpose end), shuts down the connections still open
(handlers blocked reading an idle keep-alive connection wake up), then joins the handler threads.
``LoopbackHandler`` registers its connection with the owner, gives it ``owner.idle_timeout``,
turns Nagle off (headers and body go out as two writes: with Nagle and delayed ACKs every request
on loopback would cost ~40 ms) and logs nothing. ``embed_server`` and ``chat_server`` build on them.
"""

from __future__ import annotations

import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackHandler", "LoopbackServer", "Seen"]


@dataclass
class Seen:
    """One request as a test server received it."""

    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins them: shutdown is clean, not abandoned
    block_on_close = True
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out or a teardown that closed the socket is expected here;
        # anything else is a bug in the helper and is shown.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """The owner of one server thread; subclasses say which ``handler`` answers (see the module docstring)."""

    handler: type[LoopbackHandler]
    thread_name = "loopback-server"

    def __init__(self, *, idle_timeout: float = 10.0) -> None:
        self.idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Any:
        self._httpd = _HTTPServer(("127.0.0.1", 0), self.handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=self.thread_name)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()  # stop accepting
        self._release.set()  # end hangs
        with self._lock:
            conns = list(self._connections)
        for conn in conns:  # wake handlers blocked reading idle keep-alive connections
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()  # joins the handler threads
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._httpd = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class LoopbackHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.owner.idle_timeout)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.owner._lock:
            self.server.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner._lock:
            self.server.owner._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass
