"""HTML, parsed by an HTML5 parser (lexbor, through selectolax): the text a reader sees.

Dropped: ``script``, ``style``, ``template``, ``noscript``, the ``head`` (but for ``title``), embedded
objects, comments and hidden elements (the ``hidden`` attribute, ``aria-hidden="true"``, an inline
``display:none`` or ``visibility:hidden``). White space is collapsed as a browser does, except in
``pre``; block elements start and end lines, paragraphs and headings are set apart by a blank line,
table rows are lines with their cells separated by a tab. ``h1``-``h6`` are headings, ``title`` the
title (else the first ``h1``).
"""

from __future__ import annotations

import codecs
import re

from ragtui.core.documents.base import Document, Heading, Limits, Unreadable
from ragtui.core.documents.registry import Kind

_DROP = frozenset({
    "script", "style", "template", "noscript", "head", "iframe", "object", "embed", "canvas", "svg",
    "-comment", "select", "datalist", "dialog",
})
_DROP_FIRST = ("script", "style", "template", "noscript", "iframe", "object", "embed", "canvas", "svg", "select",
               "datalist", "dialog")
_FEW_TAGS = 8192
_PARAGRAPH = frozenset({
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol", "dl", "figure",
    "hr", "section", "article", "header", "footer", "aside", "nav", "main", "address", "details", "form",
    "fieldset",
})
_LINE = frozenset({
    "div", "li", "dt", "dd", "tr", "caption", "figcaption", "summary", "legend", "option", "body", "html",
    "center", "menu", "search", "hgroup", "tbody", "thead", "tfoot", "br", "label",
})
_CELL = frozenset({"td", "th"})
_HEADING = {f"h{i}": i for i in range(1, 7)}
_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\s*(?:!important\s*)?(?:;|$)", re.I)
_CHARSET = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_MARKUP = re.compile(rb"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>]|head[\s>]|body[\s>])", re.I | re.S)


def _looks(head: bytes) -> bool:
    if head.startswith(codecs.BOM_UTF8):
        head = head[3:]
    return _MARKUP.match(head[:4096]) is not None


def decode(data: bytes) -> str:
    """The characters of an HTML file: by its byte order mark, else its ``meta`` charset, else UTF-8,
    else Windows-1252 (what browsers assume)."""
    for bom, enc in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(enc, "replace")
    m = _CHARSET.search(data[:4096])
    if m is not None:
        try:
            return data.decode(m.group(1).decode("ascii"), "replace")
        except LookupError:
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")


class _Out:
    """The text being written, with white space collapsed and breaks merged as they come."""

    def __init__(self, limits: Limits) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.breaks = 0  # line breaks owed before the next text (0, 1 or 2)
        self.space = False  # a space owed before the next text
        self.sep = ""  # a cell separator owed
        self.line_start = True
        self.max_chars = limits.max_chars
        self.heading: tuple[int, list[str]] | None = None
        self.headings: list[Heading] = []
        self._heading_at: int | None = None

    def _write(self, s: str) -> None:
        if self.length:
            if self.breaks:
                s = "\n" * self.breaks + s
            elif self.sep:
                s = self.sep + s
            elif self.space and not self.line_start:
                s = " " + s
        self.breaks, self.space, self.sep = 0, False, ""
        if self.heading is not None and self._heading_at is None:
            self._heading_at = self.length + len(s) - len(s.lstrip("\n\t "))
        self.parts.append(s)
        self.length += len(s)
        self.line_start = s.endswith("\n")
        if self.length > self.max_chars:
            raise Unreadable(f"more than {self.max_chars:,} characters of text")

    def text(self, s: str, pre: bool) -> None:
        if self.heading is not None:
            self.heading[1].append(s)
        if pre:
            if s:
                self._write(s)
            return
        words = s.split()
        if not words:
            if s:
                self.space = True
            return
        if s[0].isspace():
            self.space = True
        self._write(" ".join(words))
        self.space = s[-1].isspace()

    def brk(self, n: int) -> None:
        if self.length:
            self.breaks = max(self.breaks, n)
        self.space = False
        self.sep = ""

    def cell(self) -> None:
        if self.length and not self.breaks and not self.line_start:
            self.sep = "\t"

    def open_heading(self, level: int) -> None:
        self.heading, self._heading_at = (level, []), None

    def close_heading(self) -> None:
        if self.heading is not None:
            level, bits = self.heading
            title = " ".join("".join(bits).split())
            if title and self._heading_at is not None:
                self.headings.append(Heading(self._heading_at, level, title[:200]))
        self.heading, self._heading_at = None, None

    def result(self) -> str:
        return "".join(self.parts) + ("\n" if self.parts else "")


def _hidden(attrs: dict[str, str | None]) -> bool:
    if "hidden" in attrs:
        return True
    if (attrs.get("aria-hidden") or "").strip().lower() == "true":
        return True
    style = attrs.get("style")
    return bool(style) and _HIDDEN_STYLE.search(style or "") is not None


_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]{0,40})(?=[\s/>])[^<>]{0,4096}?(/?)>")
_VOID_OR_IMPLIED = frozenset({
    # Never closed (void) or closed by the next sibling: they do not deepen the tree.
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot", "rt", "rp",
    "colgroup", "caption", "html", "head", "body",
})


def _nesting(markup: str, cap: int) -> int:
    """How deep the markup's tags nest, counted on the raw tags (an upper bound, stopped past ``cap``).

    The parser takes time quadratic in the depth (a file of 100,000 nested elements would take
    minutes), so depth is judged before parsing, on the tags alone.
    """
    depth = deepest = 0
    for m in _TAG.finditer(markup):
        name = m.group(2).lower()
        if name in _VOID_OR_IMPLIED or m.group(3):
            continue
        if m.group(1):
            depth = max(0, depth - 1)
        else:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > cap:
                    break
    return deepest


def extract(markup: str, limits: Limits) -> tuple[str, str | None, list[Heading]]:
    """(text, title, headings) of an HTML document (or fragment)."""
    from selectolax.lexbor import LexborHTMLParser, LexborNode  # in the extraction worker only

    # Below _FEW_TAGS tags the parse is quick however deep they nest; the count is paid only above.
    if markup.count("<") > _FEW_TAGS and _nesting(markup, 4 * limits.max_depth) > 4 * limits.max_depth:
        raise Unreadable(f"elements nested more than {limits.max_depth:,} deep")

    tree = LexborHTMLParser(markup)
    title = None
    node = tree.css_first("title")
    if node is not None:
        title = " ".join((node.text(deep=True) or "").split())[:200] or None
    # What is never shown goes before the walk, in the parser's own code: the walk then looks at
    # no attribute and no dropped element.
    tree.strip_tags(list(_DROP_FIRST))
    for node in tree.css("[hidden], [aria-hidden], [style]"):
        if _hidden(node.attributes):
            node.decompose()
    out = _Out(limits)
    root = tree.root
    if root is None:
        return "", title, []
    # Depth-first without recursion: a file of 100,000 nested elements must not exhaust the stack.
    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    pre = 0
    depth = 0
    max_depth = limits.max_depth
    while stack:
        node, closing = stack.pop()
        tag = node.tag or ""
        if closing:
            depth -= 1
            if tag in _HEADING:
                out.close_heading()
            if tag == "pre":
                pre -= 1
            if tag in _PARAGRAPH:
                out.brk(2)
            elif tag in _LINE:
                out.brk(1)
            continue
        if tag == "-text":
            out.text(node.text_content or "", pre > 0)
            continue
        if tag in _DROP or tag.startswith("-"):
            continue
        if tag == "br":
            out.brk(1)
            continue
        depth += 1
        if depth > max_depth:
            raise Unreadable(f"elements nested more than {max_depth:,} deep")
        if tag in _PARAGRAPH:
            out.brk(2)
        elif tag in _LINE:
            out.brk(1)
        elif tag in _CELL:
            out.cell()
        if tag in _HEADING:
            out.open_heading(_HEADING[tag])
        if tag == "pre":
            pre += 1
        stack.append((node, True))
        children = []
        child = node.child
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend((c, False) for c in reversed(children))
    if title is None:
        first = next((h for h in out.headings if h.level == 1), None)
        title = first.title if first is not None else None
    return out.result(), title, out.headings


def read(data: bytes, limits: Limits) -> Document:
    text, title, headings = extract(decode(data), limits)
    if not text.strip():
        raise Unreadable("no visible text")
    return Document(text, "html", title, tuple(headings))


KIND = Kind(
    name="html",
    extensions=(".html", ".htm", ".xhtml"),
    reader="ragtui.core.documents.html:read",
    isolated=True,
    looks=_looks,
)
