"""OpenDocument text (.odt), read from the archive's content.xml with the standard library.

Paragraphs and headings (``text:h`` with its outline level) in document order, lists' paragraphs each
a block, tables one line per row with cells separated by a tab; spaces (``text:s``), tabs and line
breaks as written; notes and annotations left out. The title is meta.xml's ``dc:title``.
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ragtui.core.documents.archive import Archive, zip_magic
from ragtui.core.documents.base import Block, Document, Limits, Unreadable, join_blocks
from ragtui.core.documents.registry import Kind

T = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_MIME = b"application/vnd.oasis.opendocument.text"


def _magic(head: bytes) -> bool:
    return zip_magic(head, mimetype=_MIME) and not zip_magic(head, mimetype=_MIME + b"-")


def _accepts(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04")


_SKIP = frozenset({f"{T}note", f"{OFFICE}annotation", f"{T}tracked-changes", f"{T}bookmark-ref"})


def _inline(el: ET.Element) -> str:
    out: list[str] = [el.text or ""]
    for child in el:
        tag = child.tag
        if tag == f"{T}s":
            c = child.get(f"{T}c") or "1"
            out.append(" " * min(int(c) if c.isdigit() else 1, 1000))
        elif tag == f"{T}tab":
            out.append("\t")
        elif tag == f"{T}line-break":
            out.append("\n")
        elif tag not in _SKIP:
            out.append(_inline(child))
        out.append(child.tail or "")
    return "".join(out)


def _blocks(root: ET.Element, out: list[Block]) -> None:
    stack = list(reversed(list(root)))
    while stack:
        el = stack.pop()
        tag = el.tag
        if tag == f"{T}p":
            out.append(Block(_inline(el)))
        elif tag == f"{T}h":
            lvl = el.get(f"{T}outline-level") or "1"
            out.append(Block(_inline(el), min(int(lvl), 6) if lvl.isdigit() and int(lvl) > 0 else 1))
        elif tag == f"{TABLE}table":
            first = True
            for row in el.iter(f"{TABLE}table-row"):
                cells = []
                for cell in row.findall(f"{TABLE}table-cell"):
                    paras = [" ".join(_inline(p).split()) for p in cell.iter() if p.tag in (f"{T}p", f"{T}h")]
                    cells.append(" ".join(t for t in paras if t))
                line = "\t".join(cells)
                if line.strip():
                    out.append(Block(line, tight=not first))
                    first = False
        elif tag not in _SKIP:
            stack.extend(reversed(list(el)))


def read(data: bytes, limits: Limits) -> Document:
    zf = Archive(data, limits, ".odt")
    root = zf.xml("content.xml")
    body = root.find(f"{OFFICE}body/{OFFICE}text")
    if body is None:
        raise Unreadable("not an OpenDocument text: content.xml has no text body")
    blocks: list[Block] = []
    _blocks(body, blocks)
    title = None
    if zf.has("meta.xml"):
        el = zf.xml("meta.xml").find(f"{OFFICE}meta/{_DC_TITLE}")
        title = " ".join((el.text or "").split())[:200] or None if el is not None else None
    return join_blocks(blocks, "odt", title, limits)


KIND = Kind(
    name="odt",
    extensions=(".odt",),
    reader="ragtui.core.documents.odt:read",
    isolated=True,
    magic=_magic,
    accepts=_accepts,
)
