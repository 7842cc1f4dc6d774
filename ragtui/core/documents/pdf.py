"""PDF, read by PDFium (pypdfium2): each page's text in PDFium's reading order, pages joined by a form
feed; the outline (bookmarks) become headings, each at the start of the page it points to.

Line breaks within a page are ``\\n`` whatever PDFium gives; a page's text that has any ends with one,
so a page break is also a line break. A PDF that needs a password, that PDFium cannot load, that has
no text on any page (scanned images: OCR is not supported) or that is over the page cap is skipped with
the reason.
"""

from __future__ import annotations

from ragtui.core.documents.base import PAGE_BREAK, Document, Heading, Limits, Unreadable
from ragtui.core.documents.registry import Kind

NO_TEXT = "no text layer — OCR is not supported"


def _magic(head: bytes) -> bool:
    return head.startswith(b"%PDF-")


def _accepts(head: bytes) -> bool:
    # PDFium, like other readers, finds the header anywhere in the first KiB.
    return b"%PDF-" in head[:1024]


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace(PAGE_BREAK, "\n").replace("\0", "")
    # PDFium decodes UTF-16 and can hand back lone surrogates, which UTF-8 (the index) cannot hold.
    text = text.encode("utf-8", "replace").decode("utf-8")
    if text and not text.endswith("\n"):
        text += "\n"
    return text


def _why(e: Exception) -> str:
    msg = str(e)
    if "password" in msg.lower():
        return "encrypted: the PDF needs a password"
    if "load page" in msg.lower():
        return "broken PDF: a page cannot be loaded"
    detail = msg.partition("(PDFium: ")[2].rstrip(").") or msg
    if detail in ("", "Success", "Unknown error"):
        detail = "PDFium cannot load it"
    return f"not a readable PDF ({detail})"


def read(data: bytes, limits: Limits) -> Document:
    import pypdfium2 as pdfium  # in the extraction worker only

    if not _accepts(data[:1024]):
        raise Unreadable("not a PDF (no %PDF- header in its first KiB)")
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        raise Unreadable(_why(e)) from None
    try:
        n = len(pdf)
        if n > limits.max_pages:
            raise Unreadable(f"{n:,} pages, over the {limits.max_pages:,}-page limit")
        if n == 0:
            raise Unreadable("a PDF with no pages")
        pages: list[str] = []
        size = 0
        for i in range(n):
            try:
                page = pdf[i]
                textpage = page.get_textpage()
                raw = textpage.get_text_range()
                textpage.close()
                page.close()
            except pdfium.PdfiumError as e:
                raise Unreadable(_why(e)) from None
            text = _clean(raw)
            size += len(text) + 1
            if size > limits.max_chars:
                raise Unreadable(f"more than {limits.max_chars:,} characters of text")
            pages.append(text)
        if not any(not t.isspace() for t in pages if t):
            raise Unreadable(NO_TEXT)
        starts = [0]
        for t in pages:
            starts.append(starts[-1] + len(t) + 1)
        headings = []
        try:
            for mark in pdf.get_toc(max_depth=16):
                dest = mark.get_dest()
                index = None if dest is None else dest.get_index()
                label = " ".join((mark.get_title() or "").split())
                if index is None or not 0 <= index < n or not label:
                    continue
                headings.append(Heading(starts[index], mark.level + 1, label[:200]))
        except pdfium.PdfiumError:
            headings = []  # an unreadable outline costs the headings, not the text
        headings.sort(key=lambda h: h.offset)
        title: str | None = None
        try:
            title = " ".join(str(pdf.get_metadata_dict().get("Title") or "").split())[:200] or None
        except pdfium.PdfiumError:
            pass
        return Document(PAGE_BREAK.join(pages), "pdf", title, tuple(headings), paged=True)
    finally:
        pdf.close()


KIND = Kind(
    name="pdf",
    extensions=(".pdf",),
    reader="ragtui.core.documents.pdf:read",
    paged=True,
    isolated=True,
    magic=_magic,
    accepts=_accepts,
)
