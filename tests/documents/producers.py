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
