"""An OpenAI-compatible chat client: ``POST {base_url}/v1/chat/completions``, streamed or not.

``ChatClient.chat(messages, on_delta=...)`` returns a ``ChatAnswer`` (the text,
the server's ``usage`` when it sent one, the finish reason, seconds to the
first token and in all). It shares the HTTP embedder's transport
(``core.embedders._transport.JSONPoster``): bounded retries on 429/5xx and
broken connections honouring ``Retry-After``, a timeout per request, no
redirects, and the API key only in the request's header, scrubbed from every
message. With ``on_delta`` the answer is streamed (server-sent events) and
each piece of text is passed on as it arrives; once a piece was passed on,
nothing is retried (the words are already on the screen), so a stream that
breaks off is an ``LLMError`` (an ``AnswerCut`` holding the text that came).

Bounds: ``timeout`` is the deadline of the whole call (its retries and waits
included): a server that keeps the stream open with comments, empty deltas
or a trickle of text is cut off then. An answer runs to at most
``max_tokens`` tokens, which the client holds the server to by counting:
more than ``answer_limits(max_tokens)`` pieces of text or bytes of it cut
the answer off too (the server ignored ``max_tokens``).

The model's context length (``context_window()``) is ``[llm] context_window``
when set, else what the server says: llama.cpp's ``GET /props`` (``n_ctx``),
or the model's ``GET /v1/models`` entry (``max_model_len`` as vLLM gives it,
``context_length``, ``n_ctx``); None when neither says (llama-cpp-python,
Ollama, most hosted APIs). An HTTP 400 about the context names the fix.

Failures are ``ragtui.core.errors``: ``UsageError`` (exit 2) for the settings
(no ``[llm]``, a missing key variable, a bad value), ``LLMError`` (exit 3) for
a server that failed or answered nothing usable: no choices, an empty answer,
a body of the wrong shape, a stream that ended before its end.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtui.core.embedders._httpx import httpx
from ragtui.core.embedders._transport import JSONPoster, RetryPolicy
from ragtui.core.errors import LLMError, UsageError

__all__ = ["CHAT_PATH", "AnswerCut", "ChatAnswer", "ChatClient", "Message", "answer_limits"]

CHAT_PATH = "/v1/chat/completions"
MAX_ANSWER_BYTES = 8 << 20
"""The largest answer read (streamed or not): a server cannot make the client hold more."""
PIECES_PER_TOKEN = 2
BYTES_PER_TOKEN = 128
"""A token's text is rarely over 16 bytes, and a server sends a piece per token or fewer: both bounds are generous."""


def answer_limits(max_tokens: int) -> tuple[int, int]:
    """``(pieces, bytes)``: the most pieces of text and UTF-8 bytes of it an answer of ``max_tokens`` can hold."""
    return PIECES_PER_TOKEN * max_tokens + 16, BYTES_PER_TOKEN * max_tokens + 4096


class AnswerCut(LLMError):
    """An answer that did not end (a deadline, a bound, a broken stream); ``text`` is what arrived of it."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text

Message = Mapping[str, str]
"""``{"role": "system" | "user" | "assistant", "content": text}``."""


@dataclass(frozen=True)
class ChatAnswer:
    """One chat call's outcome."""

    text: str
    model: str | None
    """The model the server says answered (None when it does not say)."""
    finish_reason: str | None
    prompt_tokens: int | None
    """From the server's ``usage``; None when it sent none."""
    completion_tokens: int | None
    seconds: float
    first_token_seconds: float | None
    """Seconds until the first piece of text arrived (streamed answers only)."""
    streamed: bool


def _number(table: Mapping[str, object], key: str, default: float, low: float, high: float) -> float:
    value = table.get(key, default)
    if type(value) not in (int, float) or not math.isfinite(float(value)) or not low <= float(value) <= high:  # type: ignore[arg-type]
        raise UsageError(f"[llm] {key} must be a number from {low:g} to {high:g} (got {value!r})")
    return float(value)  # type: ignore[arg-type]


def _whole(table: Mapping[str, object], key: str, default: int, low: int, high: int) -> int:
    value = table.get(key, default)
    if type(value) is not int or not low <= value <= high:
        raise UsageError(f"[llm] {key} must be a whole number from {low} to {high} (got {value!r})")
    return value


class ChatClient:
    """One chat model on one server; see the module docstring. Not thread-safe for concurrent chats."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout: float = 120.0,
        retries: int = 2,
        backoff: float = 0.5,
        context_window: int | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise UsageError("[llm] model must name the chat model the server serves (e.g. model = \"smol-135m\")")
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        headers = {"Accept": "application/json, text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._poster = JSONPoster(
            base_url.rstrip("/"),
            headers=headers,
            secret=api_key,
            timeout=timeout,
            policy=RetryPolicy(retries=retries, backoff=backoff, backoff_max=30.0, retry_after_max=120.0),
            max_connections=2,
            transport=transport,
            sleep=sleep,
            clock=clock,
            random=random.random,
            what="chat",
            error=LLMError,
        )
        self.calls = 0
        """Chat calls made (each counted once, however many attempts it took)."""
        self._window = context_window
        self._window_asked = context_window is not None
        self.window_source = "[llm] context_window" if context_window is not None else None
        """Where ``context_window()`` came from: the setting, the server's path, or None (unknown)."""

    @classmethod
    def from_settings(cls, table: Mapping[str, object], environ: Mapping[str, str] | None = None,
                      **options: Any) -> ChatClient:
        """The client the ``[llm]`` table describes; the key comes from the variable ``api_key_env`` names."""
        env = os.environ if environ is None else environ
        base_url, model = table.get("base_url"), table.get("model")
        if not base_url or not model:
            missing = " and ".join(k for k, v in (("base_url", base_url), ("model", model)) if not v)
            raise UsageError(
                f"no chat model configured ({missing} missing): add an [llm] table with base_url and model to your "
                "ragtui.toml (e.g. base_url = \"http://127.0.0.1:8080\", model = \"smol-135m\"), or set "
                "RAGTUI_LLM_URL and RAGTUI_LLM_MODEL"
            )
        key = None
        key_env = table.get("api_key_env")
        if key_env:
            key = env.get(str(key_env))
            if not key:
                raise UsageError(f"[llm] api_key_env names {key_env}, but that variable is not set (nothing was sent)")
        return cls(
            str(base_url), str(model), api_key=key,
            max_tokens=_whole(table, "max_tokens", 512, 1, 1_000_000),
            temperature=_number(table, "temperature", 0.0, 0.0, 2.0),
            timeout=_number(table, "timeout", 120.0, 0.001, 3600.0),
            retries=_whole(table, "retries", 2, 0, 10),
            context_window=(_whole(table, "context_window", 0, 1, 100_000_000)
                            if table.get("context_window") is not None else None),
            **options,
        )

    @property
    def display_url(self) -> str:
        """The endpoint, without any password of the URL."""
        return self._poster.display_url(CHAT_PATH)

    def context_window(self) -> int | None:
        """The model's context length in tokens (see the module docstring); asked of the server once."""
        if not self._window_asked:
            self._window_asked = True
            for path, read in (("/props", _props_window), ("/v1/models", lambda body: _models_window(body, self.model))):
                try:
                    status, body = self._poster.get_once(path, max_bytes=1 << 20, seconds=10.0, error=LLMError)
                except LLMError:
                    continue  # not offered (or not answered): the next source, else unknown
                found = read(body) if status == 200 else None
                if found is not None:
                    self._window, self.window_source = found, f"GET {path}"
                    break
        return self._window

    def close(self) -> None:
        self._poster.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(self, messages: Sequence[Message], *, on_delta: Callable[[str], None] | None = None,
             max_tokens: int | None = None) -> ChatAnswer:
        """Ask; stream when ``on_delta`` is given (each new piece of text is passed to it)."""
        tokens = max_tokens or self.max_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": tokens,
            "temperature": self.temperature,
            "stream": on_delta is not None,
        }
        where = f"the chat model {self.model!r} at {self.display_url}"
        started = time.perf_counter()
        self.calls += 1
        # Both ways go through the transport's stream(), which bounds what it reads (MAX_ANSWER_BYTES).
        state = _Stream(where, on_delta or (lambda _text: None), started, tokens)
        try:
            whole = self._poster.stream(CHAT_PATH, body, state.event, max_bytes=MAX_ANSWER_BYTES)
        except LLMError as exc:
            if state.parts:
                raise AnswerCut(str(exc), "".join(state.parts)) from None
            if "HTTP 400" in str(exc) and "context" in str(exc).lower():
                raise LLMError(f"{exc} — the prompt and the answer do not fit the model's context: set [llm] "
                               "context_window to the server's context length (llama.cpp -c, llama-cpp-python "
                               "--n_ctx) so the context is packed to fit, or lower -b/context_tokens or "
                               "max_tokens") from None
            raise
        if whole is not None:  # a plain JSON answer (asked for, or a server that ignored "stream")
            answer = _whole_answer(whole, where, time.perf_counter() - started, streamed=False)
            _, most = answer_limits(tokens)
            if len(answer.text.encode("utf-8")) > most:
                raise AnswerCut(f"{where}: the answer is longer than max_tokens = {tokens} tokens can be "
                                f"(over {most:,} bytes): the server ignored max_tokens; cut there",
                                answer.text.encode("utf-8")[:most].decode("utf-8", "ignore"))
            if on_delta is not None:
                on_delta(answer.text)
            return answer
        return state.finish(time.perf_counter() - started)


def _text(value: str) -> str:
    # JSON can carry a lone surrogate ("\\ud800"), which no stream can print: it becomes "?".
    return value.encode("utf-8", "replace").decode("utf-8")


def _choices(body: Any, where: str) -> list[Any]:
    if not isinstance(body, dict):
        raise LLMError(f"{where} answered {type(body).__name__}, not a chat completion object")
    if isinstance(body.get("error"), (dict, str)):
        err = body["error"]
        message = err.get("message") if isinstance(err, dict) else err
        raise LLMError(f"{where} answered an error: {str(message)[:300]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise LLMError(f"{where} answered with no choices (HTTP 200 but nothing to read): is it a chat endpoint?")
    return choices


def _usage(body: Mapping[str, Any]) -> tuple[int | None, int | None]:
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None, None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if type(value) is int and value >= 0 else None

    return count("prompt_tokens"), count("completion_tokens")


def _whole_answer(body: Any, where: str, seconds: float, *, streamed: bool) -> ChatAnswer:
    choice = _choices(body, where)[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if content is None or not isinstance(content, str):
        raise LLMError(f"{where} answered a choice with no message text")
    content = _text(content)
    if not content.strip():
        raise LLMError(f"{where} answered with empty text (finish_reason {choice.get('finish_reason')!r})")
    prompt, completion = _usage(body)
    model = body.get("model")
    reason = choice.get("finish_reason")
    return ChatAnswer(content, model if isinstance(model, str) else None, reason if isinstance(reason, str) else None,
                      prompt, completion, seconds, None, streamed)


class _Stream:
    """Collects the events of one streamed answer."""

    def __init__(self, where: str, on_delta: Callable[[str], None], started: float, max_tokens: int) -> None:
        self.where, self.on_delta, self.started = where, on_delta, started
        self.max_tokens = max_tokens
        self.most_pieces, self.most_bytes = answer_limits(max_tokens)
        self.bytes = 0
        self.parts: list[str] = []
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.usage: tuple[int | None, int | None] = (None, None)
        self.first: float | None = None

    def event(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise LLMError(f"{self.where} streamed {type(event).__name__}, not a chunk object")
        if isinstance(event.get("error"), (dict, str)):
            _choices(event, self.where)  # raises with the server's message
        if isinstance(event.get("model"), str):
            self.model = event["model"]
        usage = _usage(event)
        if usage != (None, None):
            self.usage = usage
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                text = _text(text)
                if self.first is None:
                    self.first = time.perf_counter() - self.started
                self.bytes += len(text.encode("utf-8"))
                if len(self.parts) >= self.most_pieces or self.bytes > self.most_bytes:
                    raise LLMError(f"{self.where}: the answer ran past max_tokens = {self.max_tokens}: "
                                   f"{len(self.parts) + 1:,} pieces and {self.bytes:,} bytes of text arrived, more "
                                   f"than {self.max_tokens} tokens can hold (the server ignored max_tokens); "
                                   "stopped reading")
                self.parts.append(text)
                self.on_delta(text)
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]

    def finish(self, seconds: float) -> ChatAnswer:
        text = "".join(self.parts)
        if self.finish_reason is None:
            got = f"after {len(text):,} characters" if text else "before any text"
            raise LLMError(f"{self.where}: the streamed answer ended {got} without its end (no finish_reason): "
                           "the server or the connection broke off")
        if not text.strip():
            raise LLMError(f"{self.where} answered with empty text (finish_reason {self.finish_reason!r})")
        return ChatAnswer(text, self.model, self.finish_reason, self.usage[0], self.usage[1], seconds, self.first,
                          True)


def _positive(value: Any) -> int | None:
    return value if type(value) is int and 0 < value <= 100_000_000 else None


def _props_window(body: Any) -> int | None:
    """llama.cpp's ``/props``: ``default_generation_settings.n_ctx`` (per slot), else a top-level ``n_ctx``."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    found = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return found or _positive(body.get("n_ctx"))


def _models_window(body: Any, model: str) -> int | None:
    """The context length in the model's ``/v1/models`` entry (or the only entry's), when it gives one."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    if not mine and len(entries) == 1 and isinstance(entries[0], dict):
        mine = entries
    for entry in mine:
        meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
        for value in (entry.get("max_model_len"), entry.get("context_length"), entry.get("n_ctx"), meta.get("n_ctx")):
            found = _positive(value)
            if found is not None:
                return found
    return None
