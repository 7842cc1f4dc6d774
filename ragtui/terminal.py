"""What the CLI writes to a terminal: nothing from outside may drive it.

``ragtui.cli.main`` runs every command inside ``safe_stdio()``: ``sys.stdout``
and ``sys.stderr`` are replaced by ``SafeStream``s that pass every write
through ``textsafe.neutralize``. A name, a ``meta.json`` field, a server's
answer or an error message that quotes a path is therefore shown, never
obeyed, whether or not the code that printed it remembered to neutralise
it. JSON output (``textsafe.json_text``) holds nothing the filter changes.

Styled output (rich: colour, tables, progress bars, OSC 8 links) needs its
own escape sequences to reach the terminal, so it goes through ``console()``:
a rich ``Console`` that writes to the stream underneath the filter, with
markup off and every text segment neutralised just before rich turns
segments into escape sequences (its own control segments pass untouched).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import cache

from ragtui.core.textsafe import neutralize

__all__ = ["SafeStream", "console", "safe_stdio", "unfiltered"]


class SafeStream:
    """A text stream that neutralises what is written to it; everything else is the wrapped stream's."""

    def __init__(self, stream) -> None:
        self.unfiltered = stream
        """The stream underneath (for writers that produce their own escape sequences)."""

    def write(self, text: str) -> int:
        self.unfiltered.write(neutralize(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.unfiltered, name)


def unfiltered(stream):
    """The stream underneath ``stream`` when it is a ``SafeStream``, else ``stream``."""
    while isinstance(stream, SafeStream):
        stream = stream.unfiltered
    return stream


@contextmanager
def safe_stdio():
    """Replace ``sys.stdout`` and ``sys.stderr`` by ``SafeStream``s for the duration."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


@cache
def _console_class():
    # Built on first use: rich is not imported by commands that print plain lines.
    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        """A rich ``Console`` whose text can style but never control the terminal.

        Each text segment is neutralised just before rich renders segments
        into escape sequences; rich's own control segments (the cursor moves
        of a progress bar) pass unchanged.
        """

        def _render_buffer(self, buffer) -> str:
            safe = (s if s.control or not s.text else Segment(neutralize(s.text), s.style) for s in buffer)
            return super()._render_buffer(safe)

    return SafeConsole


def console(*, stderr: bool = False, **options):
    """A rich ``Console`` on stdout (or stderr, or ``file=``) beneath any ``SafeStream``.

    Markup and emoji codes are off unless ``options`` turn them on (a ``[``
    in a file name is a ``[``); ``highlight`` is off; other ``options`` go to rich.
    """
    options.setdefault("markup", False)
    options.setdefault("emoji", False)
    options.setdefault("highlight", False)
    stream = options.pop("file", None) or (sys.stderr if stderr else sys.stdout)
    return _console_class()(file=unfiltered(stream), **options)
