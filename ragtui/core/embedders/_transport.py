"""Retrying JSON POSTs for the HTTP embedder and its tokenizer, and streamed ones for the chat client.

One ``JSONPoster`` wraps one ``httpx.Client``. ``post`` either returns the
decoded JSON of a 2xx answer or raises a ``ragtui`` error whose message says
what failed, where, and what to do. The API key, if any, lives only in the
client's default headers and is scrubbed from every message this module
builds or logs (a server may echo it back in an error body).

Retry policy (spec/embedders.md, "Retries"):

* retried: connection failures (refused, reset, dropped mid-answer), timeouts,
  HTTP 408/425/429/500/502/503/504, and a 2xx answer whose body is not JSON;
* the wait before retry k (k = 0, 1, ...) is the server's ``Retry-After``
  (delta-seconds or an HTTP date; capped at ``retry_after_max``) when given,
  else ``min(backoff_max, backoff * 2**k)`` stretched by up to ``jitter``;
* at most ``retries`` retries, so at most ``retries + 1`` attempts;
* everything else (other 4xx/5xx, invalid URL) fails at once.
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import socket
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragtui.core.embedders._httpx import httpx
from ragtui.core.errors import EmbeddingError, UsageError

__all__ = ["RETRY_STATUSES", "JSONPoster", "RequestTimeout", "RetryPolicy", "check_url_path", "parse_retry_after"]

log = logging.getLogger("ragtui.core.embedders.http")

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

_MAX_EVENT_LINE = 1 << 20
"""The longest line of a server-sent event stream read (``JSONPoster.stream``)."""


_PATH_SEGMENT = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=-]*")
"""What one segment of a configured request path may hold: RFC 3986's unreserved and sub-delims
characters, so no ``:`` (a port), ``@`` (userinfo), ``%`` (an escape that could spell ``..``), ``?``,
``#``, ``\\``, white space or controls."""


def check_url_path(path: object, key: str) -> str:
    """``path`` when it is a plain absolute path on the server (``/tokenize``), else ``UsageError``.

    A configured path is only ever appended to the trusted ``base_url``'s own path:
    it may not name a scheme, host, port or user (``:22011/steal``, ``@evil/x``,
    ``//evil/x``), climb out of ``base_url``'s prefix (``..``), or carry a query or
    fragment.
    """
    ok = False
    if isinstance(path, str) and path.startswith("/") and not path.startswith("//"):
        ok = all(_PATH_SEGMENT.fullmatch(seg) and seg not in (".", "..") for seg in path[1:].split("/"))
    if not ok:
        raise UsageError(
            f"{key} {path!r} must be a path on the server, such as /tokenize: it is appended to base_url, so "
            "it may not hold a scheme, host, port, user, '..', '%', '?', '#' or white space"
        )
    return str(path)


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    """(scheme, host, port) with the scheme's default port filled in."""
    scheme = url.scheme.lower()
    port = url.port if url.port is not None else (443 if scheme == "https" else 80)
    return scheme, url.host.lower(), port


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait; see the module docstring."""

    retries: int = 5
    backoff: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0
    jitter: float = 0.1

    def delay(self, attempt: int, retry_after: float | None, rand: float) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_max)
        base = min(self.backoff_max, self.backoff * (2.0**attempt))
        return base * (1.0 + self.jitter * rand)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header, or ``None`` if absent or unreadable.

    Accepts delta-seconds (``"3"``, also ``"1.5"``) and HTTP dates, which are
    measured against ``now`` (a Unix time); a date in the past means 0.
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - now)
    if seconds != seconds or seconds < 0:  # NaN or negative: ignore the header
        return None
    return seconds


class RequestTimeout(EmbeddingError):
    """No answer within the timeout, raised at once by ``post(..., retry_timeouts=False)``.

    The connection that timed out is closed (httpx discards a connection whose
    answer was not read), so a server that notices closed connections can stop
    the work.
    """


class _Timeout(Exception):
    """An attempt that timed out waiting for the answer (not for the connection)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class _Retry(Exception):
    """One failed attempt that may succeed if repeated."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


class JSONPoster:
    """POSTs JSON to one server with retries; thread-safe."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        secret: str | None,
        timeout: float,
        policy: RetryPolicy,
        max_connections: int,
        transport: httpx.BaseTransport | None,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        random: Callable[[], float],
        what: str = "embedding",
        error: Callable[[str], Exception] = EmbeddingError,
    ) -> None:
        # ``what`` names the server in the base_url checks and in stream()'s messages, and ``error`` is
        # what stream() raises: core.llm's chat client passes "chat" and LLMError. post() stays the
        # embedder's (EmbeddingError).
        self._what, self._error = what, error
        try:
            url = httpx.URL(base_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise UsageError(f"invalid {what} base_url {base_url!r}: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise UsageError(
                f"invalid {what} base_url {base_url!r}: expected http://host[:port][/prefix]"
            )
        self.base_url = base_url
        self._base = url
        self._origin = _origin(url)
        # Userinfo never appears in messages: it may hold a password.
        self.display_base = str(url.copy_with(username=None, password=None))
        self._secret = secret or None
        self._timeout = timeout
        self._policy = policy
        self._sleep = sleep
        self._clock = clock
        self._random = random
        self._headers = dict(headers)
        self._max_connections = max_connections
        self._transport = transport
        self._client_lock = threading.Lock()
        self._client = self._new_client()

    def _new_client(self) -> httpx.Client:
        transport = self._transport
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        if transport is None:
            limits = httpx.Limits(max_connections=self._max_connections)
            transport = httpx.HTTPTransport(limits=limits)
            _track_sockets(transport, self._sockets)
        return httpx.Client(
            headers=self._headers,
            timeout=httpx.Timeout(self._timeout),
            limits=httpx.Limits(max_connections=self._max_connections),
            transport=transport,
            follow_redirects=False,
            # The client's default headers carry the API key: every request it sends is checked to go to
            # base_url's scheme, host and port, whatever built its URL.
            event_hooks={"request": [self._check_origin]},
        )

    def _check_origin(self, request: httpx.Request) -> None:
        if _origin(request.url) != self._origin:
            raise UsageError(
                f"refusing to send a {self._what} request to {request.url.scheme}://{request.url.host}"
                f"{'' if request.url.port is None else f':{request.url.port}'}: only {self.display_base} "
                "(base_url) is ever contacted"
            )

    def __repr__(self) -> str:
        return f"JSONPoster({self.display_base!r})"

    def close(self) -> None:
        self._client.close()

    def cancel_all(self) -> None:
        """Abandon every request in flight: close their connections, so the server can stop the work.

        Threads waiting for those answers get an error; later requests use a
        fresh connection pool.
        """
        with self._client_lock:
            old, sockets = self._client, self._sockets
            self._client = self._new_client()
        # Closing a socket does not wake a thread blocked reading it (nor send the
        # FIN while that read holds it); shutting it down does both.
        for sock in list(sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            old.close()
        except Exception:  # noqa: BLE001  (closing sockets under other threads' feet may complain; they are abandoned)
            log.debug("closing the abandoned connection pool failed", exc_info=True)

    def redact(self, message: str) -> str:
        """``message`` with the API key replaced by ``***``."""
        if self._secret and self._secret in message:
            message = message.replace(self._secret, "***")
        return message

    def url(self, path: str) -> httpx.URL:
        """``base_url`` with ``path`` appended to its own path (never a string concatenation: a path can
        not move the request to another host or port, which ``_check_origin`` checks again on the wire)."""
        check_url_path(path, "request path")
        joined = self._base.copy_with(path=self._base.path.rstrip("/") + path)
        if _origin(joined) != self._origin:  # unreachable for a checked path; kept because a key rides along
            raise UsageError(f"request path {path!r} would leave {self.display_base}")
        return joined

    def display_url(self, path: str) -> str:
        return self.display_base.rstrip("/") + path

    def post(self, path: str, body: Any, *, abort: threading.Event | None = None,
             retry_timeouts: bool = True) -> Any:
        """POST ``body`` as JSON to ``base_url + path``; return the decoded JSON answer.

        Raises ``EmbeddingError`` when every attempt failed or the failure is
        permanent, and when ``abort`` is set between attempts. With
        ``retry_timeouts=False`` an answer that does not come within the
        timeout raises ``RequestTimeout`` at once (the caller adapts instead of
        repeating the same request).
        """
        where = f"POST {self.display_url(path)}"
        attempts = self._policy.retries + 1
        problem = "no attempt made"
        for attempt in range(attempts):
            if abort is not None and abort.is_set():
                raise EmbeddingError(f"{where}: cancelled because another request failed")
            try:
                return self._attempt(path, body, where)
            except _Timeout as timeout:
                if not retry_timeouts:
                    raise RequestTimeout(f"{where}: {timeout.problem}") from None
                retry = _Retry(timeout.problem)
                problem = self.redact(retry.problem)
                if attempt + 1 == attempts:
                    break
                delay = self._policy.delay(attempt, None, self._random())
                log.info("%s: %s; retry %d of %d in %.2fs", where, problem,
                         attempt + 1, self._policy.retries, delay)
                self._sleep(delay)
            except _Retry as retry:
                problem = self.redact(retry.problem)
                if attempt + 1 == attempts:
                    break
                delay = self._policy.delay(attempt, retry.retry_after, self._random())
                log.info("%s: %s; retry %d of %d in %.2fs", where, problem,
                         attempt + 1, self._policy.retries, delay)
                self._sleep(delay)
        raise EmbeddingError(f"{where} failed after {attempts} attempt(s): {problem}")

    def post_once(self, path: str, body: Any) -> tuple[int, Any]:
        """One POST, no retries: ``(status, decoded JSON or None)`` for any answer.

        Raises ``EmbeddingError`` only when no answer came (cannot connect,
        timeout, connection broken).
        """
        where = f"POST {self.display_url(path)}"
        try:
            response = self._client.post(self.url(path), json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(self.redact(f"{where}: {type(exc).__name__}: {_reason(exc)}")) from None
        except RuntimeError as exc:
            raise EmbeddingError(f"{where}: cancelled ({_reason(exc)})") from None
        try:
            return response.status_code, json.loads(response.content)
        except ValueError:
            return response.status_code, None

    def _attempt(self, path: str, body: Any, where: str) -> Any:
        try:
            response = self._client.post(self.url(path), json=body)
        except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:
            raise _Timeout(f"no answer within {self._timeout:g}s ({type(exc).__name__})") from None
        except RuntimeError as exc:  # the pool was closed by cancel_all() while this request waited
            raise EmbeddingError(f"{where}: cancelled ({_reason(exc)})") from None
        except httpx.HTTPError as exc:
            raise self._failure(exc, where, "embedding", EmbeddingError) from None
        self._check_status(response, where, EmbeddingError)
        try:
            return json.loads(response.content)
        except ValueError:
            raise _Retry(f"HTTP {response.status_code} but the body is not JSON: {_snippet(response.text)!r}") from None

    def _failure(self, exc: httpx.HTTPError, where: str, what: str, error: Callable[[str], Exception]) -> Exception:
        """What a request that raised ``exc`` fails with: ``_Retry`` when trying again may help, else one line."""
        if isinstance(exc, httpx.TimeoutException):
            return _Retry(f"no answer within {self._timeout:g}s ({type(exc).__name__})")
        if isinstance(exc, httpx.ConnectError):
            return _Retry(f"cannot connect ({_reason(exc)}); is the {what} server running at "
                          f"{self.display_base}, and is base_url right?")
        if isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError)):
            return _Retry(f"connection broke off ({type(exc).__name__}: {_reason(exc)})")
        if isinstance(exc, httpx.UnsupportedProtocol):
            return UsageError(self.redact(f"{where}: {_reason(exc)}"))
        return error(self.redact(f"{where}: {type(exc).__name__}: {_reason(exc)}"))

    def _check_status(self, response: httpx.Response, where: str, error: Callable[[str], Exception]) -> None:
        """``_Retry`` (with the server's Retry-After) for a status worth retrying, ``error`` for other non-2xx."""
        status = response.status_code
        if status in RETRY_STATUSES:
            retry_after = parse_retry_after(response.headers.get("retry-after"), self._clock())
            raise _Retry(f"HTTP {status} {response.reason_phrase}{_server_message(response)}", retry_after)
        if status >= 300:
            raise error(self.redact(self._permanent_message(where, response)))

    def stream(self, path: str, body: Any, on_event: Callable[[Any], None], *, max_bytes: int = 8 << 20) -> Any:
        """POST ``body`` as JSON and feed the answer to ``on_event`` as it arrives.

        A ``text/event-stream`` answer gives ``on_event`` each ``data:`` payload decoded from JSON, up to
        ``data: [DONE]``, and returns None; any other 2xx answer (a server that ignored ``"stream": true``)
        is decoded whole and returned. Failures before the first event are retried as ``post`` retries them; once
        an event was given, nothing is repeated and a broken stream raises at once. An answer of more
        than ``max_bytes``, a line of more than 1 MiB or a payload that is not JSON are failures too.
        """
        where = f"POST {self.display_url(path)}"
        attempts = self._policy.retries + 1
        problem = "no attempt made"
        given = [0]  # events passed on (by any attempt: after the first, a failure is never retried)

        def counted(event: Any) -> None:
            given[0] += 1
            on_event(event)

        for attempt in range(attempts):
            try:
                return self._attempt_stream(path, body, where, counted, max_bytes)
            except _Retry as retry:
                problem = self.redact(retry.problem)
                if given[0]:
                    raise self._error(f"{where}: the answer broke off after {given[0]} part(s): {problem}") from None
                if attempt + 1 == attempts:
                    break
                delay = self._policy.delay(attempt, retry.retry_after, self._random())
                log.info("%s: %s; retry %d of %d in %.2fs", where, problem, attempt + 1, self._policy.retries, delay)
                self._sleep(delay)
        raise self._error(f"{where} failed after {attempts} attempt(s): {problem}")

    def _attempt_stream(self, path: str, body: Any, where: str, on_event: Callable[[Any], None],
                        max_bytes: int) -> Any:
        try:
            with self._client.stream("POST", self.url(path), json=body) as response:
                status = response.status_code
                if status >= 300:
                    response.read()
                    self._check_status(response, where, self._error)
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    content = b""
                    for part in response.iter_bytes():
                        content += part
                        if len(content) > max_bytes:
                            raise self._error(f"{where}: the answer is larger than {max_bytes:,} bytes")
                    try:
                        return json.loads(content)
                    except ValueError:
                        raise _Retry(f"HTTP {status} but the body is not JSON: "
                                     f"{_snippet(content.decode('utf-8', 'replace'))!r}") from None
                self._read_events(response, where, on_event, max_bytes)
                return None
        except httpx.HTTPError as exc:
            raise self._failure(exc, where, self._what, self._error) from None

    def _read_events(self, response: httpx.Response, where: str, on_event: Callable[[Any], None],
                     max_bytes: int) -> None:
        """Server-sent events: each ``data:`` line's JSON to ``on_event``, until ``[DONE]`` or the end."""
        total, pending = 0, b""
        for part in response.iter_bytes():
            total += len(part)
            if total > max_bytes:
                raise self._error(f"{where}: the answer is larger than {max_bytes:,} bytes")
            pending += part
            if len(pending) > _MAX_EVENT_LINE and b"\n" not in pending:
                raise self._error(f"{where}: an event line is longer than {_MAX_EVENT_LINE:,} bytes")
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.rstrip(b"\r")
                if not line.startswith(b"data:"):
                    continue  # comments (": ping"), event names, ids and the blank line between events
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise _Retry(f"an event is not JSON: {_snippet(data.decode('utf-8', 'replace'))!r}") from None
                on_event(event)

    def _permanent_message(self, where: str, response: httpx.Response) -> str:
        status = response.status_code
        head = f"{where}: HTTP {status} {response.reason_phrase}{_server_message(response)}"
        if status in (401, 403):
            return head + " — the server refused the credentials; check api_key_env and the key it names"
        if status == 404:
            return (head + f" — no such endpoint; check base_url ({self.display_base}): it should be "
                    "the server root, e.g. http://localhost:8080, and the server must serve this path")
        if status == 405:
            return head + " — the server does not accept POST here; check base_url and the tokenize style"
        if status == 413:
            return head + " — the request is too large; lower batch_size or max_batch_tokens"
        if 300 <= status < 400:
            return head + f" — redirected to {response.headers.get('location', '?')}; use that base_url"
        return head


def _track_sockets(transport: httpx.HTTPTransport, sockets: weakref.WeakSet[socket.socket]) -> None:
    """Record every socket ``transport`` opens in ``sockets`` (so ``cancel_all`` can shut them down).

    httpx has no public hook for this: the connection pool's network backend
    is wrapped when the pool has one (httpcore 1.x); otherwise nothing is
    tracked and ``cancel_all`` only closes the pool.
    """
    pool: Any = getattr(transport, "_pool", None)
    backend: Any = getattr(pool, "_network_backend", None)
    if backend is None or not hasattr(backend, "connect_tcp"):
        return

    class _Tracking:
        def __getattr__(self, name: str) -> Any:
            return getattr(backend, name)

        def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
            stream = backend.connect_tcp(*args, **kwargs)
            sock = stream.get_extra_info("socket")
            if isinstance(sock, socket.socket):
                sockets.add(sock)
            return stream

    pool._network_backend = _Tracking()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _snippet(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _server_message(response: httpx.Response) -> str:
    """``": <message>"`` from an error body in any common shape, or ``""``."""
    try:
        body = json.loads(response.content)
    except ValueError:
        text = _snippet(response.text, 200)
        return f": {text}" if text else ""
    message: Any = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):  # OpenAI, llama.cpp
            message = err.get("message")
        elif isinstance(err, str):  # TEI, Ollama
            message = err
        if message is None:  # vLLM ("message"), FastAPI ("detail")
            message = body.get("message") or body.get("detail")
    if message is None:
        message = body
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False)
    message = _snippet(message, 200)
    return f": {message}" if message else ""
