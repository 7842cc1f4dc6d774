"""The OpenAI-compatible HTTP embedder: ``POST {base_url}/v1/embeddings`` over httpx.

Works with Ollama, llama.cpp's server, vLLM, TEI and hosted APIs
(spec/embedders.md says how to configure each). What callers may rely on:

* ``embed`` returns what ``Embedder`` promises (float32, C-contiguous, unit
  rows, finite, never zero) in input order, or raises ``EmbeddingError``;
  it never returns a partial result.
* Every answer is checked: one embedding per input (ordered by ``index``),
  one dimension for all answers (the configured ``dim``, else the first
  answer's), finite values, no all-zero row. Bad answers are not retried.
* Texts are sent in batches of at most ``batch_size`` texts and
  ``max_batch_tokens`` tokens (a longer single text goes alone), up to
  ``concurrency`` batches at a time. With ``adaptive`` (the default) those
  are maxima: ``Pace`` starts with small batches one at a time and grows
  them while answers come back well within ``timeout``; a timeout shrinks
  them and the texts are sent again in smaller batches (the abandoned
  request's connection is closed). Tokens are counted with the local
  tokenizer when one is configured, else estimated as UTF-8 bytes + 1 (an
  upper bound for byte-level BPE, byte-fallback SentencePiece and WordPiece),
  so no second round trip per text is needed.
* Every request has ``timeout`` seconds in all, from connecting to the last
  byte of the answer (a server that trickles its answer is cut off then),
  and an answer may be at most ``answer_bound(n, dim)`` bytes: ``n`` vectors
  of ``dim`` floats at ``BYTES_PER_FLOAT`` each, plus slack (``UNKNOWN_DIM``
  dimensions until the first answer fixes ``dim``).
* The empty string is never sent (hosted APIs reject it); it gets
  ``empty_text_vector(dim)`` like every embedder.
* The API key is read from the environment variable *named* by
  ``api_key_env`` and sent as ``Authorization: Bearer``; it never appears in
  ``repr``, messages, logs or exceptions.
"""

from __future__ import annotations

import base64
import logging
import math
import os
import random as _random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from ragtui import __version__
from ragtui.core.embedders._httpx import httpx
from ragtui.core.embedders._transport import JSONPoster, RequestTimeout, RetryPolicy, check_url_path
from ragtui.core.embedders.base import Tokenizer, check_texts, empty_text_vector, normalize_rows
from ragtui.core.embedders.hf_tokenizer import HFTokenizer
from ragtui.core.embedders.http_tokenizer import (
    DEFAULT_TOKENIZE_PATHS,
    TOKENIZE_STYLES,
    HTTPTokenizer,
)
from ragtui.core.errors import EmbeddingError, UsageError

__all__ = ["BYTES_PER_FLOAT", "EMBEDDINGS_PATH", "UNKNOWN_DIM", "HTTPEmbedder", "Pace", "answer_bound",
           "plan_batches"]

log = logging.getLogger("ragtui.core.embedders.http")

EMBEDDINGS_PATH = "/v1/embeddings"
_PROBE_TEXT = "dimension probe"
BYTES_PER_FLOAT = 40
"""JSON spells a float32 in at most about 16 characters and a float64 in about 24: 40 with its separator is generous."""
UNKNOWN_DIM = 16384
"""The dimensions an answer is allowed before the first one fixes ``dim`` (the largest models have 4,096-8,192)."""


def answer_bound(n: int, dim: int | None) -> int:
    """The most bytes an embeddings answer for ``n`` texts of ``dim`` dimensions is read to."""
    return n * ((dim or UNKNOWN_DIM) * BYTES_PER_FLOAT + 512) + (256 << 10)


class HTTPEmbedder:
    """Embeddings from an OpenAI-compatible server; see the module docstring.

    ``base_url`` is the server root (``http://localhost:8080``); a trailing
    ``/v1`` is accepted and dropped, since paths are appended to the root.
    ``dim`` is the configured dimension, else learnt from the first answer;
    reading it before any ``embed`` asks the server once. ``tokenizer`` is
    ``tokenizer`` if given, else a local ``tokenizer_file``, else the server's
    tokenize endpoint in ``tokenize_style`` ("native", "llama.cpp", "vllm",
    "tei"; "none" requires one of the local options). ``sleep``, ``clock`` and
    ``random`` are injectable so tests never wait.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        dim: int | None = None,
        tokenize_style: str = "native",
        tokenize_path: str | None = None,
        tokenizer: Tokenizer | None = None,
        tokenizer_file: str | Path | None = None,
        batch_size: int = 64,
        max_batch_tokens: int = 8192,
        concurrency: int = 4,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        jitter: float = 0.1,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        random: Callable[[], float] = _random.random,
        monotonic: Callable[[], float] = time.monotonic,
        adaptive: bool = True,
    ) -> None:
        _check(bool(model) and isinstance(model, str), "model must be a non-empty string")
        _check(dim is None or (type(dim) is int and dim > 0), "dim must be a positive integer")
        _check(tokenize_style in TOKENIZE_STYLES,
               f"tokenize_style must be one of {', '.join(TOKENIZE_STYLES)}")
        _check(type(batch_size) is int and batch_size >= 1, "batch_size must be >= 1")
        _check(type(max_batch_tokens) is int and max_batch_tokens >= 1, "max_batch_tokens must be >= 1")
        _check(type(concurrency) is int and concurrency >= 1, "concurrency must be >= 1")
        _check(timeout > 0, "timeout must be > 0")
        _check(type(retries) is int and retries >= 0, "retries must be >= 0")
        _check(backoff >= 0 and backoff_max >= 0 and retry_after_max >= 0 and jitter >= 0,
               "backoff, backoff_max, retry_after_max and jitter must be >= 0")
        if tokenize_path is not None:  # checked before anything is built or sent (it may come from a folder's config)
            check_url_path(tokenize_path, "[embedder] tokenize_path")
        local = tokenizer
        if local is None and tokenizer_file is not None:
            local = HFTokenizer.from_file(tokenizer_file, model)
        _check(local is not None or tokenize_style != "none",
               "tokenize_style='none' needs tokenizer_file (or a tokenizer object)")
        self.model = model
        self._dim = dim
        self._dim_source = "configured dim" if dim is not None else ""
        self._batch_size = batch_size
        self._max_batch_tokens = max_batch_tokens
        self._concurrency = concurrency
        self._timeout = float(timeout)
        self._retries = retries
        self._monotonic = monotonic
        self._pace = Pace(batch_size, max_batch_tokens, concurrency, float(timeout), adaptive=adaptive)
        self._lock = threading.Lock()
        self._api_key_env = api_key_env
        headers = {"Accept": "application/json", "User-Agent": f"ragtui/{__version__}"}
        secret = None
        if api_key_env:
            secret = os.environ.get(api_key_env, "").strip()
            _check(bool(secret), f"environment variable {api_key_env} (api_key_env) is not set "
                                 "or empty; it should hold the API key")
            headers["Authorization"] = f"Bearer {secret}"
        root = base_url.rstrip("/") if isinstance(base_url, str) else base_url
        if isinstance(root, str) and root.endswith("/v1"):
            root = root[: -len("/v1")]
        self._poster = JSONPoster(
            root, headers=headers, secret=secret, timeout=float(timeout),
            policy=RetryPolicy(retries, backoff, backoff_max, retry_after_max, jitter),
            max_connections=concurrency + 1, transport=transport,
            sleep=sleep, clock=clock, random=random,
        )
        self._local_tokenizer = local is not None
        if local is not None:
            self.tokenizer: Tokenizer = local
        else:
            path = DEFAULT_TOKENIZE_PATHS[tokenize_style] if tokenize_path is None else tokenize_path
            self.tokenizer = HTTPTokenizer(self._poster, model=model, style=tokenize_style,
                                           path=path, concurrency=concurrency)

    def __repr__(self) -> str:
        key = f", api_key_env={self._api_key_env!r}" if self._api_key_env else ""
        return f"HTTPEmbedder(base_url={self._poster.display_base!r}, model={self.model!r}{key})"

    def __enter__(self) -> HTTPEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dim(self) -> int:
        """The embedding length (configured, or learnt from the server)."""
        if self._dim is None:
            self._embed_batch([_PROBE_TEXT], None)
        assert self._dim is not None
        return self._dim

    @property
    def known_dim(self) -> int | None:
        """The dimension if configured or learnt already, else None (reading it asks no server)."""
        return self._dim

    def close(self) -> None:
        """Close the connection pool."""
        self._poster.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows in input order; see the module docstring."""
        texts = check_texts(texts)
        out: np.ndarray | None = None
        for positions, rows in self.embed_parts(texts):
            if out is None:
                out = np.empty((len(texts), rows.shape[1]), dtype=np.float32)
            out[positions] = rows
        if out is None:  # nothing was sent: every text is empty (or there are none)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
        empty = [i for i, t in enumerate(texts) if not t]
        if empty:
            out[empty] = empty_text_vector(out.shape[1])
        return out

    def embed_parts(self, texts: Sequence[str]) -> Iterator[tuple[list[int], np.ndarray]]:
        """The vectors of the non-empty ``texts``, batch by batch as the server answers.

        Yields ``(positions, rows)``: ``rows[k]`` is the unit vector of
        ``texts[positions[k]]``. Batches come back in any order; every non-empty
        text is in exactly one part once the iterator ends. Empty texts are
        left out (they get ``empty_text_vector(dim)``). A failure raises
        ``EmbeddingError`` after the parts already yielded, and closing the
        iterator early abandons the requests in flight (their connections are
        closed).
        """
        texts = check_texts(texts)
        sent = [i for i, t in enumerate(texts) if t]
        if not sent:
            return
        sent_texts = [texts[i] for i in sent]
        if self._local_tokenizer:
            counts = self.tokenizer.count_many(sent_texts)
        else:
            counts = [len(t.encode("utf-8")) + 1 for t in sent_texts]
        for part, rows in self._stream(sent_texts, counts):
            yield [sent[k] for k in part], rows

    @property
    def pace(self) -> Pace:
        """The adaptive batch budget and concurrency, as they stand after the last answer."""
        return self._pace

    @property
    def retried(self) -> int:
        """Requests (embeddings, tokenize) repeated after a failure: HTTP 429/5xx, a broken connection."""
        return self._poster.retried

    def _stream(self, texts: list[str], counts: list[int]) -> Iterator[tuple[list[int], np.ndarray]]:
        """Send ``texts`` in batches sized by ``self._pace``; yield ``(indices, rows)`` as answers arrive."""
        pace = self._pace
        todo: deque[int] = deque(range(len(texts)))
        timeouts = [0] * len(texts)
        abort = threading.Event()
        inflight: dict[Future[tuple[np.ndarray, float]], tuple[list[int], int, float]] = {}
        pool = ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="ragtui-embed")
        finished = False
        try:
            while todo or inflight:
                while todo and len(inflight) < pace.concurrency:
                    batch = _take(todo, counts, pace.batch_texts, pace.batch_tokens)
                    tokens = sum(counts[i] for i in batch)
                    future = pool.submit(self._timed_batch, [texts[i] for i in batch], abort)
                    inflight[future] = (batch, tokens, self._monotonic())
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: inflight[f][0][0]):
                    batch, tokens, sent_at = inflight.pop(future)
                    try:
                        rows, seconds = future.result()
                    except RequestTimeout as exc:
                        pace.timed_out(tokens, len(batch), self._monotonic() - sent_at)
                        for i in batch:
                            timeouts[i] += 1
                        if len(batch) == 1 and timeouts[batch[0]] > self._retries:
                            raise EmbeddingError(
                                f"{exc} — {timeouts[batch[0]]} timeout(s), the last for one text of about "
                                f"{counts[batch[0]]} tokens alone; raise timeout (now {self._timeout:g}s), or "
                                "lower chunker.max_tokens, or give the server more slots or a faster model"
                            ) from None
                        todo.extendleft(reversed(batch))
                        continue
                    pace.answered(tokens, len(batch), seconds)
                    yield batch, rows
            finished = True
        finally:
            if not finished:
                abort.set()
                if inflight:
                    # The answers are no longer wanted: close their connections so the
                    # server can stop computing them (llama.cpp's server does).
                    self._poster.cancel_all()
                for future in inflight:
                    future.cancel()
            pool.shutdown(wait=True)

    def _timed_batch(self, texts: list[str], abort: threading.Event) -> tuple[np.ndarray, float]:
        t0 = self._monotonic()
        rows = self._embed_batch(texts, abort, retry_timeouts=not self._pace.adaptive)
        return rows, self._monotonic() - t0

    def _embed_batch(self, texts: list[str], abort: threading.Event | None, *,
                     retry_timeouts: bool = True) -> np.ndarray:
        answer = self._poster.post(EMBEDDINGS_PATH, {"model": self.model, "input": texts}, abort=abort,
                                   retry_timeouts=retry_timeouts, max_bytes=answer_bound(len(texts), self._dim))
        source = f"POST {self._poster.display_url(EMBEDDINGS_PATH)}"
        matrix = _read_embeddings(answer, len(texts), source)
        with self._lock:
            if self._dim is None:
                self._dim = matrix.shape[1]
                self._dim_source = "the server's first answer"
            expected, origin = self._dim, self._dim_source
        if matrix.shape[1] != expected:
            raise EmbeddingError(
                f"{source}: got {matrix.shape[1]}-dimensional embeddings, expected {expected} "
                f"({origin}); is model={self.model!r} the model the server runs?"
            )
        return normalize_rows(matrix, source=source)


def _take(todo: deque[int], counts: Sequence[int], max_texts: int, max_tokens: int) -> list[int]:
    """Pop the next batch off ``todo``: at most ``max_texts`` texts and ``max_tokens`` tokens (at least one text)."""
    batch = [todo.popleft()]
    tokens = counts[batch[0]]
    while todo and len(batch) < max_texts and tokens + counts[todo[0]] <= max_tokens:
        tokens += counts[todo[0]]
        batch.append(todo.popleft())
    return batch


class Pace:
    """How much the HTTP embedder asks of the server at once: adapted to how fast it answers.

    Starts small (``START_TOKENS`` per request, one request at a time), since
    a slow server (one slot, hundreds of tokens a second) must succeed with the
    defaults. An answer that came within ``GROW`` of the timeout for a batch
    that used at least half the budget grows the budget, by the speed it
    measured: to the batch that speed answers in ``TARGET`` of the timeout
    when work grows as the square of the batch (``tokens * sqrt(TARGET *
    timeout / seconds)``), at most double, up to ``max_batch_tokens``, so a
    server whose work grows faster than its batch (attention, a batch past
    its own batch size) still answers the next one well inside the timeout;
    then, with the budget at its maximum, the concurrency (by one, up to
    ``concurrency``). An answer slower than
    ``SHRINK`` of the timeout takes one request away, or halves the budget at
    one request. A timeout halves both and sets a ceiling that growth stays
    under: with one request in flight, the largest batch answered so far (or
    half the timed-out one), else one request fewer. The ceiling is lifted
    again (doubled, or one request more) after ``RELAX_AFTER`` fast answers in
    a row at it, a number that doubles with every timeout, so a passing stall
    does not slow the rest of a long ingest while a server that really is
    that slow sees a too-large batch ever more rarely. Never above the
    configured maxima, never below one text and one request.
    """

    START_TOKENS = 512
    GROW = 0.25
    TARGET = 0.25
    SHRINK = 0.5
    RELAX_AFTER = 16

    def __init__(self, batch_size: int, max_batch_tokens: int, concurrency: int, timeout: float, *,
                 adaptive: bool = True) -> None:
        self.adaptive = adaptive
        self.batch_texts = batch_size
        self.max_tokens = max_batch_tokens
        self.max_concurrency = concurrency
        self.timeout = timeout
        self.batch_tokens = min(max_batch_tokens, self.START_TOKENS) if adaptive else max_batch_tokens
        self.concurrency = 1 if adaptive else concurrency
        self.token_ceiling = max_batch_tokens
        """Below the smallest batch that timed out: growth stops there."""
        self.concurrency_ceiling = concurrency
        self.largest_ok = 0
        """The most tokens one answered batch held."""
        self._relax_after = self.RELAX_AFTER
        self._streak = 0
        self.requests = 0
        self.timeouts = 0
        self.resent_texts = 0
        """Texts sent again because the request that held them timed out."""
        self.resent_tokens = 0
        self.lost_seconds = 0.0
        """Seconds spent waiting for answers that did not come in time."""
        self._lock = threading.Lock()

    def counters(self) -> dict[str, float]:
        """What an ingest reports: requests, timeouts and the work they cost (differences of two give one run's)."""
        with self._lock:
            return {"requests": self.requests, "timeouts": self.timeouts, "resent_texts": self.resent_texts,
                    "resent_tokens": self.resent_tokens, "lost_seconds": self.lost_seconds}

    def __repr__(self) -> str:
        return (f"Pace(batch_tokens={self.batch_tokens}, concurrency={self.concurrency}, "
                f"requests={self.requests}, timeouts={self.timeouts})")

    def answered(self, tokens: int, texts: int, seconds: float) -> None:
        with self._lock:
            self.requests += 1
            self.largest_ok = max(self.largest_ok, tokens)
            if not self.adaptive:
                return
            full = tokens * 2 >= self.batch_tokens or texts >= self.batch_texts
            if seconds <= self.GROW * self.timeout and full:
                # The batch this answer's speed should answer in TARGET of the timeout, if the work grew as the
                # square of the batch (as attention's does): exact then, on the safe side for linear work. A
                # fixed cost per request makes small batches look slower than they are: safe too.
                if self.batch_tokens < self.token_ceiling and texts < self.batch_texts:
                    reach = (int(tokens * math.sqrt(self.TARGET * self.timeout / seconds)) if seconds > 0
                             else self.token_ceiling)
                    # Below the budget: not fast enough to grow by its speed, so it holds.
                    self.batch_tokens = max(self.batch_tokens, min(self.token_ceiling, self.batch_tokens * 2, reach))
                elif self.concurrency < self.concurrency_ceiling:
                    self.concurrency += 1
                else:
                    self._relax()
            elif seconds > self.SHRINK * self.timeout:
                self._streak = 0
                if self.concurrency > 1:
                    self.concurrency -= 1
                else:
                    self.batch_tokens = max(1, self.batch_tokens // 2)
            log.debug("embedding answer: %d tokens in %.2fs -> %r", tokens, seconds, self)

    def _relax(self) -> None:
        """A fast answer at the ceiling: after enough of them in a row, lift the ceiling a step."""
        if self.token_ceiling >= self.max_tokens and self.concurrency_ceiling >= self.max_concurrency:
            return
        self._streak += 1
        if self._streak < self._relax_after:
            return
        self._streak = 0
        if self.token_ceiling < self.max_tokens:
            self.token_ceiling = min(self.max_tokens, self.token_ceiling * 2)
        else:
            self.concurrency_ceiling += 1
        log.debug("lifting the ceiling after %d fast answers: %r", self._relax_after, self)

    def timed_out(self, tokens: int, texts: int = 0, seconds: float = 0.0) -> None:
        with self._lock:
            self.requests += 1
            self.timeouts += 1
            self.resent_texts += texts
            self.resent_tokens += tokens
            self.lost_seconds += seconds
            self._streak = 0
            self._relax_after *= 2
            if self.concurrency > 1:  # answers waited behind each other: fewer at a time
                self.concurrency_ceiling = self.concurrency - 1
                self.concurrency = max(1, self.concurrency // 2)
            else:  # this batch alone was too much: stay at what worked (or half of this)
                known = self.largest_ok if 0 < self.largest_ok < tokens else tokens // 2
                self.token_ceiling = max(1, min(self.token_ceiling, known))
            self.batch_tokens = max(1, min(self.batch_tokens, tokens) // 2)
            log.info("no embedding answer within %gs for %d tokens; now %r", self.timeout, tokens, self)


def plan_batches(token_counts: Sequence[int], batch_size: int, max_batch_tokens: int) -> list[tuple[int, int]]:
    """Split ``range(len(token_counts))`` into contiguous ``(lo, hi)`` batches.

    Each batch has at most ``batch_size`` texts and at most ``max_batch_tokens``
    tokens, except that a single text over the token budget forms a batch
    alone (the server decides whether it fits).
    """
    batches: list[tuple[int, int]] = []
    lo, tokens = 0, 0
    for i, n in enumerate(token_counts):
        if i > lo and (i - lo >= batch_size or tokens + n > max_batch_tokens):
            batches.append((lo, i))
            lo, tokens = i, 0
        tokens += n
    if lo < len(token_counts):
        batches.append((lo, len(token_counts)))
    return batches


def _read_embeddings(answer: Any, n: int, source: str) -> np.ndarray:
    """The ``(n, d)`` float64 matrix in ``answer``, rows ordered by ``index``."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError(f"{source}: the answer has no \"data\" list; is this an "
                             "OpenAI-compatible embeddings endpoint?")
    if len(data) != n:
        raise EmbeddingError(f"{source}: sent {n} text(s) but got {len(data)} embedding(s) back")
    rows: list[Any] = [None] * n
    for pos, item in enumerate(data):
        if not isinstance(item, dict) or "embedding" not in item:
            raise EmbeddingError(f"{source}: data[{pos}] has no \"embedding\"")
        index = item.get("index", pos)
        if type(index) is not int or not 0 <= index < n or rows[index] is not None:
            raise EmbeddingError(f"{source}: data[{pos}] has index {index!r}; expected each of 0..{n - 1} once")
        vector = item["embedding"]
        if isinstance(vector, str):  # encoding_format="base64": little-endian float32
            try:
                vector = np.frombuffer(base64.b64decode(vector, validate=True), dtype="<f4")
            except ValueError:
                raise EmbeddingError(f"{source}: data[{pos}] is a string but not base64 float32") from None
        if _is_nested(vector):
            raise EmbeddingError(_PER_TOKEN.format(source=source, pos=pos))
        rows[index] = vector
    try:
        matrix = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise EmbeddingError(f"{source}: the embeddings are not lists of numbers of one length") from None
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise EmbeddingError(f"{source}: the embeddings are not lists of numbers of one length")
    return matrix


_PER_TOKEN = (
    "{source}: data[{pos}] is a list of vectors, one per token, not one vector per text: the server "
    "runs without pooling. Start it with pooling: llama.cpp `llama-server --embeddings --pooling mean`; "
    "llama-cpp-python `python -m llama_cpp.server --embedding true --kv_overrides llama.pooling_type=int:1`"
)


def _is_nested(vector: Any) -> bool:
    """Whether ``vector`` is a list of lists (per-token vectors), judged by its first item."""
    return isinstance(vector, list) and bool(vector) and isinstance(vector[0], (list, tuple))


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise UsageError(message)
