"""``ask``: retrieve -> pack -> chat -> check, timing every stage.

Chat calls: one for the answer; with ``hyde`` one more before retrieval unless
the cache holds the question; without ``fast``, one more when the answer cites
nothing (the same sources, the answer, and a request for labels). ``fast``
makes exactly one call (and refuses ``hyde``).

The context fits the model: when its context length is known
(``ChatClient.context_window()``), the pack budget is lowered, if need be, so
that ``COUNT_SLACK`` times the prompt's tokens (counted with the index's
tokenizer, which may count fewer than the chat model's), plus
``TEMPLATE_TOKENS`` for the chat template, plus ``max_tokens`` for the answer,
fit in it; the repair call's answer gets what is left, or is not made.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragtui.core.answer.check import CitationCheck, check_answer
from ragtui.core.answer.hyde import HydeCache
from ragtui.core.answer.llm import ChatAnswer, ChatClient, Message
from ragtui.core.answer.pack import Pack, pack
from ragtui.core.answer.prompt import (
    ANSWER_SYSTEM,
    EXAMPLE_ANSWER,
    EXAMPLE_QUESTION,
    answer_messages,
    hyde_messages,
    repair_messages,
)
from ragtui.core.citations import Resolver, parse_labels
from ragtui.core.embedders.base import Tokenizer
from ragtui.core.errors import NotFoundError, UsageError
from ragtui.core.search.query import literal
from ragtui.core.search.retriever import MAX_QUERY_CHARS, Hit, Retriever, SearchParams, check_query, check_search

__all__ = ["COUNT_SLACK", "HYDE_MAX_TOKENS", "RRF_K", "TEMPLATE_TOKENS", "AskResult", "ask", "fit_budget", "fuse"]

HYDE_MAX_TOKENS = 200
RRF_K = 60
"""Reciprocal-rank fusion constant for the question's and the hypothetical answer's rankings."""
TEMPLATE_TOKENS = 64
"""The chat template's own tokens around four messages (role markers, separators)."""
COUNT_SLACK = 1.25
"""The index's tokenizer may count a quarter fewer tokens than the chat model's for the same text."""
MIN_REPAIR_TOKENS = 32


def fit_budget(budget: int, window: int | None, max_tokens: int, prompt_tokens: int) -> int:
    """The pack budget that fits a ``window``-token context beside ``prompt_tokens`` and the answer (see above)."""
    if window is None:
        return budget
    return min(budget, int((window - TEMPLATE_TOKENS - max_tokens) / COUNT_SLACK) - prompt_tokens)


def _tokens(messages: Sequence[Message], tokenizer: Tokenizer) -> int:
    return sum(tokenizer.count(m["content"]) for m in messages)


@dataclass
class AskResult:
    """What ``ask`` did and found."""

    question: str
    text: str
    """The final answer."""
    pack: Pack
    checks: list[CitationCheck]
    mode: str
    """The retrieval mode (``+hyde`` when a hypothetical answer was searched too)."""
    answers: list[ChatAnswer]
    """Every chat call's answer, in order (the HyDE passage's first when one was made)."""
    stages: dict[str, float]
    """Seconds per stage: hyde, retrieve, pack, chat, repair, check (those that ran)."""
    hyde: str | None = None
    hyde_cached: bool = False
    warnings: list[str] = field(default_factory=list)
    context_window: int | None = None
    """The chat model's context length the pack was fitted to (None: unknown, not fitted)."""

    @property
    def chat_calls(self) -> int:
        return len(self.answers)

    @property
    def prompt_tokens(self) -> int | None:
        known = [a.prompt_tokens for a in self.answers if a.prompt_tokens is not None]
        return sum(known) if known else None

    @property
    def completion_tokens(self) -> int | None:
        known = [a.completion_tokens for a in self.answers if a.completion_tokens is not None]
        return sum(known) if known else None

    @property
    def all_verified(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def stats(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "chat_calls": self.chat_calls,
            "input_tokens": self.prompt_tokens,
            "output_tokens": self.completion_tokens,
            "usage_reported": all(a.prompt_tokens is not None for a in self.answers),
            "context_tokens": self.pack.used,
            "budget": self.pack.budget,
            "context_window": self.context_window,
            "seconds": {name: round(s, 4) for name, s in self.stages.items()},
            "first_token_seconds": next((a.first_token_seconds for a in reversed(self.answers)
                                         if a.first_token_seconds is not None), None),
            "hyde_cached": self.hyde_cached if self.hyde is not None else None,
        }

    def to_json(self) -> dict[str, object]:
        counts = {v: sum(1 for c in self.checks if c.verdict == v) for v in
                  ("verified", "stale", "not-in-context", "unresolvable")}
        return {
            "question": self.question,
            "answer": self.text,
            "citations": [c.to_json() for c in self.checks],
            "verdicts": counts,
            "all_verified": self.all_verified,
            "warnings": self.warnings,
            "stats": self.stats(),
            "hyde": self.hyde,
            "context": self.pack.to_json(),
        }


def fuse(rankings: list[list[Hit]], k: int) -> list[Hit]:
    """Reciprocal-rank fusion of several rankings of one index: the top ``k``, ties by row."""
    scores: dict[int, float] = {}
    first: dict[int, Hit] = {}
    for hits in rankings:
        for hit in hits:
            scores[hit.row] = scores.get(hit.row, 0.0) + 1.0 / (RRF_K + hit.rank)
            first.setdefault(hit.row, hit)
    order = sorted(scores, key=lambda row: (-scores[row], row))[:k]
    return [Hit(i + 1, scores[row], first[row].chunk_id, first[row].doc_id, row, first[row].text)
            for i, row in enumerate(order)]


def ask(
    question: str,
    retriever: Retriever,
    tokenizer: Tokenizer,
    client: ChatClient,
    *,
    mode: str,
    k: int,
    budget: int,
    params: SearchParams | None = None,
    fast: bool = False,
    hyde: bool = False,
    hyde_cache: HydeCache | None = None,
    on_delta: Callable[[str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> AskResult:
    """Answer ``question`` from the index with checked citations; see the module docstring.

    ``on_delta`` streams the answer's text as it arrives; ``on_note`` gets one-line notices (a HyDE
    passage taken from the cache, a second call for citations). Raises ``UsageError`` for bad input,
    ``NotFoundError`` when retrieval finds nothing to answer from (no chat call is made then),
    ``LLMError`` for a chat server that failed.
    """
    if fast and hyde:
        raise UsageError("--fast makes exactly one chat call, and --hyde needs a second: choose one")
    check_query(question)
    params = params or {}
    check_search(mode, dict(params))
    note = on_note or (lambda _text: None)
    stages: dict[str, float] = {}
    answers: list[ChatAnswer] = []
    data = retriever.data
    passage: str | None = None
    cached = False
    if hyde:
        t = time.perf_counter()
        cache = hyde_cache or HydeCache()
        server = client.display_url
        passage = cache.get(server, client.model, question)
        if passage is not None:
            cached = True
            note("HyDE passage taken from the cache (no chat call)")
        else:
            made = client.chat(hyde_messages(question), max_tokens=min(HYDE_MAX_TOKENS, client.max_tokens))
            answers.append(made)
            passage = made.text
            cache.put(server, client.model, question, passage)
        stages["hyde"] = time.perf_counter() - t
    t = time.perf_counter()
    # A question is prose, not query syntax (spec/query-syntax.md): its quotes, dashes and colons are
    # searched as text, as the model reads them; so is the model's passage.
    hits: list[Hit] = retriever.search(literal(question), mode=mode, k=k, **params)
    if passage is not None:
        hits = fuse([hits, retriever.search(literal(passage[:MAX_QUERY_CHARS]), mode=mode, k=k, **params)], k)
    stages["retrieve"] = time.perf_counter() - t
    window = client.context_window()  # asked of the server once, outside the stages' seconds
    t = time.perf_counter()
    fixed = [ANSWER_SYSTEM, EXAMPLE_QUESTION, EXAMPLE_ANSWER, f"Sources:\n\n\n\nQuestion: {question}"]
    fitted = fit_budget(budget, window, client.max_tokens, sum(tokenizer.count(text) for text in fixed))
    if fitted < 1:
        raise UsageError(f"the chat model's context ({window:,} tokens, from {client.window_source}) leaves no room for "
                         f"sources beside the prompt and max_tokens = {client.max_tokens}: lower [llm] max_tokens "
                         "or give the model a longer context")
    packed = pack(question, hits, data, tokenizer, fitted, mode=mode, resolver=Resolver(data))
    if window is not None and packed.snippets:
        # The sources' "Source n: [label]" lines are not in the budget: what they add comes off it, once.
        over = COUNT_SLACK * _tokens(answer_messages(question, packed), tokenizer) + TEMPLATE_TOKENS \
            + client.max_tokens - window
        if over > 0:
            fitted = max(1, fitted - math.ceil(over / COUNT_SLACK))
            packed = pack(question, hits, data, tokenizer, fitted, mode=mode, resolver=Resolver(data))
    if window is not None and fitted < budget:
        note(f"the pack budget is {fitted:,} tokens, not {budget:,}, so that the sources, the prompt and a "
             f"{client.max_tokens}-token answer fit the model's {window:,}-token context ({client.window_source})")
    stages["pack"] = time.perf_counter() - t
    if not packed.snippets:
        why = "nothing fits the budget" if hits else "the search found nothing"
        raise NotFoundError(f"no context to answer from ({why}; mode {mode}, budget {fitted} tokens): no chat call "
                            "was made; try another --mode, a larger --budget or other words")
    t = time.perf_counter()
    answer = client.chat(answer_messages(question, packed), on_delta=on_delta)
    answers.append(answer)
    stages["chat"] = time.perf_counter() - t
    text = answer.text
    warnings: list[str] = []
    if not parse_labels(text) and not fast:
        repair = repair_messages(question, packed, text)
        room = client.max_tokens if window is None else min(client.max_tokens, int(
            window - TEMPLATE_TOKENS - COUNT_SLACK * _tokens(repair, tokenizer)))
        if room < MIN_REPAIR_TOKENS:
            note("the answer cites nothing, and a second call asking for citations would not fit the model's "
                 "context")
        else:
            note("the answer cites nothing; asking once more for citations")
            t = time.perf_counter()
            answer = client.chat(repair, on_delta=on_delta, max_tokens=room)
            answers.append(answer)
            stages["repair"] = time.perf_counter() - t
            text = answer.text
    t = time.perf_counter()
    checks = check_answer(text, packed, data)
    stages["check"] = time.perf_counter() - t
    if not checks:
        warnings.append("the answer cites no source: nothing in it can be checked")
    return AskResult(question, text, packed, checks, mode + ("+hyde" if hyde else ""), answers, stages,
                     passage, cached, warnings, window)
