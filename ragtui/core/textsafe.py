"""Neutralise control characters so document text cannot drive a terminal.

Document text is shown by ``search``, ``inspect`` and the TUI. Escape
sequences (ESC, CSI, OSC), other C0/C1 controls and bidi overrides in it
would let a document move the cursor, retitle the window or hide text, so
they are replaced by visible stand-ins. Newlines and tabs are kept.
"""

from __future__ import annotations

import re

__all__ = ["json_text", "neutralize", "one_line"]

# C0 controls but tab and newline, DEL, C1 controls, and the bidi
# embedding/override/isolate characters.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match) -> str:
    ch = match.group()
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ for ESC, ␍ for CR
    if code == 0x7F:
        return "\u2421"
    return f"\\u{code:04x}"


def neutralize(text: str) -> str:
    """``text`` with every unsafe control character replaced by a visible stand-in.

    A CRLF line ending is shown as a plain newline; a lone CR becomes "␍".
    """
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def one_line(text: str, width: int) -> str:
    """A neutralised single-line snippet of at most ``width`` characters."""
    flat = " ".join(neutralize(text).split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


# What JSON leaves raw with ensure_ascii=False but a terminal would obey: DEL,
# the C1 controls (\x9b alone is a CSI) and the bidi controls. JSON itself
# escapes C0 controls.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def json_text(obj, **kwargs) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)`` with terminal-unsafe characters as ``\\u`` escapes.

    The output decodes to the same value; it only cannot drive a terminal.
    """
    import json

    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
