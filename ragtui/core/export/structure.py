"""What a Seekite export shows of each chunk: its document's title, the heading path above it, a URL.

Everything here is derived from the index alone (docs.jsonl), never from the
source files, so the same index always gives the same export. A document's
chunks are exact substrings of its text, in order, with strictly increasing
starts and ends (spec/chunker.md); laid on their longest overlap they give
back the document's text except the whitespace between chunks that do not
overlap, which is counted as a paragraph break (two line breaks, the chunker's
preferred cut) (spec/seekite-export.md,
"Titles, headings and URLs").

Headings are recognised for Markdown (ATX ``#`` and setext underlines, not
inside fenced code), reStructuredText (a title line with a punctuation
underline, optionally an overline; levels in order of first appearance of
each style) and AsciiDoc (``=`` to ``======``). Other files have no headings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from ragtui.core.documents import PAGE_BREAK, by_extension

__all__ = ["ChunkPlace", "HEADING_SEPARATOR", "chunk_url", "document_places", "heading_kind", "overlap_length"]

HEADING_SEPARATOR = " > "
"""Joins the heading path of a chunk (outermost first)."""

_MARKDOWN = (".md", ".markdown", ".mdown", ".mkd", ".mdx")
_RST = (".rst", ".rest", ".rst.txt")
_ASCIIDOC = (".adoc", ".asciidoc", ".asc")

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_ADOC = re.compile(r"^(={1,6})[ \t]+(\S.*?)[ \t]*$")
_RST_ADORN = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
_MAX_TITLE_CHARS = 200
_RELEVANT = {"markdown": re.compile(r" {0,3}(?:#|`{3}|~{3}|=+[ \t]*$|-+[ \t]*$)"),
             "rst": re.compile(r"([!-/:-@\[-`{-~])\1{2,}[ \t]*$"), "asciidoc": re.compile("=")}
"""The lines that can be a heading, underline one or open or close a fence (every other line only
matters as the line above the next)."""


@dataclass(frozen=True)
class ChunkPlace:
    """Where one chunk sits in its document."""

    line: int
    """The 1-based line of the document on which the chunk starts."""
    headings: tuple[str, ...]
    """The heading path in force at the chunk's start, outermost first (a heading on the chunk's first
    line counts)."""
    page: int | None = None
    """For a paged document (a PDF, by its name): the 1-based page the chunk starts on, one more than the
    page breaks (form feeds) before it."""


def heading_kind(doc_id: str) -> str | None:
    """"markdown", "rst", "asciidoc" by the file's extension (any case), else None."""
    lower = doc_id.lower()
    for kind, exts in (("markdown", _MARKDOWN), ("rst", _RST), ("asciidoc", _ASCIIDOC)):
        if lower.endswith(exts):
            return kind
    return None


def overlap_length(previous: str, text: str) -> int:
    """The longest k < len(text), k < len(previous), with previous ending in text[:k] (0 when none).

    Consecutive chunks of a document share ``doc[start_next:end_previous]``; the
    longest such overlap is that text unless the text repeats itself there.
    """
    limit = min(len(previous), len(text) - 1)
    if limit <= 0:
        return 0
    probe_len = min(16, limit)
    probe = text[:probe_len]
    lo = len(previous) - limit
    # Long overlaps first: every occurrence of the probe that leaves room for it, leftmost first.
    p = previous.find(probe, lo)
    while p != -1:
        k = len(previous) - p
        if k < probe_len:
            break
        if previous.startswith(text[:k], p):
            return k
        p = previous.find(probe, p + 1)
    for k in range(min(probe_len, limit), 0, -1):  # overlaps shorter than the probe
        if previous.endswith(text[:k]):
            return k
    return 0


def _clean(title: str) -> str:
    title = " ".join(title.split())
    return title[:_MAX_TITLE_CHARS]


class _Headings:
    """The heading path while reading a document line by line."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.path: list[tuple[int, str]] = []
        self.first: str | None = None
        self.in_fence: str | None = None
        self.previous = ""
        self.rst_styles: list[str] = []
        self.overline: str | None = None

    def _set(self, level: int, title: str) -> None:
        title = _clean(title)
        if not title:
            return
        if self.first is None:
            self.first = title
        self.path = [(lv, t) for lv, t in self.path if lv < level] + [(level, title)]

    def line(self, text: str) -> None:
        """Take one line (without its line break); a heading it completes changes the path."""
        if self.kind == "markdown":
            self._markdown(text)
        elif self.kind == "asciidoc":
            m = _ADOC.match(text)
            if m:
                self._set(len(m.group(1)), m.group(2))
        else:
            self._rst(text)
        self.previous = text

    def _markdown(self, text: str) -> None:
        fence = _FENCE.match(text)
        if self.in_fence is not None:
            if fence and fence.group(1)[0] == self.in_fence[0] and len(fence.group(1)) >= len(self.in_fence):
                self.in_fence = None
            return
        if fence:
            self.in_fence = fence.group(1)
            return
        m = _ATX.match(text)
        if m:
            self._set(len(m.group(1)), m.group(2) or "")
            return
        s = _SETEXT.match(text)
        prev = self.previous
        if s and prev.strip() and not _ATX.match(prev) and not prev.startswith(("    ", "\t")):
            self._set(1 if s.group(1)[0] == "=" else 2, prev)

    def _rst(self, text: str) -> None:
        adorn = _RST_ADORN.match(text)
        prev = self.previous
        if adorn and prev.strip() and not _RST_ADORN.match(prev) and len(text.rstrip()) >= len(prev.rstrip()):
            style = ("over" if self.overline == text.rstrip() else "") + text[0]
            if style not in self.rst_styles:
                self.rst_styles.append(style)
            self._set(self.rst_styles.index(style) + 1, prev)
            self.overline = None
            return
        self.overline = text.rstrip() if adorn else (self.overline if text.strip() and self.overline else None)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def document_places(doc_id: str, texts: Sequence[str]) -> tuple[str, list[ChunkPlace]]:
    """(title, one ``ChunkPlace`` per chunk) of a document given its chunks' texts in order.

    The title is the document's first heading, else its file name. A chunk's
    headings are the path in force after the line its first character is on
    (a setext or reStructuredText title counts on its title line).
    """
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    previous = ""
    for text in texts:
        k = overlap_length(previous, text) if previous else 0
        if previous and k == 0:
            parts.append("\n\n")  # the whitespace between chunks that do not overlap: a paragraph break
            length += 2
        starts.append(length - k)
        parts.append(text[k:])
        length += len(text) - k
        previous = text
    doc = "".join(parts)
    plain = "\r" not in doc  # only \n line breaks: str.split and str.count, in C
    lines = doc.split("\n") if plain else _LINE_BREAK.split(doc)
    kind = heading_kind(doc_id)
    after: list[tuple[str, ...]] = []
    first: str | None = None
    if kind is not None:
        heads = _Headings(kind)
        relevant = _RELEVANT[kind]
        for text in lines:
            # Most lines cannot start or end a heading: only the line before the next one matters for them.
            if heads.overline is None and not relevant.match(text):
                heads.previous = text
                after.append(after[-1] if after else ())
                continue
            before = heads.path
            heads.line(text)
            now = tuple(t for _, t in heads.path)
            if heads.path is not before and after and kind != "asciidoc" and _underline(kind, text):
                after[-1] = now  # an underline makes the line above it the heading
            after.append(now)
        first = heads.first
    places = []
    line, at = 1, 0
    paged_kind = by_extension(doc_id)
    page = 1 if paged_kind is not None and paged_kind.paged else None
    for s in starts:
        if page is not None:
            page += doc.count(PAGE_BREAK, at, s)
        line += doc.count("\n", at, s) if plain else len(_LINE_BREAK.findall(doc, at, s))
        at = s
        places.append(ChunkPlace(line, after[line - 1] if after else (), page))
    title = first or _clean(doc_id.rsplit("/", 1)[-1])
    return title, places


def _underline(kind: str, line: str) -> bool:
    if kind == "markdown":
        return bool(_SETEXT.match(line)) and not _ATX.match(line)
    return bool(_RST_ADORN.match(line))


def chunk_url(doc_id: str, line: int, page: int | None = None) -> str:
    """The chunk's URL: its document's path, each segment percent-encoded, with a ``#L<line>`` anchor, or
    for a paged document ``#page=<page>`` (the PDF open parameter browsers' PDF viewers follow)."""
    return f"{quote(doc_id, safe='/')}#page={page}" if page else f"{quote(doc_id, safe='/')}#L{line}"
