"""Document readers: extraction speed per kind against a named peer, ingest of a mixed folder, and a
no-op re-sync of a folder of 1,000 PDFs.

    python bench/bench_readers.py [--work DIR] [--pdfs N]

1. Extraction, each kind against its obvious peer on the same files, in this run:
   - PDF: the 19 real PDFs of ../shared/data/documents/pdf/real, ragtui's reader (PDFium in the
     extraction worker, one worker and two) against poppler's pdftotext (a process per file, as a
     shell loop over a folder runs it);
   - HTML: the HTML pages under /usr/share/doc, ragtui's reader against lxml.html's text_content();
   - DOCX, EPUB, ODT: files written by python-docx, ebooklib and odfpy from the python-docs corpus,
     ragtui's readers against python-docx's paragraphs, ebooklib + lxml, odfpy's teletype.
   Pages/s (PDF) and MB/s of input; for ragtui, wall time includes sending the bytes to the worker.
2. Ingest of a mixed folder (the PDFs, HTML pages, DOCX/EPUB/ODT files and python-docs' .rst
   sources) with the embedded embedder: chunks/s end to end.
3. No-op re-sync of a folder of N (1,000) one-page PDFs written by fpdf2: seconds, and how many
   files were given to a reader (the target: none, within 1 s).

The machine is shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragtui.core.documents import detect  # noqa: E402
from ragtui.core.documents.worker import Extractor, Job, shared  # noqa: E402

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def load() -> str:
    return open("/proc/loadavg").read().split(" ")[0] if os.path.exists("/proc/loadavg") else "?"


def ours(files: list[Path], workers: int) -> tuple[float, int, int]:
    """(seconds, pages or documents read, files skipped) for ragtui's readers over ``files``."""
    with Extractor(workers=workers) as ex:
        warm = files[0].read_bytes()
        ex.read(detect(files[0].name, warm), warm)  # the workers' start-up is paid once, not per run
        t0 = time.perf_counter()
        pages = skipped = 0
        jobs = (Job(str(f), detect(f.name, f.read_bytes()[:4096]), f.read_bytes()) for f in files)
        for _key, got in ex.run(jobs):
            if isinstance(got, Exception):
                skipped += 1
            else:
                pages += got.pages
        return time.perf_counter() - t0, pages, skipped


def pdftotext(files: list[Path]) -> float:
    t0 = time.perf_counter()
    for f in files:
        subprocess.run(["pdftotext", "-q", str(f), "-"], stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def peer_html(files: list[Path]) -> float:
    import lxml.html

    t0 = time.perf_counter()
    for f in files:
        try:
            lxml.html.fromstring(f.read_bytes()).text_content()
        except Exception:  # noqa: BLE001 (the peer's failure on a page is not the benchmark's)
            pass
    return time.perf_counter() - t0


def peer_docx(files: list[Path]) -> float:
    import docx

    t0 = time.perf_counter()
    for f in files:
        d = docx.Document(str(f))
        "\n".join(p.text for p in d.paragraphs)
        for t in d.tables:
            for row in t.rows:
                "\t".join(c.text for c in row.cells)
    return time.perf_counter() - t0


def peer_epub(files: list[Path]) -> float:
    import ebooklib
    import lxml.html
    from ebooklib import epub

    t0 = time.perf_counter()
    for f in files:
        book = epub.read_epub(str(f))
        for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
            lxml.html.fromstring(item.get_content()).text_content()
    return time.perf_counter() - t0


def peer_odt(files: list[Path]) -> float:
    from odf import teletype, text
    from odf.opendocument import load as odf_load

    t0 = time.perf_counter()
    for f in files:
        doc = odf_load(str(f))
        for el in doc.getElementsByType(text.P) + doc.getElementsByType(text.H):
            teletype.extractText(el)
    return time.perf_counter() - t0


def write_office(rst: list[Path], out: Path, n: int) -> dict[str, list[Path]]:
    """n DOCX, EPUB and ODT files, each holding one python-docs page's paragraphs."""
    import docx
    from ebooklib import epub
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    made: dict[str, list[Path]] = {"docx": [], "epub": [], "odt": []}
    for i, src in enumerate(rst[:n]):
        paras = [p.strip() for p in src.read_text(encoding="utf-8", errors="replace").split("\n\n") if p.strip()]
        d = docx.Document()
        d.add_heading(src.stem, level=1)
        for p in paras:
            d.add_paragraph(p)
        made["docx"].append(out / f"{i}.docx")
        d.save(str(made["docx"][-1]))
        book = epub.EpubBook()
        book.set_identifier(f"b{i}")
        book.set_title(src.stem)
        book.set_language("en")
        chapters = []
        for c in range(0, len(paras), 40):
            ch = epub.EpubHtml(title=f"c{c}", file_name=f"c{c}.xhtml", lang="en")
            ch.content = "".join(f"<p>{p.replace('&', '&amp;').replace('<', '&lt;')}</p>" for p in paras[c:c + 40])
            book.add_item(ch)
            chapters.append(ch)
        book.spine = chapters
        book.add_item(epub.EpubNcx())
        made["epub"].append(out / f"{i}.epub")
        epub.write_epub(str(made["epub"][-1]), book)
        o = OpenDocumentText()
        o.text.addElement(H(outlinelevel=1, text=src.stem))
        for p in paras:
            o.text.addElement(P(text=p))
        made["odt"].append(out / f"{i}.odt")
        o.save(str(made["odt"][-1]))
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--pdfs", type=int, default=1000, help="PDFs in the no-op re-sync folder (default 1000)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-readers-", dir=args.work))
    try:
        run(work, args.pdfs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, n_pdfs: int) -> None:
    real = SHARED / "documents" / "pdf" / "real"
    if not real.is_dir():
        raise SystemExit(f"{real} is absent: the benchmark reads ../shared/data beside the repository")
    pdfs = sorted(real.glob("*.pdf"))
    mb = sum(f.stat().st_size for f in pdfs) / 1e6
    print(f"load average {load()} (2 cores shared)")
    print(f"\n1. extraction ({len(pdfs)} PDFs, {mb:.1f} MB)")
    for workers in (1, 2):
        secs, pages, skipped = ours(pdfs, workers)
        print(f"  ragtui pdf, {workers} worker(s): {secs:.2f} s, {pages / secs:.0f} pages/s, {mb / secs:.1f} MB/s"
              f" ({pages} pages, {skipped} skipped)  load {load()}")
    if shutil.which("pdftotext"):
        secs_peer = pdftotext(pdfs)
        print(f"  pdftotext (poppler):     {secs_peer:.2f} s, {pages / secs_peer:.0f} pages/s, {mb / secs_peer:.1f} MB/s"
              f"  load {load()}")
    html = sorted(p for p in Path("/usr/share/doc").rglob("*.html") if p.is_file())
    if html:
        hmb = sum(f.stat().st_size for f in html) / 1e6
        secs, docs, skipped = ours(html, 2)
        peer = peer_html(html)
        print(f"  ragtui html ({len(html)} pages, {hmb:.1f} MB): {secs:.2f} s, {hmb / secs:.1f} MB/s ({skipped} skipped);"
              f" lxml text_content: {peer:.2f} s, {hmb / peer:.1f} MB/s  load {load()}")
    rst = sorted((SHARED / "corpora" / "python-docs").rglob("*.rst.txt"), key=lambda p: -p.stat().st_size)
    office = work / "office"
    office.mkdir()
    made = write_office(rst, office, 40)
    for kind, peer_fn, peer_name in (("docx", peer_docx, "python-docx"), ("epub", peer_epub, "ebooklib + lxml"),
                                     ("odt", peer_odt, "odfpy teletype")):
        files = made[kind]
        kmb = sum(f.stat().st_size for f in files) / 1e6
        secs, _docs, skipped = ours(files, 2)
        peer = peer_fn(files)
        print(f"  ragtui {kind} ({len(files)} files, {kmb:.1f} MB): {secs:.2f} s, {len(files) / secs:.0f} files/s,"
              f" {kmb / secs:.1f} MB/s ({skipped} skipped); {peer_name}: {peer:.2f} s, {len(files) / peer:.0f} files/s,"
              f" {kmb / peer:.1f} MB/s  load {load()}")

    from ragtui.core.embedders.wordllama import WordLlamaEmbedder
    from ragtui.core.ingest.sync import sync

    emb = WordLlamaEmbedder()
    mixed = work / "mixed"
    mixed.mkdir()
    for f in pdfs:
        shutil.copy(f, mixed / f.name)
    for i, f in enumerate(html[:100]):
        shutil.copy(f, mixed / f"{i}-{f.name}")
    for files in made.values():
        for f in files:
            shutil.copy(f, mixed / f"o-{f.name}")
    for f in rst[:200]:
        shutil.copy(f, mixed / f"{f.parent.name}-{f.name}")
    t0 = time.perf_counter()
    report = sync(mixed, artifacts=work / "art", embedder=emb)
    secs = time.perf_counter() - t0
    print(f"\n2. ingest of a mixed folder ({len(list(mixed.iterdir()))} files: PDF, HTML, DOCX, EPUB, ODT, reST):"
          f" {report.chunks_total} chunks in {secs:.2f} s, {report.chunks_total / secs:.0f} chunks/s"
          f" ({len(report.skipped)} skipped)  load {load()}")
    print("   stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items()))

    from fpdf import FPDF

    folder = work / "pdfs"
    folder.mkdir()
    for i in range(n_pdfs):
        pdf = FPDF()
        pdf.set_font("helvetica", size=12)
        pdf.add_page()
        pdf.cell(0, 10, f"document {i}: a page about the migration of birds, number {i * 7919 % 10007}")
        pdf.output(str(folder / f"{i:04d}.pdf"))
    t0 = time.perf_counter()
    first = sync(folder, artifacts=work / "art", embedder=emb)
    build = time.perf_counter() - t0
    sent = shared().sent
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        again = sync(folder, artifacts=work / "art", embedder=emb)
        times.append(time.perf_counter() - t0)
        assert not again.published
    times.sort()
    print(f"\n3. {n_pdfs} PDFs: first ingest {build:.2f} s ({first.chunks_total} chunks); no-op re-sync"
          f" median {times[2]:.3f} s (min {times[0]:.3f}, max {times[-1]:.3f}) over 5 runs,"
          f" files given to a reader: {shared().sent - sent}  load {load()}")


if __name__ == "__main__":
    main()
