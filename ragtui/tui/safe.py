"""The TUI's last line of defence against text that would drive the terminal.

Widgets neutralise what they show (``core.textsafe``: a visible stand-in for
each escape, control, bidi or tag character) and render names as plain
``rich.text.Text``, never as markup. ``SafeText`` is the backstop behind
them: the app adds it to every widget's line filters, so a string that
reached a widget raw still cannot reach the terminal. It runs after layout,
so it removes what it finds rather than showing a stand-in: each character
it removes occupies no cell, and the line keeps the width it was laid out at.
"""

from __future__ import annotations

import re

from rich.segment import Segment
from textual.filter import LineFilter

from ragtui.core.textsafe import UNSAFE_CHARS, strip_unsafe

__all__ = ["SAFE_TEXT", "SafeText"]

_ANY_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")


class SafeText(LineFilter):
    """A line filter that removes terminal-unsafe characters from every text segment."""

    def apply(self, segments: list[Segment], background) -> list[Segment]:
        if not _ANY_UNSAFE.search("".join([s.text for s in segments if not s.control])):
            return segments  # the usual case: one search over the line
        out = []
        for s in segments:
            if s.control or not _ANY_UNSAFE.search(s.text):
                out.append(s)
            elif text := strip_unsafe(s.text):
                out.append(Segment(text, s.style))
        return out


SAFE_TEXT = SafeText()
"""The one instance the app adds to its line filters."""
