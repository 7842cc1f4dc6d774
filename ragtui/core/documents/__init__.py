"""The document readers: which kind a file is, and its text and structure (spec/documents.md)."""

from __future__ import annotations

from ragtui.core.documents.base import HEAD_BYTES, PAGE_BREAK, Document, Heading, Limits, Unreadable, page_of
from ragtui.core.documents.registry import KINDS, TEXT, Kind, by_extension, detect, kind_named, names_for

__all__ = [
    "HEAD_BYTES", "KINDS", "PAGE_BREAK", "TEXT", "Document", "Heading", "Kind", "Limits", "Unreadable", "by_extension",
    "detect", "kind_named", "names_for", "page_of",
]
