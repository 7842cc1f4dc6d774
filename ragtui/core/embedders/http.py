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
  ``concurrency`` batches at a time. Tokens are counted with the local
  tokenizer when one is configured, else estimated as UTF-8 bytes + 1 (an
  upper bound for byte-level BPE, byte-fallback SentencePiece and WordPiece),
  so no second round trip per text is needed.
* The empty string is never sent (hosted APIs reject it); it gets
  ``empty_text_vector(dim)`` like every embedder.
* The API key is read from the environment variable *named* by
  ``api_key_env`` and sent as ``Authorization: Bearer``; it never appears in
  ``repr``, messages, logs or exceptions.
"""

from __future__ import annotations

import base64
import os
import random as _random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from ragtui import __version__
from ragtui.core.embedders._httpx import httpx
from ragtui.core.embedders._transport import JSONPoster, RetryPolicy
from ragtui.core.embedders.base import Tokenizer, check_texts, empty_text_vector, normalize_rows
from ragtui.core.embedders.hf_tokenizer import HFTokenizer
from ragtui.core.embedders.http_tokenizer import (
    DEFAULT_TOKENIZE_PATHS,
    TOKENIZE_STYLES,
    HTTPTokenizer,
)
from ragtui.core.errors import EmbeddingError, UsageError

__all__ = ["EMBEDDINGS_PATH", "HTTPEmbedder", "plan_batches"]

EMBEDDINGS_PATH = "/v1/embeddings"
_PROBE_TEXT = "dimension probe"


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
            path = tokenize_path or DEFAULT_TOKENIZE_PATHS[tokenize_style]
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

    def close(self) -> None:
        """Close the connection pool."""
        self._poster.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows in input order; see the module docstring."""
        texts = check_texts(texts)
        sent = [i for i, t in enumerate(texts) if t]
        sent_texts = [texts[i] for i in sent]
        if self._local_tokenizer:
            counts = self.tokenizer.count_many(sent_texts)
        else:
            counts = [len(t.encode("utf-8")) + 1 for t in sent_texts]
        batches = plan_batches(counts, self._batch_size, self._max_batch_tokens)
        results = self._run([sent_texts[lo:hi] for lo, hi in batches])
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for (lo, hi), rows in zip(batches, results):
            out[sent[lo:hi]] = rows
        if len(sent) < len(texts):
            empty = np.ones(len(texts), dtype=bool)
            empty[sent] = False
            out[empty] = empty_text_vector(self.dim)
        return out

    def _run(self, batches: list[list[str]]) -> list[np.ndarray]:
        if len(batches) <= 1 or self._concurrency == 1:
            return [self._embed_batch(b, None) for b in batches]
        abort = threading.Event()
        with ThreadPoolExecutor(max_workers=min(self._concurrency, len(batches)),
                                thread_name_prefix="ragtui-embed") as pool:
            futures = [pool.submit(self._embed_batch, b, abort) for b in batches]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f in done and f.exception() is not None]
            if failed:
                # Stop the other batches between attempts; report the first failure by order.
                abort.set()
                for f in futures:
                    f.cancel()
                raise failed[0].exception()  # type: ignore[misc]
            return [f.result() for f in futures]

    def _embed_batch(self, texts: list[str], abort: threading.Event | None) -> np.ndarray:
        answer = self._poster.post(EMBEDDINGS_PATH, {"model": self.model, "input": texts}, abort=abort)
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
        rows[index] = vector
    try:
        matrix = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise EmbeddingError(f"{source}: the embeddings are not lists of numbers of one length") from None
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise EmbeddingError(f"{source}: the embeddings are not lists of numbers of one length")
    return matrix


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise UsageError(message)
