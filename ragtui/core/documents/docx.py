"""Word documents (.docx, OOXML), read from the archive's XML parts with the standard library.

Paragraphs in document order (inside content controls too), each a block; runs' text with tabs and
breaks; tracked insertions kept and deletions dropped; a paragraph whose style is a heading ("heading
N", or an outline level) is a heading of that level; a table is one line per row, its cells separated
by a tab (a cell's paragraphs joined by a space). The title is the core properties' title, else the
first "Title"-styled paragraph.
"""

from __future__ import annotations

import posixpath
import re
from xml.etree import ElementTree as ET

from ragtui.core.documents.archive import Archive, zip_magic
from ragtui.core.documents.base import Block, Document, Limits, Unreadable, join_blocks
from ragtui.core.documents.registry import Kind

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_OFFICE_DOC = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
_HEADING_NAME = re.compile(r"heading\s*([1-9])$", re.I)


def _magic(head: bytes) -> bool:
    return zip_magic(head, first_member=b"[Content_Types].xml") and b"word/" in head[:4096]


def _accepts(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04")


def _main_part(zf: Archive) -> str:
    if zf.has("word/document.xml"):
        return "word/document.xml"
    if zf.has("_rels/.rels"):
        for rel in zf.xml("_rels/.rels").iter(f"{_REL}Relationship"):
            if rel.get("Type") == _OFFICE_DOC and rel.get("Target"):
                target = posixpath.normpath(str(rel.get("Target")).lstrip("/"))
                if zf.has(target):
                    return target
    raise Unreadable("not a Word document: the archive has no main document part")


def _style_levels(zf: Archive) -> tuple[dict[str, int], set[str]]:
    """(heading level per style id, ids of title styles)."""
    levels: dict[str, int] = {}
    titles: set[str] = set()
    if not zf.has("word/styles.xml"):
        return levels, titles
    for style in zf.xml("word/styles.xml").iter(f"{W}style"):
        sid = style.get(f"{W}styleId") or ""
        name_el = style.find(f"{W}name")
        name = (name_el.get(f"{W}val") if name_el is not None else "") or ""
        m = _HEADING_NAME.match(name.strip())
        outline = style.find(f"{W}pPr/{W}outlineLvl")
        if m:
            levels[sid] = int(m.group(1))
        elif outline is not None and (outline.get(f"{W}val") or "").isdigit():
            level = int(outline.get(f"{W}val") or 9) + 1
            if level <= 6:
                levels[sid] = level
        if name.strip().lower() == "title":
            titles.add(sid)
    return levels, titles


def _runs_text(el: ET.Element) -> str:
    out: list[str] = []
    stack = [el]
    while stack:
        node = stack.pop()
        tag = node.tag
        if tag == f"{W}t":
            out.append(node.text or "")
        elif tag == f"{W}tab":
            out.append("\t")
        elif tag in (f"{W}br", f"{W}cr"):
            out.append("\n")
        elif tag in (f"{W}del", f"{W}delText", f"{W}instrText", f"{W}pPr", f"{W}rPr", f"{W}footnoteReference"):
            continue
        stack.extend(reversed(list(node)))
    return "".join(out)


def _paragraph(p: ET.Element, levels: dict[str, int], titles: set[str]) -> tuple[str, int, bool]:
    style = p.find(f"{W}pPr/{W}pStyle")
    sid = style.get(f"{W}val") or "" if style is not None else ""
    level = levels.get(sid, 0)
    outline = p.find(f"{W}pPr/{W}outlineLvl")
    if not level and outline is not None and (outline.get(f"{W}val") or "").isdigit():
        level = int(outline.get(f"{W}val") or 9) + 1
        level = level if level <= 6 else 0
    return _runs_text(p), level, sid in titles


def _blocks(body: ET.Element, levels: dict[str, int], titles: set[str], out: list[Block], title: list[str]) -> None:
    stack = list(reversed(list(body)))
    while stack:
        el = stack.pop()
        if el.tag == f"{W}p":
            text, level, is_title = _paragraph(el, levels, titles)
            if is_title and not title and text.strip():
                title.append(" ".join(text.split()))
            out.append(Block(text, level))
        elif el.tag == f"{W}tbl":
            first = True
            for row in el.iter(f"{W}tr"):
                cells = []
                for cell in row.findall(f"{W}tc"):
                    paras = [" ".join(_runs_text(p).split()) for p in cell.iter(f"{W}p")]
                    cells.append(" ".join(t for t in paras if t))
                line = "\t".join(cells)
                if line.strip():
                    out.append(Block(line, 0, tight=not first))
                    first = False
        elif el.tag in (f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}ins"):
            stack.extend(reversed(list(el)))


def read(data: bytes, limits: Limits) -> Document:
    zf = Archive(data, limits, ".docx")
    root = zf.xml(_main_part(zf))
    body = root.find(f"{W}body")
    if body is None:
        raise Unreadable("not a Word document: its main part has no body")
    levels, titles = _style_levels(zf)
    blocks: list[Block] = []
    title: list[str] = []
    _blocks(body, levels, titles, blocks, title)
    core_title = None
    if zf.has("docProps/core.xml"):
        el = zf.xml("docProps/core.xml").find(_DC_TITLE)
        core_title = " ".join((el.text or "").split())[:200] if el is not None else None
    return join_blocks(blocks, "docx", core_title or (title[0][:200] if title else None), limits)


KIND = Kind(
    name="docx",
    extensions=(".docx",),
    reader="ragtui.core.documents.docx:read",
    isolated=True,
    magic=_magic,
    accepts=_accepts,
)
