"""Reading one document from disk: bytes without blocking or leaving the folder (``core.files.read_file``), then text.

The walk, the ignore-file reader (``patterns``) and citation checks all read
files the same way, so this sits below all of them.
"""

from __future__ import annotations

from ragtui.core.files import read_file

__all__ = ["decode_document", "read_file"]


def decode_document(data: bytes) -> tuple[str | None, str | None]:
    """(text, None) for a UTF-8 document, or (None, reason) for one that is not text.

    A UTF-8 byte order mark is dropped; line endings are kept as they are.
    """
    if b"\0" in data[:8192]:
        return None, "binary (NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte {e.start})"
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\0" in text:
        return None, "binary (NUL bytes)"
    return text, None


