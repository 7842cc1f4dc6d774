"""Documents that try to drive the terminal: escape sequences and control characters in text and names.

``HOSTILE`` maps a file name to its text; each text holds one marker word
(the name's stem) to search for. ``unsafe(text)`` lists the characters a
terminal would act on — C0 controls but newline, DEL, C1 controls (``\\x9b``
is CSI on its own), and the bidi embedding, override and isolate marks —
which is exactly what ``ragtui.core.textsafe.neutralize`` replaces.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from tests.reliability.cases import Case
from tests.reliability.helpers import write

HOSTILE = {
    "clearscreen.md": "clearscreen \x1b[2J\x1b[H erase everything",
    "retitle.md": "retitle \x1b]0;PWNED-TITLE\x07 the window",
    "conceal.md": "conceal \x1b[8mHIDDEN-TEXT\x1b[0m from view",
    "cursorup.md": "cursorup \x1b[1A\x1b[2K overwrite the line above",
    "carriage.md": "carriage visible-part\rOVERWRITTEN",
    "eightbit.md": "eightbit \x9b2J csi in one byte",
    "reversal.md": "reversal \u202eTXET DESREVER\u202c and isolate \u2067x\u2069",
    "hyperlink.md": "hyperlink \x1b]8;;http://evil.example\x07click\x1b]8;;\x07 here",
    "backspace.md": "backspace abc\x08\x08\x08XYZ",
    "devicectl.md": "devicectl \x1bP+q544e\x1b\\ query",
    "ringbell.md": "ringbell \x07\x07\x07 loudly",
    "charset.md": "charset \x1b(0lqqk\x1b(B line drawing",
    "fullreset.md": "fullreset \x1bc terminal",
    "deletechar.md": "deletechar abc\x7f\x7f",
    "escname\x1b[31m\x1b]0;T\x07.md": "escname the file name itself is hostile",
}

_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def unsafe(text: str) -> list[str]:
    """The characters in ``text`` a terminal would act on (tab included: one_line output has none)."""
    return sorted({repr(c) for c in _UNSAFE.findall(text)})


def build(folder: Path) -> Path:
    for name, text in HOSTILE.items():
        write(folder / name, text + "\n")
    return folder


def markers() -> list[str]:
    return [name.split(".")[0].split("\x1b")[0] for name in HOSTILE]


def _hostile_index() -> tuple[Path, Path, str]:
    """(folder, artifacts, what ingest wrote on stderr): the hostile documents, ingested once."""
    from tests.helpers.cli import run
    from tests.reliability.cases import once

    def make(base: Path):
        folder, art = build(base / "docs"), base / "art"
        r = run("ingest", str(folder), "--artifacts", str(art))
        assert r.code == 0, r.err
        return folder, art, r.err

    return once("terminal-index", make)


def terminal_cases(size: str = "ci") -> list[Case]:
    """``ingest``'s own lines, then each hostile document through ``search`` (text) and ``inspect``."""
    return [Case("ingest", _ingest_lines)] + [Case(word, functools.partial(_search_and_inspect, word))
                                              for word in markers()]


def _ingest_lines(_tmp: Path) -> None:
    err = _hostile_index()[2]
    assert unsafe(err) == [], f"ingest: {err!r}"


def _search_and_inspect(word: str, _tmp: Path) -> None:
    import json

    from tests.helpers.cli import run

    folder, art, _ = _hostile_index()
    r = run("search", word, "--artifacts", str(art), "-k", "1")
    assert r.code == 0 and unsafe(r.out) == [] and unsafe(r.err) == [], (r.out, r.err)
    hit = json.loads(run("search", word, "--artifacts", str(art), "-k", "1", "--json").out)[0]
    r = run("inspect", hit["chunk_id"], "--artifacts", str(art), "--root", str(folder.parent))
    assert r.code == 0 and unsafe(r.out.replace("\t", " ")) == [] and unsafe(r.err) == [], r.out
