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

Deadlines and sizes (spec/embedders.md, "Deadlines and answer sizes"): an
attempt of ``post`` and ``post_once`` has ``timeout`` seconds in all, from
connecting to the last byte of the answer, and ``stream`` has ``timeout``
seconds for the whole call, its retries and waits included. The deadline
bounds every read and write on the socket, so a server that trickles, pings
or never ends its answer is cut off at the deadline, not kept alive by each
byte it sends. An answer larger than the caller's ``max_bytes`` (an error
body: ``MAX_ERROR_BODY``) is not read further.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpcore

from ragtui.core.embedders._httpx import httpx
from ragtui.core.errors import EmbeddingError, UsageError

__all__ = ["DEFAULT_MAX_BYTES", "MAX_ERROR_BODY", "RETRY_STATUSES", "AnswerTooLarge", "JSONPoster",
           "RequestTimeout", "RetryPolicy", "check_url_path", "parse_retry_after"]

log = logging.getLogger("ragtui.core.embedders.http")

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

_MAX_EVENT_LINE = 1 << 20
"""The longest line of a server-sent event stream read (``JSONPoster.stream``)."""
DEFAULT_MAX_BYTES = 16 << 20
"""The largest answer ``post`` and ``post_once`` read when the caller names no bound."""
MAX_ERROR_BODY = 64 << 10
"""What is read of a non-2xx answer's body (for its message)."""


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


class AnswerTooLarge(EmbeddingError):
    """An answer larger than the bound its request was given; not retried (the server would send it again)."""


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


class _Late(_Retry):
    """A streamed attempt that reached its deadline."""


class _Expired(Exception):
    """The deadline passed between two reads (seen by the reading loop, where the socket is not clipped)."""


class _Received:
    """How far one attempt got: whether the answer's head arrived, and how many body bytes."""

    def __init__(self) -> None:
        self.head = False
        self.bytes = 0


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
        # what stream() raises: core.answer.llm's chat client passes "chat" and LLMError. post() stays the
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
        self._deadlines = threading.local()
        """``at``: the monotonic time by which this thread's request must end (None: no deadline)."""
        self._client_lock = threading.Lock()
        self._client = self._new_client()
        self.retried = 0
        """Attempts repeated after a failure (any request, since construction)."""

    def _new_client(self) -> httpx.Client:
        transport = self._transport
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        if transport is None:
            limits = httpx.Limits(max_connections=self._max_connections)
            transport = httpx.HTTPTransport(limits=limits)
            _instrument(transport, self._sockets, self._deadlines)
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

    @contextlib.contextmanager
    def _until(self, deadline: float) -> Iterator[None]:
        """Every socket operation of this thread's request inside ends by ``deadline`` (monotonic)."""
        self._deadlines.at = deadline
        try:
            yield
        finally:
            self._deadlines.at = None

    def _late(self, got: _Received, exc: BaseException | None = None) -> str:
        if got.head:
            return f"the answer did not finish within {self._timeout:g}s ({got.bytes:,} bytes arrived)"
        return f"no answer within {self._timeout:g}s" + (f" ({type(exc).__name__})" if exc is not None else "")

    def _read(self, response: httpx.Response, limit: int, deadline: float, got: _Received, *, where: str,
              error: Callable[[str], Exception] = AnswerTooLarge, truncate: bool = False) -> bytes:
        """The body, at most ``limit`` bytes: more raises ``error`` (or, with ``truncate``, is left unread)."""
        declared = response.headers.get("content-length", "")
        if not truncate and declared.isdigit() and int(declared) > limit:
            raise error(f"{where}: the answer is {int(declared):,} bytes, larger than the {limit:,} this request "
                        "can need: not read (is base_url the server you meant?)")
        buf = bytearray()
        for part in response.iter_bytes():
            got.bytes += len(part)
            if len(buf) + len(part) > limit:
                if truncate:
                    buf += part[: limit - len(buf)]
                    break
                raise error(f"{where}: the answer is larger than {limit:,} bytes, the most this request can need: "
                            "stopped reading (is base_url the server you meant?)")
            buf += part
            if time.monotonic() > deadline:
                raise _Expired
        return bytes(buf)

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
             retry_timeouts: bool = True, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
        """POST ``body`` as JSON to ``base_url + path``; return the decoded JSON answer.

        Raises ``EmbeddingError`` when every attempt failed or the failure is
        permanent, and when ``abort`` is set between attempts. With
        ``retry_timeouts=False`` an answer that does not come within the
        timeout raises ``RequestTimeout`` at once (the caller adapts instead of
        repeating the same request). Each attempt has ``timeout`` seconds in
        all; an answer of more than ``max_bytes`` raises ``AnswerTooLarge``
        (not retried).
        """
        where = f"POST {self.display_url(path)}"
        attempts = self._policy.retries + 1
        problem = "no attempt made"
        for attempt in range(attempts):
            if abort is not None and abort.is_set():
                raise EmbeddingError(f"{where}: cancelled because another request failed")
            try:
                return self._attempt(path, body, where, max_bytes)
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
                self.retried += 1
                self._sleep(delay)
            except _Retry as retry:
                problem = self.redact(retry.problem)
                if attempt + 1 == attempts:
                    break
                delay = self._policy.delay(attempt, retry.retry_after, self._random())
                log.info("%s: %s; retry %d of %d in %.2fs", where, problem,
                         attempt + 1, self._policy.retries, delay)
                self.retried += 1
                self._sleep(delay)
        raise EmbeddingError(f"{where} failed after {attempts} attempt(s): {problem}")

    def post_once(self, path: str, body: Any, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[int, Any]:
        """One POST, no retries: ``(status, decoded JSON or None)`` for any answer.

        Raises ``EmbeddingError`` when no answer came (cannot connect, no
        whole answer within ``timeout``, connection broken) and
        ``AnswerTooLarge`` for a 2xx answer of more than ``max_bytes``.
        """
        return self._once("POST", path, body, max_bytes)

    def get_once(self, path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, seconds: float | None = None,
                 error: Callable[[str], Exception] = EmbeddingError) -> tuple[int, Any]:
        """One GET, no retries, as ``post_once``, within ``seconds`` (at most ``timeout``); failures raise ``error``."""
        try:
            return self._once("GET", path, None, max_bytes, seconds)
        except EmbeddingError as exc:
            if error is EmbeddingError:
                raise
            raise error(str(exc)) from None

    def _once(self, method: str, path: str, body: Any, max_bytes: int, seconds: float | None = None) -> tuple[int, Any]:
        where = f"{method} {self.display_url(path)}"
        got = _Received()
        deadline = time.monotonic() + min(self._timeout, seconds or self._timeout)
        options: dict[str, Any] = {} if body is None else {"json": body}
        try:
            with self._until(deadline), self._client.stream(method, self.url(path), **options) as response:
                got.head = True
                status = response.status_code
                failed = status >= 300
                content = self._read(response, MAX_ERROR_BODY if failed else max_bytes, deadline, got,
                                     where=where, truncate=failed)
        except (httpx.TimeoutException, _Expired) as exc:
            raise EmbeddingError(f"{where}: {self._late(got, exc)}") from None
        except httpx.HTTPError as exc:
            raise EmbeddingError(self.redact(f"{where}: {type(exc).__name__}: {_reason(exc)}")) from None
        except RuntimeError as exc:
            raise EmbeddingError(f"{where}: cancelled ({_reason(exc)})") from None
        try:
            return status, json.loads(content)
        except ValueError:
            return status, None

    def _attempt(self, path: str, body: Any, where: str, max_bytes: int) -> Any:
        deadline = time.monotonic() + self._timeout
        got = _Received()
        try:
            with self._until(deadline), self._client.stream("POST", self.url(path), json=body) as response:
                got.head = True
                if response.status_code >= 300:
                    error_body = self._read(response, MAX_ERROR_BODY, deadline, got, where=where, truncate=True)
                    self._check_status(response, error_body, where, EmbeddingError)
                content = self._read(response, max_bytes, deadline, got, where=where)
        except (httpx.TimeoutException, _Expired) as exc:
            if not got.head and not isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, _Expired)):
                raise self._failure(exc, where, "embedding", EmbeddingError) from None  # connect, pool
            raise _Timeout(self._late(got, exc)) from None
        except RuntimeError as exc:  # the pool was closed by cancel_all() while this request waited
            raise EmbeddingError(f"{where}: cancelled ({_reason(exc)})") from None
        except httpx.HTTPError as exc:
            raise self._failure(exc, where, "embedding", EmbeddingError) from None
        try:
            return json.loads(content)
        except ValueError:
            raise _Retry(f"HTTP {response.status_code} but the body is not JSON: "
                         f"{_snippet(content.decode('utf-8', 'replace'))!r}") from None

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

    def _check_status(self, response: httpx.Response, content: bytes, where: str,
                      error: Callable[[str], Exception]) -> None:
        """``_Retry`` (with the server's Retry-After) for a status worth retrying, ``error`` for other non-2xx.

        ``content`` is what was read of the body (at most ``MAX_ERROR_BODY``)."""
        status = response.status_code
        if status in RETRY_STATUSES:
            retry_after = parse_retry_after(response.headers.get("retry-after"), self._clock())
            raise _Retry(f"HTTP {status} {response.reason_phrase}{_server_message(content)}", retry_after)
        if status >= 300:
            raise error(self.redact(self._permanent_message(where, response, content)))

    def stream(self, path: str, body: Any, on_event: Callable[[Any], None], *, max_bytes: int = 8 << 20) -> Any:
        """POST ``body`` as JSON and feed the answer to ``on_event`` as it arrives.

        A ``text/event-stream`` answer gives ``on_event`` each ``data:`` payload decoded from JSON, up to
        ``data: [DONE]``, and returns None; any other 2xx answer (a server that ignored ``"stream": true``)
        is decoded whole and returned. Failures before the first event are retried as ``post`` retries them; once
        an event was given, nothing is repeated and a broken stream raises at once. An answer of more
        than ``max_bytes``, a line of more than 1 MiB or a payload that is not JSON are failures too.
        The whole call, its attempts and the waits between them, ends within ``timeout`` seconds: an
        answer still arriving then is cut off (a retry that would start after it is not made).
        """
        where = f"POST {self.display_url(path)}"
        attempts = self._policy.retries + 1
        problem = "no attempt made"
        given = [0]  # events passed on (by any attempt: after the first, a failure is never retried)
        deadline = time.monotonic() + self._timeout
        made = 0

        def counted(event: Any) -> None:
            given[0] += 1
            on_event(event)

        for attempt in range(attempts):
            try:
                made += 1
                return self._attempt_stream(path, body, where, counted, max_bytes, deadline)
            except _Retry as retry:
                problem = self.redact(retry.problem)
                if given[0] and isinstance(retry, _Late):
                    raise self._error(f"{where}: {problem}, the deadline of the whole request: cut after "
                                      f"{given[0]} part(s)") from None
                if given[0]:
                    raise self._error(f"{where}: the answer broke off after {given[0]} part(s): {problem}") from None
                if attempt + 1 == attempts:
                    break
                delay = self._policy.delay(attempt, retry.retry_after, self._random())
                if time.monotonic() + delay >= deadline:
                    problem += f"; no time was left for a retry within the {self._timeout:g}s of the request"
                    break
                log.info("%s: %s; retry %d of %d in %.2fs", where, problem, attempt + 1, self._policy.retries, delay)
                self.retried += 1
                self._sleep(delay)
        raise self._error(f"{where} failed after {made} attempt(s): {problem}")

    def _attempt_stream(self, path: str, body: Any, where: str, on_event: Callable[[Any], None],
                        max_bytes: int, deadline: float) -> Any:
        got = _Received()
        try:
            with self._until(deadline), self._client.stream("POST", self.url(path), json=body) as response:
                got.head = True
                status = response.status_code
                if status >= 300:
                    error_body = self._read(response, MAX_ERROR_BODY, deadline, got, where=where, truncate=True)
                    self._check_status(response, error_body, where, self._error)
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    content = self._read(response, max_bytes, deadline, got, where=where, error=self._error)
                    try:
                        return json.loads(content)
                    except ValueError:
                        raise _Retry(f"HTTP {status} but the body is not JSON: "
                                     f"{_snippet(content.decode('utf-8', 'replace'))!r}") from None
                self._read_events(response, where, on_event, max_bytes, deadline, got)
                return None
        except (httpx.TimeoutException, _Expired) as exc:
            if not got.head and not isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, _Expired)):
                raise self._failure(exc, where, self._what, self._error) from None  # connect, pool
            raise _Late(self._late(got, exc)) from None
        except httpx.HTTPError as exc:
            raise self._failure(exc, where, self._what, self._error) from None

    def _read_events(self, response: httpx.Response, where: str, on_event: Callable[[Any], None],
                     max_bytes: int, deadline: float, got: _Received) -> None:
        """Server-sent events: each ``data:`` line's JSON to ``on_event``, until ``[DONE]`` or the end."""
        total, pending = 0, b""
        for part in response.iter_bytes():
            total += len(part)
            got.bytes = total
            if total > max_bytes:
                raise self._error(f"{where}: the answer is larger than {max_bytes:,} bytes")
            if time.monotonic() > deadline:
                raise _Expired
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

    def _permanent_message(self, where: str, response: httpx.Response, content: bytes) -> str:
        status = response.status_code
        head = f"{where}: HTTP {status} {response.reason_phrase}{_server_message(content)}"
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


def _instrument(transport: httpx.HTTPTransport, sockets: weakref.WeakSet[socket.socket],
                deadlines: threading.local) -> None:
    """Record every socket ``transport`` opens in ``sockets`` (so ``cancel_all`` can shut them down), and
    clip every connect, read, write and TLS handshake on them to the deadline of the thread doing it.

    httpx has no public hook for either: the connection pool's network backend
    is wrapped when the pool has one (httpcore 1.x); otherwise nothing is
    tracked, ``cancel_all`` only closes the pool, and deadlines are checked
    between the reads of an answer only.
    """
    pool: Any = getattr(transport, "_pool", None)
    backend: Any = getattr(pool, "_network_backend", None)
    if backend is None or not hasattr(backend, "connect_tcp"):
        return

    class _Tracking:
        def __getattr__(self, name: str) -> Any:
            return getattr(backend, name)

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, *args: Any,
                        **kwargs: Any) -> Any:
            timeout = _clip(deadlines, timeout, httpcore.ConnectTimeout)
            stream = backend.connect_tcp(host, port, timeout, *args, **kwargs)
            sock = stream.get_extra_info("socket")
            if isinstance(sock, socket.socket):
                sockets.add(sock)
            return _Clipped(stream, deadlines)

    pool._network_backend = _Tracking()


def _clip(deadlines: threading.local, timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` shortened to what is left before this thread's deadline; ``expired`` when nothing is."""
    at: float | None = getattr(deadlines, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Clipped:
    """A network stream whose reads, writes and TLS handshake end by the deadline of the thread using it."""

    def __init__(self, stream: Any, deadlines: threading.local) -> None:
        self._stream, self._deadlines = stream, deadlines

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return bytes(self._stream.read(max_bytes, _clip(self._deadlines, timeout, httpcore.ReadTimeout)))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _clip(self._deadlines, timeout, httpcore.WriteTimeout))

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        timeout = _clip(self._deadlines, timeout, httpcore.ConnectTimeout)
        return _Clipped(self._stream.start_tls(ssl_context, server_hostname, timeout), self._deadlines)

    def close(self) -> None:
        self._stream.close()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _snippet(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _server_message(content: bytes) -> str:
    """``": <message>"`` from an error body in any common shape, or ``""``."""
    try:
        body = json.loads(content)
    except ValueError:
        text = _snippet(content.decode("utf-8", "replace"), 200)
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
