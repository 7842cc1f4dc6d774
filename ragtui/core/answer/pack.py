"""Context packing: ranked chunks -> snippets that fit a token budget, with their source lines.

``pack(query, hits, data, tokenizer, budget)`` is what ``ragtui pack``, the
``pack`` tool of ``ragtui mcp`` and ``ragtui ask`` build their context with.
spec/answer.md is the normative description; in short:

- **Tokens** are counted with the index's own tokenizer (the one that cut its
  chunks, ``meta.json`` ``tokenizer``): ``used`` is the sum of the snippets'
  counts plus one separator between consecutive snippets, and never exceeds
  ``budget``.
- **Greedy by utility**: candidates are taken in order of score per token
  (a score <= 0 counts worse the longer the chunk), ties by rank. A candidate
  whose cost does not fit is skipped and the next one tried.
- **Merging**: chunks of one document that are adjacent (chunk numbers k and
  k+1) or overlap become one snippet whose text is the source span from the
  first chunk's start to the last chunk's end and whose lines are the union
  range. A span is taken from the source only when every chunk of it is
  ``fresh`` there (core.citations); otherwise the chunks stay separate
  snippets with their indexed text, so no text is ever made up.
- **Order**: by source (doc_id), then by position inside the document.
- **Fingerprint**: SHA-256 over the ordered snippet identities (doc_id and
  the fingerprints of the chunks covered), the separator and the token
  counter's name; the same index and query give the same fingerprint.

Nothing is written anywhere; sources are read only through ``core.citations``
(inside the ingested folder).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragtui.core.citations import FRESH, Citation, Resolver
from ragtui.core.errors import ModelMismatchError, RagtuiError, UsageError
from ragtui.core.index.index_format import IndexView
from ragtui.core.search.retriever import Hit

if TYPE_CHECKING:  # a type only: the CLI's parser imports this module, and inspect must load no embedder
    from ragtui.core.embedders.base import Tokenizer

__all__ = ["DEFAULT_BUDGET", "MAX_BUDGET", "SEPARATOR", "Pack", "Snippet", "check_budget", "check_tokenizer", "pack"]

DEFAULT_BUDGET = 2000
"""Tokens, when no budget is given."""
MAX_BUDGET = 1_000_000
"""The largest budget accepted: more than any chat model reads, and it bounds the work of one pack."""
SEPARATOR = "\n\n"
"""Between two snippets of the packed context; counted once per gap."""


@dataclass(frozen=True)
class Snippet:
    """One contiguous piece of one document in the packed context."""

    doc_id: str
    """The document, relative to the folder that holds the ingested folder (``docs/a.md``)."""
    chunk_ids: tuple[str, ...]
    """Every chunk the snippet covers, in document order."""
    fingerprints: tuple[str, ...]
    """The chunks' fingerprints (SHA-256 of their indexed text), in the same order."""
    rows: tuple[int, ...]
    text: str
    tokens: int
    """``tokenizer.count(text)`` with the index's tokenizer."""
    start_line: int | None
    """1-based, inclusive, in the source as it is now; None when the source could not be located."""
    end_line: int | None
    status: str
    """The worst freshness of the chunks covered (core.citations: fresh, moved, changed, missing), or
    ``unread`` when sources cannot be read (no recorded folder)."""
    path: str | None
    """Absolute path of the source file, when known."""
    score: float
    """The best retrieval score of the chunks covered."""
    rank: int
    """The best retrieval rank of the chunks covered."""
    pages: tuple[int, int, int, int] | None = None
    """For a paged document: (page, line within it, page_end, line within that) of the snippet's first and
    last characters; None otherwise."""

    @property
    def label(self) -> str:
        """``path:Lstart-Lend``, for a paged document ``path p.12 L3-9`` (lines within the page;
        ``path p.12 L40-p.13 L2`` across a page break), or the chunk_id when the lines are unknown: what a
        citation names."""
        if self.start_line is None or self.end_line is None:
            return self.chunk_ids[0] if len(self.chunk_ids) == 1 else f"{self.chunk_ids[0]}..{self.chunk_ids[-1]}"
        if self.pages is not None:
            p, a, q, b = self.pages
            return f"{self.doc_id} p.{p} L{a}-{b}" if p == q else f"{self.doc_id} p.{p} L{a}-p.{q} L{b}"
        return f"{self.doc_id}:L{self.start_line}-{self.end_line}"

    @property
    def lines(self) -> str | None:
        """``L45-89``, or None when unknown."""
        return None if self.start_line is None else f"L{self.start_line}-{self.end_line}"

    def to_json(self, mode: str) -> dict[str, object]:
        out: dict[str, object] = {
            "path": self.doc_id,
            "source": self.path,
            "lines": self.lines,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "label": self.label,
            "chunk_ids": list(self.chunk_ids),
            "fingerprints": list(self.fingerprints),
            "status": self.status,
            "tokens": self.tokens,
            "why": {"mode": mode, "score": self.score, "rank": self.rank},
            "text": self.text,
        }
        if self.pages is not None:
            out["page"], out["page_end"] = self.pages[0], self.pages[2]
        return out


@dataclass(frozen=True)
class Pack:
    """A packed context: the snippets in order, what they cost, and its fingerprint."""

    query: str
    mode: str
    budget: int
    used: int
    snippets: tuple[Snippet, ...]
    tokenizer: str
    separator: str
    fingerprint: str
    candidates: int
    """How many ranked chunks were considered."""
    skipped: int
    """Candidates left out because they did not fit."""
    seconds: float
    notes: tuple[str, ...] = field(default=())
    """Warnings to show (sources that could not be read)."""

    def to_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "mode": self.mode,
            "budget": self.budget,
            "used_tokens": self.used,
            "tokenizer": self.tokenizer,
            "separator": self.separator,
            "fingerprint": self.fingerprint,
            "candidates": self.candidates,
            "skipped": self.skipped,
            "seconds": self.seconds,
            "notes": list(self.notes),
            "snippets": [s.to_json(self.mode) for s in self.snippets],
        }

    def markdown(self) -> str:
        """The paste-ready form: a ``[path:Lstart-Lend]`` header above each snippet's text."""
        head = f"<!-- ragtui pack: {self.used}/{self.budget} tokens, {len(self.snippets)} snippet(s), " \
               f"fingerprint {self.fingerprint[:16]} -->"
        parts = [head] + [f"[{s.label}]\n{s.text}" for s in self.snippets]
        return self.separator.join(parts) + "\n"


def check_budget(budget: object) -> int:
    """``budget`` as a whole number of tokens in 1..MAX_BUDGET (``UsageError`` otherwise)."""
    if type(budget) is not int or not 1 <= budget <= MAX_BUDGET:
        raise UsageError(f"the budget must be a whole number of tokens from 1 to {MAX_BUDGET:,} (got {budget!r})")
    return budget


def check_tokenizer(tokenizer: Tokenizer, data: IndexView) -> None:
    """Refuse to count with another tokenizer than the one that cut the index's chunks."""
    if tokenizer.name != data.meta.tokenizer:
        raise ModelMismatchError(
            f"index {data.meta.index_id!r} was cut with the tokenizer {data.meta.tokenizer!r}, but the configured "
            f"embedder counts with {tokenizer.name!r}: configure the embedder the index was built with"
        )


def _utility(hit: Hit, tokens: int) -> float:
    # Score per token; a score <= 0 (cosine can be negative) gets worse, not better, with length.
    return hit.score / tokens if hit.score > 0 else hit.score * tokens


@dataclass
class _Located:
    citation: Citation | None
    status: str


class _Packer:
    def __init__(self, data: IndexView, tokenizer: Tokenizer, resolver: Resolver | None) -> None:
        self.data, self.tokenizer, self.resolver = data, tokenizer, resolver
        self.located: dict[int, _Located] = {}
        self.count_cache: dict[tuple[str, int, int], int] = {}
        self.notes: list[str] = []

    def locate(self, row: int) -> _Located:
        found = self.located.get(row)
        if found is None:
            if self.resolver is None:
                found = _Located(None, "unread")
            else:
                try:
                    citation = self.resolver.resolve(self.data.records[row].chunk_id)
                    found = _Located(citation, citation.status)
                except RagtuiError as e:  # no recorded folder, an unreadable source: pack the indexed text
                    note = str(e)
                    if note not in self.notes:
                        self.notes.append(note)
                    found = _Located(None, "unread")
            self.located[row] = found
        return found

    def pieces(self, doc_id: str, first_row: int, run: list[int]) -> list[tuple[list[int], str]]:
        """The snippets a run of consecutive chunk numbers becomes: (ks, text) each."""
        if all(self.locate(first_row + k).status == FRESH for k in run) and self.resolver is not None:
            first = self.locate(first_row + run[0]).citation
            last = self.locate(first_row + run[-1]).citation
            assert first is not None and last is not None
            source = self.resolver.source_text(first)
            if source is not None and first.start_char is not None and last.end_char is not None:
                return [(run, source[first.start_char:last.end_char])]
        return [([k], self.data.records[first_row + k].text) for k in run]

    def count(self, doc_id: str, first_row: int, ks: list[int], text: str) -> int:
        if len(ks) == 1:  # one chunk's text: the chunker recorded count(text) as its n_tokens (spec/chunker.md)
            return self.data.records[first_row + ks[0]].n_tokens
        key = (doc_id, ks[0], ks[-1])
        n = self.count_cache.get(key)
        if n is None:
            n = self.count_cache[key] = self.tokenizer.count(text)
        return n

    def cost(self, doc_id: str, first_row: int, runs: list[list[int]]) -> tuple[int, int]:
        """(tokens, snippets) of a document's runs; only a run of several chunks reads the source."""
        tokens = snippets = 0
        for run in runs:
            if len(run) == 1:
                tokens += self.data.records[first_row + run[0]].n_tokens
                snippets += 1
                continue
            for ks, text in self.pieces(doc_id, first_row, run):
                tokens += self.count(doc_id, first_row, ks, text)
                snippets += 1
        return tokens, snippets


def _add(runs: list[list[int]], k: int) -> list[list[int]]:
    """``runs`` (sorted, disjoint, non-adjacent) with chunk ``k`` added, merging what it touches."""
    lo, hi, keep = k, k, []
    for run in runs:
        if run[-1] < k - 1 or run[0] > k + 1:
            keep.append(run)
        else:
            lo, hi = min(lo, run[0]), max(hi, run[-1])
    keep.append(list(range(lo, hi + 1)))
    return sorted(keep)


def pack(
    query: str,
    hits: Sequence[Hit],
    data: IndexView,
    tokenizer: Tokenizer,
    budget: int,
    *,
    mode: str,
    resolver: Resolver | None = None,
    separator: str = SEPARATOR,
) -> Pack:
    """Pack ``hits`` (ranked chunks of ``data``) into at most ``budget`` tokens; see the module docstring.

    ``resolver`` reads the sources (for lines, freshness and merged spans); None packs the indexed
    texts with no lines. Raises ``UsageError`` for a bad budget, ``ModelMismatchError`` for a
    tokenizer that is not the index's.
    """
    started = time.perf_counter()
    check_budget(budget)
    check_tokenizer(tokenizer, data)
    packer = _Packer(data, tokenizer, resolver)
    sep_tokens = tokenizer.count(separator)
    records = data.records
    best: dict[int, Hit] = {}
    for hit in hits:
        if hit.row not in best or hit.rank < best[hit.row].rank:
            best[hit.row] = hit
    order = sorted(best.values(), key=lambda h: (-_utility(h, max(1, records[h.row].n_tokens)), h.rank, h.row))
    docs: dict[str, tuple[int, list[list[int]]]] = {}  # doc_id -> (first row, runs)
    doc_cost: dict[str, tuple[int, int]] = {}
    used = n_snippets = skipped = 0
    for hit in order:
        record = records[hit.row]
        k = record.k
        first_row, runs = docs.get(record.doc_id, (hit.row - k, []))
        if any(run[0] <= k <= run[-1] for run in runs):
            continue  # already inside a snippet (a merge took it in)
        new_runs = _add(runs, k)
        old_tokens, old_snippets = doc_cost.get(record.doc_id, (0, 0))
        tokens, snippets = packer.cost(record.doc_id, first_row, new_runs)
        total_snippets = n_snippets - old_snippets + snippets
        total = used - old_tokens + tokens
        if total + max(0, total_snippets - 1) * sep_tokens > budget:
            skipped += 1
            continue
        docs[record.doc_id] = (first_row, new_runs)
        doc_cost[record.doc_id] = (tokens, snippets)
        used, n_snippets = total, total_snippets
    snippets_out: list[Snippet] = []
    for doc_id in sorted(docs):
        first_row, runs = docs[doc_id]
        for run in runs:
            for ks, text in packer.pieces(doc_id, first_row, run):
                snippets_out.append(_snippet(packer, doc_id, first_row, ks, text, best))
    used_total = sum(s.tokens for s in snippets_out) + max(0, len(snippets_out) - 1) * sep_tokens
    return Pack(
        query=query,
        mode=mode,
        budget=budget,
        used=used_total,
        snippets=tuple(snippets_out),
        tokenizer=tokenizer.name,
        separator=separator,
        fingerprint=context_fingerprint(snippets_out, separator, tokenizer.name),
        candidates=len(best),
        skipped=skipped,
        seconds=time.perf_counter() - started,
        notes=tuple(packer.notes),
    )


_WORSE = {"fresh": 0, "moved": 1, "unread": 2, "changed": 3, "missing": 4}


def _snippet(packer: _Packer, doc_id: str, first_row: int, ks: list[int], text: str, best: dict[int, Hit]) -> Snippet:
    rows = tuple(first_row + k for k in ks)
    records = [packer.data.records[r] for r in rows]
    located = [packer.locate(r) for r in rows]
    status = max((loc.status for loc in located), key=lambda s: _WORSE.get(s, 5))
    first, last = located[0].citation, located[-1].citation
    start_line = end_line = None
    pages = None
    if first is not None and last is not None and first.start_line is not None and last.end_line is not None:
        start_line, end_line = first.start_line, max(last.end_line, first.end_line or 0)
        if first.page is not None and last.page_end is not None:
            tail = last if (last.end_line or 0) >= (first.end_line or 0) else first
            pages = (first.page, first.page_line or 1, tail.page_end or first.page, tail.page_end_line or 1)
    path = None if first is None or first.path is None else str(first.path)
    hits = [best[r] for r in rows if r in best]
    return Snippet(
        doc_id=doc_id,
        chunk_ids=tuple(r.chunk_id for r in records),
        fingerprints=tuple(r.fingerprint for r in records),
        rows=rows,
        text=text,
        tokens=packer.count(doc_id, first_row, ks, text),
        start_line=start_line,
        end_line=end_line,
        status=status,
        path=path,
        score=max(h.score for h in hits),
        rank=min(h.rank for h in hits),
        pages=pages,
    )


def context_fingerprint(snippets: Sequence[Snippet], separator: str, tokenizer: str) -> str:
    """SHA-256 (hex) over the ordered snippet identities, the separator and the token counter's name."""
    identity = {
        "snippets": [[s.doc_id, list(s.fingerprints)] for s in snippets],
        "separator": separator,
        "tokenizer": tokenizer,
    }
    return hashlib.sha256(json.dumps(identity, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()
