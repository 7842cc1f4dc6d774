"""Neutralise control characters so text from outside cannot drive a terminal.

Everything ragtui shows that it did not write itself — document text, file
and folder names, chunk_ids, ``meta.json`` fields, server answers, error
messages that quote any of those — passes through ``neutralize`` (or a
function built on it) before it reaches a terminal. The CLI and the TUI
also apply it where output leaves them (``ragtui.terminal``,
``ragtui.tui.safe``), so a call site that forgets cannot leak.

What counts as unsafe, and is replaced by a visible stand-in:

- C0 controls but tab and newline (ESC starts CSI/OSC/DCS sequences: cursor
  moves, screen clears, window titles, OSC 52 clipboard writes), DEL, and the
  C1 controls U+0080–U+009F (``\\x9b`` alone is a CSI on many terminals).
- Bidi controls: the embeddings, overrides and isolates (U+202A–U+202E,
  U+2066–U+2069), the marks LRM U+200E, RLM U+200F and ALM U+061C, and the
  deprecated format controls U+206A–U+206F. They reorder or restyle what is
  shown, so a name can read differently from what it is.
- The tag characters U+E0000–U+E007F: invisible, and able to carry a whole
  hidden ASCII message ("ASCII smuggling"). One well-formed use is kept: the
  subdivision flags (U+1F3F4, one to six tag letters or digits, U+E007F,
  e.g. the flag of Scotland), whose hidden part is at most a region code.

Deliberately kept: zero-width joiner U+200D and non-joiner U+200C (emoji
sequences such as 👩‍💻 and the orthography of Persian and Indic scripts need
them), zero-width space U+200B, word joiner U+2060 and BOM U+FEFF. None of
these reorders text or makes a terminal act; they can at most hide a word
boundary, and replacing them would turn ordinary text into noise. Tab and
newline are kept by ``neutralize`` (text keeps its shape); ``inline`` and
``one_line`` are for places that must stay on one line.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["UNSAFE_CHARS", "inline", "json_text", "neutralize", "one_line", "strip_unsafe"]

_C0 = "\x00-\x08\x0b-\x1f"  # C0 but tab and newline
_BEYOND_C0 = (
    "\x7f-\x9f"  # DEL, C1
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u206a-\u206f"  # bidi marks and controls, deprecated format controls
    "\U000e0000-\U000e007f"  # tag characters
)
UNSAFE_CHARS = _C0 + _BEYOND_C0
"""A regex character class body: every character ``neutralize`` replaces."""

# A subdivision flag: black flag, a short tag sequence of lowercase letters or digits, cancel tag.
_FLAG = "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f"
_UNSAFE = re.compile(f"({_FLAG})|[{UNSAFE_CHARS}]")
_UNSAFE_LINE = re.compile(f"({_FLAG})|[{UNSAFE_CHARS}\t\n]")


def _escape(code: int) -> str:
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _visible(match: re.Match[str]) -> str:
    if match.group(1):
        return match.group(1)
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ for ESC, ␍ for CR
    if code == 0x7F:
        return "\u2421"
    return _escape(code)


def neutralize(text: str) -> str:
    """``text`` with every unsafe character replaced by a visible stand-in.

    C0 controls become their Control Pictures (␛, ␇, ␍), DEL "␡", the rest
    ``\\uXXXX`` (``\\UXXXXXXXX`` beyond the BMP). Tab and newline are kept;
    a CRLF line ending is shown as a plain newline, a lone CR as "␍".
    """
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def inline(text: str) -> str:
    """``neutralize`` for one-line places (names, titles, the clipboard): newline and tab shown as ␊ and ␉.

    Nothing is dropped or merged, so the result maps back to one original.
    """
    return _UNSAFE_LINE.sub(_visible, text)


def one_line(text: str, width: int) -> str:
    """A neutralised single-line snippet of at most ``width`` characters (runs of whitespace become one space)."""
    flat = " ".join(neutralize(text).split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def strip_unsafe(text: str) -> str:
    """``text`` with every unsafe character removed (tab and newline kept).

    For last-line defences that see text after it was laid out: every
    character removed occupies no cell, so widths already measured stay right.
    """
    return _UNSAFE.sub(lambda m: m.group(1) or "", text)


# What JSON leaves raw with ensure_ascii=False but a terminal would obey: the
# unsafe characters above except C0 (JSON escapes those itself), and U+2028 and
# U+2029, which end a line in JavaScript.
_JSON_UNSAFE = re.compile(f"({_FLAG})|[{_BEYOND_C0}\u2028\u2029]")


def _json_escape(match: re.Match[str]) -> str:
    if match.group(1):
        return match.group(1)
    code = ord(match.group())
    if code > 0xFFFF:  # JSON has no \U: a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(obj: object, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)`` with terminal-unsafe characters as ``\\u`` escapes.

    The output decodes to the same value; it only cannot drive a terminal
    (and ``neutralize`` leaves it unchanged).
    """
    import json

    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    return _JSON_UNSAFE.sub(_json_escape, text)
