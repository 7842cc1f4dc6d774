"""Symbol paths of code chunks (``Retriever.search``), derived from the chunks alone (spec/chunker.md, "Code").

A chunk's *symbols* are, in order: the path of the innermost definition that
holds the chunk's first character (when it starts inside one), then the path of
every definition that begins inside the chunk. The first of them is the chunk's
symbol path. Paths join names with ``.``: a method ``search`` of class
``Retriever`` is ``Retriever.search``; Rust's ``impl Foo { fn bar }``, Go's
``func (f *Foo) bar`` and C++'s ``Foo::bar`` are ``Foo.bar``.

The index stores no symbols (its four files keep their shape), so a reader
derives them from what it has: a document's chunk texts in order.
``chunk_symbols(doc_id, texts)`` joins them into one text, one line break
between chunks, parses it with the file's grammar and reads the paths off
the tree. Code chunks tile their file, and whitespace between tokens changes
nothing in a brace language or the shell, so for those the tree is the
file's (a Go chunk that opens with ``{`` is joined with a space: Go ends a
statement at a line break, and gofmt keeps a body's ``{`` on its header's
line). Python's indentation is the exception: a chunk starts after the
whitespace that indented its first line, so the join puts back the
indentation the text implies (``_PythonJoin``): a block header's body is
indented deeper than the header, so the header stands at the deepest open
level below its body; another statement continues the innermost open block.
``document_symbols`` computes the same thing from the file itself;
tests and ``bench/bench_code_chunks.py`` measure how often the two agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ragtui.core.code.languages import code_language
from ragtui.core.code.syntax import MAX_CODE_CHARS, WRAPPERS, Parsed, definition, parse

__all__ = ["MAX_SYMBOLS", "chunk_symbols", "definitions", "document_symbols", "symbols_of_ranges"]

MAX_SYMBOLS = 64
"""A chunk keeps at most this many symbols (the enclosing one and the first definitions that begin in it)."""
_MAX_PATH = 32
_MAX_DEPTH = 400
_SKIPPED = WRAPPERS | {"expression_statement", "type_declaration"}
"""Nodes whose definition is the node inside them (recorded there, not twice)."""


def definitions(parsed: Parsed) -> list[tuple[int, int, str]]:
    """Every definition of the file in document order: (start, end, dotted path), in characters."""
    out: list[tuple[int, int, str]] = []
    language = parsed.language
    stack: list[tuple[Any, tuple[str, ...], int]] = [(parsed.tree.root_node, (), 0)]
    while stack:
        node, path, depth = stack.pop()
        inner = path
        if node.type not in _SKIPPED:
            name = definition(node, language)
            if name is not None and len(path) < _MAX_PATH:
                inner = path + name
                out.append((parsed.char(node.start_byte), parsed.char(node.end_byte), ".".join(inner)))
        if depth < _MAX_DEPTH:
            stack.extend((c, inner, depth + 1) for c in reversed(node.named_children))
    out.sort(key=lambda d: (d[0], -d[1]))
    return out


def symbols_of_ranges(defs: list[tuple[int, int, str]], ranges: Sequence[tuple[int, int]]) -> list[tuple[str, ...]]:
    """Each range's symbols (see the module docstring) given the file's ``definitions``; ranges in order."""
    out: list[tuple[str, ...]] = []
    open_defs: list[tuple[int, int, str]] = []  # definitions that began before the current range, innermost last
    i = 0
    for start, end in ranges:
        while i < len(defs) and defs[i][0] < start:
            open_defs.append(defs[i])
            i += 1
        open_defs = [d for d in open_defs if d[1] > start]
        found: list[str] = []
        inside = [d for d in open_defs if d[0] < start < d[1]]
        if inside:
            found.append(inside[-1][2])
        j = i
        while j < len(defs) and defs[j][0] < end and len(found) < MAX_SYMBOLS:
            found.append(defs[j][2])
            j += 1
        out.append(tuple(dict.fromkeys(found)))
    return out


def document_symbols(text: str, language: str, ranges: Sequence[tuple[int, int]]) -> list[tuple[str, ...]] | None:
    """The symbols of each chunk ``text[s:e]`` computed from the file itself (None: it does not parse)."""
    parsed, _ = parse(text, language)
    if parsed is None:
        return None
    return symbols_of_ranges(definitions(parsed), ranges)


def chunk_symbols(doc_id: str, texts: Sequence[str]) -> list[tuple[str, ...]]:
    """The symbols of each of a document's chunks, in order, from their texts alone (empty tuples for a file
    that is not code with a grammar, or whose chunks do not parse)."""
    language = code_language(doc_id)
    empty: list[tuple[str, ...]] = [() for _ in texts]
    if language is None or not texts or sum(len(t) + 1 for t in texts) >= MAX_CODE_CHARS:
        return empty
    if language == "python":
        joined, ranges = _PythonJoin().join(texts)
    else:
        parts: list[str] = []
        ranges = []
        at = 0
        for k, t in enumerate(texts):
            if k:
                # Go ends a statement at a line break after a name or a closing bracket, so a body's `{` cut
                # from its header (gofmt keeps them on one line) is joined with a space.
                gap = " " if language == "go" and t.startswith("{") else "\n"
                parts.append(gap)
                at += 1
            ranges.append((at, at + len(t)))
            parts.append(t)
            at += len(t)
        joined = "".join(parts)
    result = document_symbols(joined, language, ranges)
    return empty if result is None else result


# -- Python: the indentation a chunk's first line had ---------------------------------------

_PY_TOKEN = re.compile(r"""#[^\n]*|[rRbBuUfF]{0,2}(?:\"\"\"|'''|"|')|[()\[\]{}]|\\\n|\n""")
_PY_CLOSE = {'"""': re.compile(r'\\.|"""', re.S), "'''": re.compile(r"\\.|'''", re.S),
             '"': re.compile(r'\\.|"|\n', re.S), "'": re.compile(r"\\.|'|\n", re.S)}


_HEADER = re.compile(r"(?:async[ \t]+)?(?:def|class)\b[^\n]*[(\[]")
_MAX_HEADER_LINES = 200


def _closing_indent(text: str) -> int | None:
    """For a definition header over several lines whose last line opens with the closing bracket (as formatters
    write it): that line's indentation, which is the header's. Linear in the header's lines."""
    if not _HEADER.match(text):
        return None
    for line in text.split("\n", _MAX_HEADER_LINES)[1:_MAX_HEADER_LINES]:
        body = line.split("#", 1)[0].rstrip()
        if not body:
            return None
        stripped = body.lstrip(" \t")
        if stripped[0] in ")]" and body.endswith(":"):
            return len(body[: len(body) - len(stripped)].expandtabs(8))
    return None


class _PythonJoin:
    """Joins Python chunks, indenting each chunk's first line as its text implies (module docstring)."""

    def __init__(self) -> None:
        self.levels = [0]
        """The indentation of the open blocks, outermost first."""
        self.pending = False
        """The last logical line ended with ':' (a block whose first statement has not come yet)."""
        self.depth = 0
        self.quote: str | None = None

    def join(self, texts: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        parts: list[str] = []
        ranges: list[tuple[int, int]] = []
        at = 0
        for k, text in enumerate(texts):
            if k == 0:
                indent = 0
            elif self.depth or self.quote:
                indent = 0  # inside brackets or a string: indentation means nothing here
            else:
                indent = self._guess(text, texts[k + 1] if k + 1 < len(texts) else None)
            prefix = "" if k == 0 else "\n" + " " * indent
            at += len(prefix)
            ranges.append((at, at + len(text)))
            parts.append(prefix + text)
            at += len(text)
            self._feed(text, indent, k == 0 or not (self.depth or self.quote))
        return "".join(parts), ranges

    def _guess(self, text: str, following: str | None) -> int:
        lines = _logical_lines(text)
        if lines and lines[0][0] is not None:
            return lines[0][0]  # comment lines come first: the first statement's line is indented as it was
        header = bool(lines) and lines[0][1]
        nxt = lines[1][0] if len(lines) > 1 else None
        top = self.levels[-1]
        if text.startswith("@") and nxt is not None:
            return nxt  # a decorator stands where its definition does
        if self.pending:
            if nxt is not None and nxt > top and not header:
                return nxt
            return top + 4 if nxt is None or top + 4 < nxt else max(top + 1, nxt - 1)
        if header and nxt is not None:
            below = [lv for lv in self.levels if lv < nxt]
            return below[-1] if below else 0
        closing = _closing_indent(text) if header else None
        if closing is not None:
            return closing  # `) -> None:` stands where its `def` does
        if header and nxt is None and following is not None:
            # A header whose body is in the next chunk: that chunk's first line of known indentation is
            # (at least) the body's, so the header stands at the deepest open level below it.
            after = _logical_lines(following)
            known = after[0][0] if after and after[0][0] is not None else (after[1][0] if len(after) > 1 else None)
            if known is not None:
                below = [lv for lv in self.levels if lv < known]
                return below[-1] if below else 0
        return top

    def _feed(self, text: str, first_indent: int, starts_line: bool) -> None:
        """Update the open blocks with the logical lines of ``text`` (its first line indented ``first_indent``)."""
        scanner = _Scanner(self.depth, self.quote)
        for indent, colon in scanner.lines(text, first_indent if starts_line else None):
            if indent is not None:
                while len(self.levels) > 1 and self.levels[-1] > indent:
                    self.levels.pop()
                if indent > self.levels[-1]:
                    self.levels.append(indent)
            self.pending = colon
        self.depth, self.quote = scanner.depth, scanner.quote


def _logical_lines(text: str) -> list[tuple[int | None, bool]]:
    """The first two logical lines of a chunk: the first one's indentation is None when it starts the chunk."""
    return _Scanner(0, None).lines(text, None, limit=2)


class _Scanner:
    """Python's logical lines, roughly: brackets and strings continue a line, comments end one."""

    def __init__(self, depth: int, quote: str | None) -> None:
        self.depth = depth
        self.quote = quote

    def lines(self, text: str, first_indent: int | None, limit: int = -1) -> list[tuple[int | None, bool]]:
        """(indentation of each logical line that starts in ``text``, whether it ends with ':'); the first
        line's indentation is ``first_indent`` (None: it continues a line begun before)."""
        out: list[tuple[int | None, bool]] = []
        pos = 0
        n = len(text)
        line_indent: int | None = first_indent
        started = first_indent is not None and not self.depth and not self.quote
        last_sig = ""
        while pos < n and len(out) != limit:
            if self.quote is not None:
                m = _PY_CLOSE[self.quote].search(text, pos)
                while m is not None and m.group(0).startswith("\\"):
                    m = _PY_CLOSE[self.quote].search(text, m.end())
                if m is None:
                    return out
                if m.group(0) == "\n":  # an unclosed one-line string: give up on it at the line's end
                    self.quote = None
                    pos = m.start()
                    continue
                self.quote = None
                pos = m.end()
                last_sig = "s"
                continue
            m = _PY_TOKEN.search(text, pos)
            seg = text[pos : m.start() if m else n]
            if seg.strip():
                last_sig = seg.rstrip()[-1]
                if not started:
                    started = True
            if m is None:
                break
            tok = m.group(0)
            pos = m.end()
            if tok.startswith("#") or tok == "\\\n":
                continue
            if tok == "\n":
                if self.depth:
                    continue
                if started:
                    out.append((line_indent, last_sig == ":"))
                started = False
                last_sig = ""
                indent_end = pos
                while indent_end < n and text[indent_end] in " \t\f":
                    indent_end += 1
                line_indent = len(text[pos:indent_end].expandtabs(8))
                continue
            started = True
            if tok in "([{":
                self.depth += 1
                last_sig = tok
            elif tok in ")]}":
                self.depth = max(0, self.depth - 1)
                last_sig = tok
            else:
                self.quote = tok.lstrip("rRbBuUfF")
        if started and len(out) != limit:
            out.append((line_indent, last_sig == ":"))
        return out
