"""EPUB: the chapters in spine order, each chapter's XHTML through the HTML reader, set apart by a
blank line; headings are the chapters' own. The title is the package's ``dc:title``.

An EPUB whose chapters are encrypted (DRM: ``META-INF/encryption.xml`` names a chapter) is skipped;
obfuscated fonts alone do not matter.
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

from ragtui.core.documents import html
from ragtui.core.documents.archive import Archive, zip_magic
from ragtui.core.documents.base import Document, Heading, Limits, Unreadable
from ragtui.core.documents.registry import Kind

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
_MIME = b"application/epub+zip"
_CHAPTER_TYPES = ("application/xhtml+xml", "text/html")


def _magic(head: bytes) -> bool:
    return zip_magic(head, mimetype=_MIME)


def _accepts(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04")


def read(data: bytes, limits: Limits) -> Document:
    zf = Archive(data, limits, ".epub")
    if not zf.has("META-INF/container.xml"):
        raise Unreadable("not an EPUB: no META-INF/container.xml")
    rootfile = zf.xml("META-INF/container.xml").find(f"{_CONTAINER}rootfiles/{_CONTAINER}rootfile")
    opf_path = (rootfile.get("full-path") if rootfile is not None else None) or ""
    opf_path = posixpath.normpath(opf_path)
    if not zf.has(opf_path):
        raise Unreadable("broken EPUB: its package document is missing")
    opf = zf.xml(opf_path)
    base = posixpath.dirname(opf_path)
    manifest: dict[str, tuple[str, str]] = {}
    for item in opf.iter(f"{_OPF}item"):
        href = item.get("href")
        if item.get("id") and href:
            path = posixpath.normpath(posixpath.join(base, unquote(href.partition("#")[0])))
            manifest[str(item.get("id"))] = (path, item.get("media-type") or "")
    encrypted: set[str] = set()
    if zf.has("META-INF/encryption.xml"):
        for ref in zf.xml("META-INF/encryption.xml").iter(f"{_ENC}CipherReference"):
            encrypted.add(posixpath.normpath(unquote(ref.get("URI") or "")))
    chapters = []
    for ref in opf.iter(f"{_OPF}itemref"):
        entry = manifest.get(ref.get("idref") or "")
        if entry is None or entry[1] not in _CHAPTER_TYPES or entry[0] in chapters:
            continue
        if entry[0] in encrypted:
            raise Unreadable("encrypted EPUB (DRM): its chapters cannot be read")
        chapters.append(entry[0])
    parts: list[str] = []
    headings: list[Heading] = []
    at = 0
    for path in chapters:
        if not zf.has(path):
            continue
        text, _title, found = html.extract(html.decode(zf.read(path)), limits)
        if not text.strip():
            continue
        if parts:
            parts.append("\n")
            at += 1
        headings.extend(Heading(at + h.offset, h.level, h.title) for h in found)
        parts.append(text)
        at += len(text)
        if at > limits.max_chars:
            raise Unreadable(f"more than {limits.max_chars:,} characters of text")
    if not parts:
        raise Unreadable("no text in any chapter")
    el = opf.find(f"{_OPF}metadata/{_DC_TITLE}")
    title = " ".join((el.text or "").split())[:200] or None if el is not None else None
    return Document("".join(parts), "epub", title, tuple(headings))


KIND = Kind(
    name="epub",
    extensions=(".epub",),
    reader="ragtui.core.documents.epub:read",
    isolated=True,
    magic=_magic,
    accepts=_accepts,
)
