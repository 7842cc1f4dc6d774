"""Real documents made by real producers for the readers' tests: fpdf2, headless Chromium, python-docx,
ebooklib, odfpy. Each function writes one file and returns its path."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.browser import CHROMIUM


def fpdf_pages(path: Path, pages: list[list[str]], *, title: str | None = None, sections: bool = True) -> Path:
    """A PDF written by fpdf2: one page per item, one text line per string, a bookmark per page."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    if title:
        pdf.set_title(title)
    for i, lines in enumerate(pages, 1):
        pdf.add_page()
        if sections:
            pdf.start_section(f"Chapter {i}")
        for line in lines:
            pdf.cell(0, 10, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def chromium_pdf(html: Path, out: Path) -> Path:
    """``html`` printed to a PDF by headless Chromium (skips when Chromium is absent)."""
    exe = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if exe is None:
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
         f"--print-to-pdf={out}", html.as_uri()],
        check=True, timeout=120, capture_output=True,
    )
    return out


def docx_report(path: Path) -> Path:
    """A .docx written by python-docx: headings by style, paragraphs with runs, a table."""
    import docx

    d = docx.Document()
    d.core_properties.title = "Report"
    d.add_heading("Overview", level=1)
    d.add_paragraph("The first paragraph about kestrels.")
    p = d.add_paragraph("Bold ")
    p.add_run("and plain").bold = True
    d.add_heading("Numbers", level=2)
    t = d.add_table(rows=2, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text = "name", "count"
    t.cell(1, 0).text, t.cell(1, 1).text = "kestrel", "3"
    d.add_paragraph("After the table.")
    d.save(str(path))
    return path


def epub_book(path: Path) -> Path:
    """An EPUB written by ebooklib whose spine reverses the order the chapters were added in."""
    from ebooklib import epub

    b = epub.EpubBook()
    b.set_identifier("birds-1")
    b.set_title("Bird Book")
    b.set_language("en")
    c1 = epub.EpubHtml(title="One", file_name="c1.xhtml", lang="en")
    c1.content = "<h1>Chapter One</h1><p>Sparrows sing.</p><script>var hidden = 1;</script>"
    c2 = epub.EpubHtml(title="Two", file_name="c2.xhtml", lang="en")
    c2.content = "<h1>Chapter Two</h1><p>Finches <em>feed</em>.</p>"
    b.add_item(c1)
    b.add_item(c2)
    b.toc = (c1, c2)
    b.add_item(epub.EpubNcx())
    b.add_item(epub.EpubNav())
    b.spine = [c2, c1]
    epub.write_epub(str(path), b)
    return path


def odt_note(path: Path) -> Path:
    """An .odt written by odfpy: a heading, a paragraph, a title in its metadata."""
    from odf import dc
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    o = OpenDocumentText()
    o.meta.addElement(dc.Title(text="Odt Title"))
    o.text.addElement(H(outlinelevel=1, text="Intro"))
    o.text.addElement(P(text="Wrens are small."))
    o.text.addElement(H(outlinelevel=2, text="Habitat"))
    o.text.addElement(P(text="Hedges and gardens."))
    o.save(str(path))
    return path
