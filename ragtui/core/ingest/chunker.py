"""Cut a document into overlapping token windows that prefer to end at a break.

spec/chunker.md is the normative description; this module is its fast path and
tests/unit/test_chunker.py holds a plain reference that must agree with it.

What a caller may rely on, for every ``Chunk`` of ``chunk_text(doc, tok, m, o)``:

- ``chunk.text == doc[chunk.start:chunk.end]``; the text is never empty and
  neither begins nor ends with whitespace (``str.isspace``);
- ``chunk.n_tokens == tok.count(chunk.text)`` and ``1 <= n_tokens <= m``;
- starts and ends both strictly increase from one chunk to the next;
- consecutive chunks come from token windows that share at most ``o`` tokens
  (with disjoint spans: at most ``o`` tokens lie wholly inside both chunks);
- the non-whitespace part of every token is inside some chunk, except a token
  whose text alone counts more than ``m`` tokens (it cannot be chunked);
- the same document, tokenizer and parameters always give the same chunks.

Only one ``tok.spans(doc)`` call is made per document (or, from
``LONG_DOCUMENT_CHARS`` characters on and when the tokenizer has it, one
``tok.iter_spans(doc)``, read part by part); counts are batched through
``tok.count_many``, with ``tok.count`` only for chunks that must shrink.
Given ``tokens`` (the document tokenized once, with ``keep_ids``), windows are
counted from ``tokens.window_ids`` where it has their ids, and only the rest
are tokenized.

Cost, for given ``max_tokens`` and ``overlap``: linear in the document's
length. One tokenization of the document, and window texts counted at most
three times per window kept plus 128, plus once per shrink step (plans are
capped and the cap halves after a window that does not fit, so the counts
thrown away stay within twice the windows kept plus 128). Memory: a long
document's tokens are held from the current window on, not all at once.
Measured with wordllama's tokenizer: 2.2 characters tokenized per character
of prose, 3.1 of minified JSON; a 10 MB line in 7-12 s and under 150 MB
(spec/chunker.md, Speed).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ragtui.core.errors import EmbeddingError, UsageError

__all__ = ["Chunk", "DEFAULT_MAX_TOKENS", "DEFAULT_OVERLAP", "chunk_text"]

DEFAULT_MAX_TOKENS = 256
"""The window, in the tokenizer's tokens (``meta.json`` ``chunker.max_tokens``)."""
DEFAULT_OVERLAP = 32
"""Tokens shared by consecutive windows (``meta.json`` ``chunker.overlap``)."""

# Break kinds, strongest last; a cut is "none" unless whitespace follows it.
_NONE, _SENTENCE, _LINE, _PARAGRAPH = 0, 1, 2, 3

# Each match is one maximal whitespace run that is a break: it follows . ! ? or
# it holds a line break. \s is exactly str.isspace() for str patterns, and
# lookbehinds see text before `pos`, so a search may start at a run's first
# char. (?<!\s) keeps a long blank run without a line break linear, not quadratic.
_BREAK_RUN = re.compile(r"(?<=[.!?])\s+|(?<!\s)[^\S\r\n]*+[\r\n]\s*")
_NON_SPACE = re.compile(r"\S")
_ZWJ = "\u200d"

# Windows planned and counted per batch: the first batch, and the most.
_PLAN_FIRST, _PLAN_MAX = 64, 1024

IDS_MAX_CHARS = 8192
"""``keep_ids`` takes ids from ``tok.ids_many`` only for window texts shorter than this, where
``len(ids_many([t])[0]) == count(t)`` is one encoding (longer texts are split by the tokenizer)."""

LONG_DOCUMENT_CHARS = 1 << 18
"""From this length on, a tokenizer with ``iter_spans`` is asked for the spans
part by part (the chunker holds about one part, not the whole document's)."""


class _Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def spans(self, text: str) -> list[tuple[int, int]]: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


class _DocTokens(Protocol):
    """A document tokenized once (``HFTokenizer.encode_docs``)."""

    @property
    def spans(self) -> list[tuple[int, int]]: ...

    def window_ids(self, start: int, end: int) -> np.ndarray | None: ...


def _ids_many(tok: _Tokenizer) -> Callable[[Sequence[str]], list[list[int]]] | None:
    found = getattr(tok, "ids_many", None)
    return found if callable(found) else None


@dataclass(frozen=True)
class Chunk:
    """One window of a document: ``text == document[start:end]`` (code points)."""

    start: int
    """Offset of the chunk's first character in the document."""
    end: int
    """Offset just past the chunk's last character."""
    text: str
    """The exact substring; never empty, no leading or trailing whitespace."""
    n_tokens: int
    """``tokenizer.count(text)``, between 1 and max_tokens."""
    ids: np.ndarray | None = field(default=None, compare=False, repr=False)
    """With ``keep_ids``: the token ids the window was counted from (int32, ``n_tokens`` of them), when
    the chunker has them (a window shrunk by ``count`` has none), so an embedder need not tokenize the text again."""


def chunk_text(
    text: str,
    tokenizer: _Tokenizer,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    spans: Sequence[tuple[int, int]] | None = None,
    keep_ids: bool = False,
    tokens: _DocTokens | None = None,
) -> list[Chunk]:
    """Chunk ``text`` into windows of at most ``max_tokens`` tokens (spec/chunker.md).

    ``spans``, when given, must be ``tokenizer.spans(text)`` computed by the
    caller (ingest tokenizes many documents in one parallel batch); the
    chunks are the same either way.

    ``keep_ids``: when the tokenizer has ``ids_many`` (texts -> token ids,
    the ids of ``count``), windows are counted from their ids and each chunk
    keeps them in ``Chunk.ids``: the chunks are the same, and the caller's
    embedder can take the ids instead of tokenizing every chunk again.

    ``tokens``, when given, must be the tokenizer's ``encode_docs([text])[0]``
    (instead of ``spans``): its spans are used, and with ``keep_ids`` a window
    whose ids ``tokens.window_ids`` has (a slice of the document's, after a
    short head tokenized alone at most) is counted from them, not tokenized
    again. The chunks are the same.

    ``tokenizer`` is any object with ``count``, ``spans`` and ``count_many``;
    its spans are character offsets whose starts and ends each never decrease
    (spans may overlap, as byte-fallback pieces of one character do).
    Raises UsageError unless ``max_tokens >= 1`` and ``0 <= overlap < max_tokens``,
    and EmbeddingError when the tokenizer's offsets fall outside the text.
    A document with no non-whitespace text gives ``[]`` without tokenizing.
    """
    _check_params(max_tokens, overlap)
    if not text or text.isspace():
        return []
    if tokens is not None:
        spans = tokens.spans
    return _Chunker(text, tokenizer, max_tokens, overlap, spans, keep_ids, tokens if keep_ids else None).run()


def _check_params(max_tokens: object, overlap: object) -> None:
    # bool is an int subclass; True as a window size is a caller's mistake.
    for name, value in (("max_tokens", max_tokens), ("overlap", overlap)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"chunker {name} must be an integer, got {value!r}")
    assert isinstance(max_tokens, int) and isinstance(overlap, int)
    if max_tokens < 1:
        raise UsageError(f"chunker max_tokens must be at least 1, got {max_tokens}")
    if not 0 <= overlap < max_tokens:
        raise UsageError(
            f"chunker overlap must be at least 0 and less than max_tokens "
            f"({max_tokens}), got {overlap}"
        )


class _Chunker:
    """State for one document; ``run`` returns its chunks."""

    def __init__(
        self,
        doc: str,
        tok: _Tokenizer,
        max_tokens: int,
        overlap: int,
        spans: Sequence[tuple[int, int]] | None = None,
        keep_ids: bool = False,
        tokens: _DocTokens | None = None,
    ) -> None:
        self.doc = doc
        self.tok = tok
        self.ids_many = _ids_many(tok) if keep_ids else None
        self.window_ids = tokens.window_ids if tokens is not None and self.ids_many is not None else None
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.tail = max_tokens // 4
        # The first non-whitespace position at or after any s in _ns_from .. _ns_at:
        # windows inside one long blank run ask for it again and again.
        self._ns_from, self._ns_at = 0, -1
        self._parts: Iterator[list[tuple[int, int]]] | None = None
        if spans is None and len(doc) >= LONG_DOCUMENT_CHARS and hasattr(tok, "iter_spans"):
            # A long document is tokenized part by part as the windows reach it,
            # and the tokens behind them are let go: memory stays bounded.
            self._parts = iter(tok.iter_spans(doc))
            self._ends: list[int] | None = None
            self.spans: Sequence[tuple[int, int]] = []
            self.n = 0
            self.done = False
            self._more()
        else:
            # Indexed in place: copying millions of offsets would cost more than the cutting.
            self.spans = tok.spans(doc) if spans is None else spans
            self.n = len(self.spans)
            self.done = True
            self._check_offsets(self.spans)
            # The ends on their own: _cut's bisection then runs without a key function.
            given = getattr(tokens, "ends", None)
            self._ends = given if isinstance(given, list) else [e for _, e in self.spans]

    def _check_offsets(self, spans: Sequence[tuple[int, int]]) -> None:
        # O(1) guard against a tokenizer that reports byte offsets or other garbage.
        if spans and not (0 <= spans[0][0] and spans[-1][1] <= len(self.doc)):
            raise EmbeddingError(
                f"tokenizer {getattr(self.tok, 'name', '?')!r} gave token offsets outside the "
                f"text ({spans[0][0]}..{spans[-1][1]} for {len(self.doc)} characters); "
                "offsets must be character offsets"
            )

    def _more(self) -> bool:
        """Append the next part of the tokens; False once there are no more."""
        while self._parts is not None:
            part = next(self._parts, None)
            if part is None:
                self._parts = None
                self.done = True
                return False
            if part:
                self._check_offsets(part)
                assert isinstance(self.spans, list)
                self.spans.extend(part)
                self.n = len(self.spans)
                return True
        return False

    def _refill(self, a: int, want: int) -> int:
        """Have tokens a .. a + want loaded (or all of them); returns a, renumbered
        when the tokens before it were let go."""
        if self.done:
            return a
        if a > self.n // 2:
            assert isinstance(self.spans, list)
            del self.spans[:a]  # tokens before a are never read again
            self.n = len(self.spans)
            a = 0
        while self.n <= a + want and self._more():
            pass
        return a

    def run(self) -> list[Chunk]:
        chunks: list[Chunk] = []
        counted: dict[tuple[int, int], int] = {}
        ids_of: dict[tuple[int, int], Sequence[int] | np.ndarray] = {}
        a, prev_end = 0, 0
        limit = _PLAN_FIRST
        while True:
            a = self._refill(a, (limit + 1) * self.max_tokens)
            if a >= self.n:
                break
            # Plan up to `limit` windows ahead as if every window's text fits,
            # count the plan in one batch, keep it up to the first window that
            # does not fit, settle that one exactly and plan again from there.
            # A shrunk chunk shifts only the next window or two before the plan
            # falls back onto the same breaks, so counts are kept by range.
            # The limit halves after a window that does not fit and doubles
            # after a plan that fits whole: counts thrown away stay within a
            # constant of the chunks kept, however often windows shrink.
            plan, a_after = self._plan(a, prev_end, limit)
            todo = [(s, e) for _, _, s, e in plan if (s, e) not in counted]
            if todo and self.window_ids is not None:
                self._count_windows(todo, counted, ids_of)
            elif todo:
                texts = [self.doc[s:e] for s, e in todo]
                if self.ids_many is not None and all(len(t) < IDS_MAX_CHARS for t in texts):
                    ids = self.ids_many(texts)
                    ids_of.update(zip(todo, ids))
                    counts = [len(x) for x in ids]
                else:
                    counts = self.tok.count_many(texts)
                self._check_answers(counts, todo)
                counted.update(zip(todo, counts, strict=True))
            a, fitted, last_start = a_after, True, -1
            for wa, wc, start, end in plan:
                last_start = start
                count = counted[start, end]
                if 1 <= count <= self.max_tokens:
                    got = ids_of.get((start, end))
                    kept = np.asarray(got, dtype=np.int32) if got is not None else None
                    chunks.append(Chunk(start, end, self.doc[start:end], count, kept))
                    prev_end = end
                    continue
                emitted, a = self._settle(wa, wc, start, count, prev_end)
                if emitted is not None:
                    chunks.append(emitted)
                    prev_end = emitted.end
                fitted = False
                break
            # Later windows start at or after this one's start: only counts of
            # ranges that start there or later can be asked for again.
            counted = {r: k for r, k in counted.items() if r[0] >= last_start}
            if ids_of:
                ids_of = {r: x for r, x in ids_of.items() if r[0] >= last_start}
            if not fitted:
                limit = max(1, limit // 2)
            elif len(plan) == limit:
                limit = min(_PLAN_MAX, 2 * limit)
        return chunks

    def _check_answers(self, answers: Sequence[object], asked: Sequence[object]) -> None:
        if len(answers) != len(asked):
            raise EmbeddingError(
                f"tokenizer {getattr(self.tok, 'name', '?')!r} counted "
                f"{len(answers)} texts when given {len(asked)}"
            )

    def _count_windows(
        self, todo: list[tuple[int, int]], counted: dict[tuple[int, int], int],
        ids_of: dict[tuple[int, int], Sequence[int] | np.ndarray],
    ) -> None:
        """Count windows (and keep their ids) from the document's own ids where ``tokens.window_ids``
        has them, tokenizing only the other windows (in one batch)."""
        assert self.window_ids is not None and self.ids_many is not None
        doc, window_ids = self.doc, self.window_ids
        long = [r for r in todo if r[1] - r[0] >= IDS_MAX_CHARS]
        if long:  # counted as without ids (see IDS_MAX_CHARS)
            counts = self.tok.count_many([doc[s:e] for s, e in long])
            self._check_answers(counts, long)
            counted.update(zip(long, counts))
        asked: list[tuple[int, int]] = []
        for r in todo:
            if r[1] - r[0] >= IDS_MAX_CHARS:
                continue
            got = window_ids(*r)
            if got is None:
                asked.append(r)
            else:
                ids_of[r] = got
                counted[r] = len(got)
        if asked:
            answers = self.ids_many([doc[s:e] for s, e in asked])
            self._check_answers(answers, asked)
            for r, ids in zip(asked, answers):
                ids_of[r] = ids
                counted[r] = len(ids)

    def _plan(self, a: int, prev_end: int, limit: int) -> tuple[list[tuple[int, int, int, int]], int]:
        """Up to ``limit`` windows (a, c, start, end) from token a on, assuming none
        must shrink, and the token where the next window would start; only
        windows whose tokens are loaded."""
        plan: list[tuple[int, int, int, int]] = []
        while a < self.n and len(plan) < limit:
            if not self.done and a + self.max_tokens >= self.n:
                break  # the window's cut needs tokens not loaded yet
            c = self._cut(a)
            start = self._content_start(self.spans[a][0])
            end = self._content_end(self.spans[c][1], start)
            if end <= max(start, prev_end):
                a = max(c + 1, a + 1)  # nothing new: whitespace, or inside the last chunk
                continue
            plan.append((a, c, start, end))
            prev_end = end
            a = self._next_start(a, c, start)
        return plan, a

    def _settle(
        self, a: int, c: int, start: int, count: int, prev_end: int
    ) -> tuple[Chunk | None, int]:
        """The chunk of window (a, c) whose first count did not fit, and the next a."""
        ids: np.ndarray | None = None
        while True:
            if count > self.max_tokens:
                if c == a:  # one token too many tokens long on its own: skip it
                    return None, a + 1
                c = max(a, c - max(1, count - self.max_tokens))
                end = self._content_end(self.spans[c][1], start)
                if end <= max(start, prev_end):
                    return None, max(c + 1, a + 1)
                ids = self._own_ids(start, end)
                count = self.tok.count(self.doc[start:end]) if ids is None else len(ids)
                continue
            if count < 1:  # a tokenizer that sees no token in non-blank text
                return None, max(c + 1, a + 1)
            return Chunk(start, end, self.doc[start:end], count, ids), self._next_start(a, c, start)

    def _own_ids(self, start: int, end: int) -> np.ndarray | None:
        """With ``tokens``: the ids of ``doc[start:end]`` alone (``tokens.window_ids``, else
        tokenized). Without (or for a long text): ``None``."""
        if self.window_ids is None or self.ids_many is None or end - start >= IDS_MAX_CHARS:
            return None
        got = self.window_ids(start, end)
        if got is not None:
            return got
        ids = self.ids_many([self.doc[start:end]])
        self._check_answers(ids, [start])
        return np.asarray(ids[0], dtype=np.int32)

    def _next_start(self, a: int, c: int, start: int) -> int:
        nxt = max(c + 1 - self.overlap, a + 1)
        # Starts must strictly increase in characters too, not only in tokens.
        while (nxt < self.n or self._more()) and self._content_start(self.spans[nxt][0]) <= start:
            nxt += 1
        # A snippet that opens mid-word ("zip {{[-c|..." for "gzip") reads as
        # garbage and costs a recount (BPE adds a word-start piece): move the
        # start to the first word start still inside the overlap, if there is one.
        # Only tokens up to c qualify, so every token stays covered.
        # A start after whitespace beats one after punctuation ("--stdout" in "[-c|--stdout]").
        best, best_kind = nxt, 0
        for j in range(nxt, c + 1):
            kind = self._word_start(j)
            if kind == 2:
                return j
            if kind > best_kind:
                best, best_kind = j, kind
        return best

    def _word_start(self, j: int) -> int:
        """2 if token j's text opens a word after whitespace (or the document's start),
        1 if it opens one after other punctuation, else 0."""
        doc = self.doc
        p = self._content_start(self.spans[j][0])
        if p >= len(doc):
            return 0
        if p == 0 or doc[p - 1].isspace():
            return 2
        return 1 if doc[p].isalnum() and not doc[p - 1].isalnum() else 0

    def _cut(self, a: int) -> int:
        """The last token of the window that starts at token a."""
        b = a + self.max_tokens
        if b >= self.n:
            return self.n - 1
        lo = b - 1 - self.tail
        start = self._content_start(self.spans[a][0])
        best_kind, best = _NONE, -1
        doc, spans, ends = self.doc, self.spans, self._ends
        p = spans[lo][1]
        if p <= start:
            p = start
        else:
            while p > start and doc[p - 1].isspace():
                p -= 1
        if spans[b - 1][1] <= start:
            # Every candidate ends in the blank run before the text (kind none):
            # skip scanning a run that may be megabytes long, window after window.
            stop = p
        else:
            stop = self._content_start(spans[b - 1][1])
        for run in _BREAK_RUN.finditer(doc, p, stop):
            rs, re_ = run.span()
            j = (bisect_right(spans, re_, lo, b, key=_end) if ends is None else bisect_right(ends, re_, lo, b)) - 1
            if j < lo or spans[j][1] < rs:
                continue  # no candidate cut ends inside this run
            kind = _run_kind(doc, rs, re_)
            if kind >= best_kind:
                best_kind, best = kind, j
        if best_kind > _NONE:
            return best
        for j in range(b - 1, lo - 1, -1):
            if self._clean(j):
                return j
        return b - 1

    def _clean(self, j: int) -> bool:
        """Whether cutting after token j keeps every character sequence whole."""
        e = self.spans[j][1]
        if e > self.spans[j + 1][0]:
            return False  # tokens j and j+1 share a character (byte-fallback pieces)
        doc = self.doc
        if e > 0 and doc[e - 1] == _ZWJ:
            return False
        return e >= len(doc) or not (doc[e] == _ZWJ or unicodedata.category(doc[e])[0] == "M")

    def _content_start(self, s: int) -> int:
        if self._ns_from <= s <= self._ns_at:
            return self._ns_at
        m = _NON_SPACE.search(self.doc, s)
        self._ns_from, self._ns_at = s, m.start() if m else len(self.doc)
        return self._ns_at

    def _content_end(self, e: int, start: int) -> int:
        doc = self.doc
        while e > start and doc[e - 1].isspace():
            e -= 1
        return e


def _end(span: tuple[int, int]) -> int:
    return span[1]


def _run_kind(doc: str, rs: int, re_: int) -> int:
    breaks = doc.count("\n", rs, re_) + doc.count("\r", rs, re_) - doc.count("\r\n", rs, re_)
    if breaks >= 2:
        return _PARAGRAPH
    return _LINE if breaks == 1 else _SENTENCE
