"""What a reader gives back, what it may refuse with, and the bounds it works within (spec/documents.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HEAD_BYTES", "PAGE_BREAK", "Block", "Document", "Heading", "Limits", "Unreadable", "join_blocks", "page_of"]

HEAD_BYTES = 4096
"""How much of a file decides its kind (with its name)."""

PAGE_BREAK = "\f"
"""Joins the pages of a paged document's text (as pdftotext does): the page of an offset is one more
than the page breaks before it."""


class Unreadable(Exception):  # noqa: N818 (a reason, not a failure of ragtui)
    """A file that is not a document ragtui can read; ``str()`` is the reason the report gives."""


@dataclass(frozen=True)
class Heading:
    """A heading of a document: where it starts in the document's text, its level (1 outermost), its title."""

    offset: int
    level: int
    title: str


@dataclass(frozen=True)
class Document:
    """A file's text as the index knows it, and the structure a reader found in it.

    ``text`` is what every chunk's ``text`` is an exact substring of. For a paged kind, its pages are
    joined by ``PAGE_BREAK`` and no page holds one. ``headings`` are in order of ``offset``.
    """

    text: str
    kind: str
    title: str | None = None
    headings: tuple[Heading, ...] = ()
    paged: bool = False

    @property
    def pages(self) -> int:
        return self.text.count(PAGE_BREAK) + 1 if self.paged else 1


@dataclass(frozen=True)
class Limits:
    """The bounds of reading one file; past any of them the file is skipped with the reason."""

    max_pages: int = 5000
    """Pages of a paged document."""
    max_chars: int = 1 << 26
    """Characters of a document's text (64 Mi)."""
    max_inflated: int = 1 << 28
    """Bytes inflated from one archive (a .docx, .epub, .odt is a zip): 256 MiB."""
    max_ratio: int = 200
    """Inflated bytes per compressed byte of one archive member."""
    max_depth: int = 512
    """Nesting of elements in a markup document."""
    seconds: float = 60.0
    """Wall time of one file in the extraction worker."""
    memory: int = 1 << 30
    """Address space of an extraction worker (bytes)."""


def page_of(text: str, offset: int) -> int:
    """The 1-based page of ``text`` that holds ``offset`` (page breaks before it, plus one)."""
    return text.count(PAGE_BREAK, 0, offset) + 1


@dataclass(frozen=True)
class Block:
    """One block of a document built from blocks (a paragraph, a heading, a table row)."""

    text: str
    level: int = 0
    """1-6 for a heading, 0 for anything else."""
    tight: bool = False
    """Set on a table row after the first: it follows the row before on the next line, not after a blank one."""


def join_blocks(blocks: list[Block], kind: str, title: str | None, limits: Limits) -> Document:
    """The document whose text is the blocks, each on its own line and set apart by a blank line
    (table rows by a line break); headings where the heading blocks start."""
    parts: list[str] = []
    headings: list[Heading] = []
    at = 0
    for b in blocks:
        text = b.text.strip()
        if not text:
            continue
        if parts:
            sep = "\n" if b.tight else "\n\n"
            parts.append(sep)
            at += len(sep)
        if b.level:
            headings.append(Heading(at, b.level, " ".join(text.split())[:200]))
        parts.append(text)
        at += len(text)
        if at > limits.max_chars:
            raise Unreadable(f"more than {limits.max_chars:,} characters of text")
    if not parts:
        raise Unreadable("no text")
    if title is None:
        first = next((h for h in headings if h.level == 1), None)
        title = first.title if first is not None else None
    return Document("".join(parts) + "\n", kind, title, tuple(headings))
