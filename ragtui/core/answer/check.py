"""The citation check: every label an answer cites, classified against the context it was given.

Verdicts (spec/answer.md):

``verified``        the label names a snippet of the context (or lines inside one), and every chunk of that
                    snippet is still where it was when packed: its source is fresh (core.citations) and its
                    lines are the ones the label gave;
``stale``           in the context, but the source changed since indexing (or since packing: the chunk moved,
                    changed or is gone), or it could not be read, so the label may no longer hold;
``not-in-context``  not in the context, but it names real chunks of the index (a document's lines that hold
                    chunks, or a chunk_id): the model cited something it was not shown;
``unresolvable``    names nothing in the index: a made-up path, lines past the end, a malformed label.

Sources are read again for the check (a new ``Resolver``), inside the ingested folder only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ragtui.core.answer.pack import Pack, Snippet
from ragtui.core.citations import FRESH, Label, Resolver, parse_labels
from ragtui.core.errors import RagtuiError
from ragtui.core.index.index_format import IndexView

__all__ = ["NOT_IN_CONTEXT", "STALE", "UNRESOLVABLE", "VERDICTS", "VERIFIED", "CitationCheck", "check_answer"]

VERIFIED, STALE, NOT_IN_CONTEXT, UNRESOLVABLE = "verified", "stale", "not-in-context", "unresolvable"
VERDICTS = (VERIFIED, STALE, NOT_IN_CONTEXT, UNRESOLVABLE)


@dataclass(frozen=True)
class CitationCheck:
    """One distinct citation of an answer and its verdict."""

    label: str
    """As the answer wrote it, inside the brackets."""
    verdict: str
    """One of ``VERDICTS``."""
    source: int | None
    """The number of the context snippet it names (1-based, as in the prompt), when in the context."""
    chunk_ids: tuple[str, ...]
    """The chunks it names (those of its snippet, or the index's chunks on its lines)."""
    reason: str

    @property
    def ok(self) -> bool:
        return self.verdict == VERIFIED

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "verdict": self.verdict, "source": self.source,
                "chunk_ids": list(self.chunk_ids), "reason": self.reason}


def _in_context(label: Label, pack: Pack) -> tuple[int, Snippet] | None:
    for i, s in enumerate(pack.snippets, 1):
        if s.doc_id != label.doc_id:
            continue
        if label.chunk_id is not None:
            if label.chunk_id in s.chunk_ids:
                return i, s
        elif (s.start_line is not None and s.end_line is not None and label.start_line is not None
              and label.end_line is not None and s.start_line <= label.start_line <= label.end_line <= s.end_line):
            return i, s
    return None


def _freshness(snippet: Snippet, resolver: Resolver) -> str:
    """'' when every chunk of ``snippet`` is where it was packed; else why not."""
    if snippet.status != FRESH:
        return f"the source was {snippet.status} when packed"
    try:
        now = [resolver.resolve(c) for c in snippet.chunk_ids]
    except RagtuiError as e:
        return f"the source cannot be checked: {e}"
    bad = [c for c in now if c.status != FRESH]
    if bad:
        return f"{bad[0].chunk_id} is {bad[0].status} now (the source changed since indexing)"
    lines = (now[0].start_line, max(now[-1].end_line or 0, now[0].end_line or 0))
    if lines != (snippet.start_line, snippet.end_line):
        return f"the text is now on lines {lines[0]}-{lines[1]} (the source changed since packing)"
    return ""


def _classify(label: Label, pack: Pack, resolver: Resolver) -> CitationCheck:
    if label.page is not None and label.start_line is not None and label.end_line is not None:
        # A page citation names lines of pages: the same lines of the document's text, as read now.
        a = resolver.document_line(label.doc_id, label.page, label.start_line)
        b = resolver.document_line(label.doc_id, label.page_end or label.page, label.end_line)
        if a is None or b is None:
            return CitationCheck(label.text, UNRESOLVABLE, None, (), f"{label.doc_id!r} has no such page and line "
                                 "(pages and their lines are numbered from 1)")
        label = replace(label, start_line=a, end_line=b)
    if label.start_line is not None and label.end_line is not None and not 1 <= label.start_line <= label.end_line:
        return CitationCheck(label.text, UNRESOLVABLE, None, (), "lines are numbered from 1, and a range ends "
                             "at or after its start")
    found = _in_context(label, pack)
    if found is not None:
        number, snippet = found
        why = _freshness(snippet, resolver)
        if why:
            return CitationCheck(label.text, STALE, number, snippet.chunk_ids, why)
        return CitationCheck(label.text, VERIFIED, number, snippet.chunk_ids, f"source {number}, fresh")
    try:
        if label.chunk_id is not None:
            resolver.row_of(label.chunk_id)
            chunks: tuple[str, ...] = (label.chunk_id,)
        else:
            assert label.start_line is not None and label.end_line is not None
            chunks = tuple(c.chunk_id for c in resolver.chunks_at(label.doc_id, label.start_line, label.end_line))
    except RagtuiError as e:
        return CitationCheck(label.text, UNRESOLVABLE, None, (), str(e))
    if not chunks:
        known = resolver.data.records.find(f"{label.doc_id}#0") >= 0
        why = "no chunk of the index lies on those lines" if known else f"the index holds no document {label.doc_id!r}"
        return CitationCheck(label.text, UNRESOLVABLE, None, (), why)
    return CitationCheck(label.text, NOT_IN_CONTEXT, None, chunks,
                         "it names chunks of the index that were not in the context the model was given")


def check_answer(answer: str, pack: Pack, data: IndexView, *, resolver: Resolver | None = None) -> list[CitationCheck]:
    """Each distinct citation of ``answer`` (in the order first cited) with its verdict against ``pack``.

    ``resolver`` (default: a new one over ``data``) reads the sources as they are now.
    """
    resolver = resolver or Resolver(data)
    seen: set[str] = set()
    out = []
    for label in parse_labels(answer):
        if label.text in seen:
            continue
        seen.add(label.text)
        out.append(_classify(label, pack, resolver))
    return out
