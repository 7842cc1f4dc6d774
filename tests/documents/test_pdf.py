"""PDF: text per page joined by form feeds, outline headings, page citations, skips with reasons."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ragtui.core.documents import Limits, Unreadable, detect
from ragtui.core.documents.worker import Extractor, shared
from tests.conftest import shared_data
from tests.documents.producers import chromium_pdf, fpdf_pages

OWLS = [[f"Page {p} line {n} about owls" for n in range(1, 4)] for p in range(1, 4)]


def read(path: Path):
    data = path.read_bytes()
    with Extractor() as ex:
        return ex.read(detect(path.name, data[:4096]), data)


def run(*argv: str) -> tuple[int, str, str]:
    from ragtui import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_fpdf_pages_are_joined_by_form_feeds_word_for_word(tmp_path):
    doc = read(fpdf_pages(tmp_path / "owls.pdf", OWLS, title="Field Guide"))
    assert doc.text == "\f".join("".join(f"{line}\n" for line in page) for page in OWLS)
    assert doc.paged and doc.pages == 3 and doc.title == "Field Guide"
    assert [(h.title, h.level) for h in doc.headings] == [("Chapter 1", 1), ("Chapter 2", 1), ("Chapter 3", 1)]
    assert [doc.text[h.offset:].split("\n")[0] for h in doc.headings] == [p[0] for p in OWLS]


def test_chromium_printed_page_breaks(tmp_path):
    html = tmp_path / "c.html"
    html.write_text(
        "<!doctype html><html><head><title>Printed</title><style>p{margin:0} .b{break-before:page}</style>"
        "</head><body><h1>Alpha heading</h1><p>First page words about herons.</p>"
        "<h1 class=b>Beta heading</h1><p>Second page words about egrets.</p></body></html>"
    )
    doc = read(chromium_pdf(html, tmp_path / "c.pdf"))
    assert doc.text == "Alpha heading\nFirst page words about herons.\n\fBeta heading\nSecond page words about egrets.\n"
    assert doc.title == "Printed"


def test_a_scanned_pdf_has_no_text_layer(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 50, style="F")  # a drawing, no text: as a scan looks to a text extractor
    pdf.output(str(tmp_path / "scan.pdf"))
    with pytest.raises(Unreadable, match="no text layer — OCR is not supported"):
        read(tmp_path / "scan.pdf")


def test_encrypted_truncated_and_misnamed(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_encryption(owner_password="o", user_password="secret")
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(0, 10, "hidden words")
    pdf.output(str(tmp_path / "locked.pdf"))
    with pytest.raises(Unreadable, match="needs a password"):
        read(tmp_path / "locked.pdf")
    whole = fpdf_pages(tmp_path / "whole.pdf", OWLS).read_bytes()
    (tmp_path / "cut.pdf").write_bytes(whole[: len(whole) // 3])
    with pytest.raises(Unreadable):
        read(tmp_path / "cut.pdf")
    (tmp_path / "notes.txt").write_bytes(whole)  # a PDF saved under a text name is read as a PDF
    assert read(tmp_path / "notes.txt").paged
    (tmp_path / "plain.pdf").write_text("just text under a PDF name\n")
    assert read(tmp_path / "plain.pdf").text == "just text under a PDF name\n"


def test_page_cap(tmp_path):
    path = fpdf_pages(tmp_path / "long.pdf", [["x"]] * 12, sections=False)
    data = path.read_bytes()
    with Extractor(Limits(max_pages=10)) as ex, pytest.raises(Unreadable, match="12 pages, over the 10-page limit"):
        ex.read(detect("long.pdf", data), data)


def test_ingest_cites_pages_and_skips_with_reasons(tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    pages = [[f"Page {p} line {n} about {'owls' if p != 2 else 'herons nesting'}" for n in range(1, 5)] for p in range(1, 4)]
    fpdf_pages(folder / "paper.pdf", pages)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<\n")
    (folder / "notes.md").write_text("# Notes\n\nherons are wading birds\n")
    art = str(tmp_path / "art")
    code, out, err = run("ingest", str(folder), "--artifacts", art, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert sorted(report["added"]) == ["papers/notes.md", "papers/paper.pdf"]
    assert [(Path(s["path"]).name, s["reason"]) for s in report["skipped"]] == [
        ("broken.pdf", "not a readable PDF (Data format error)")]

    code, out, err = run("search", "herons nesting", "--artifacts", art, "--mode", "bm25", "--json", "-k", "1")
    assert code == 0, err
    hit = json.loads(out)["hits"][0] if isinstance(json.loads(out), dict) else json.loads(out)[0]
    assert hit["doc_id"] == "papers/paper.pdf"
    assert hit["page"] == 1 and hit["page_end"] == 3  # one chunk holds all three short pages

    code, out, err = run("inspect", "papers/paper.pdf#0", "--artifacts", art)
    assert code == 0, err
    assert "paper.pdf p.1 L1–p.3 L4" in out


def test_noop_resync_extracts_nothing_and_an_edit_once(tmp_path):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    for i in range(5):
        fpdf_pages(folder / f"d{i}.pdf", [[f"document {i} page {p}"] for p in range(3)])
    art = str(tmp_path / "art")
    assert run("ingest", str(folder), "--artifacts", art)[0] == 0
    before = shared().sent
    code, out, _ = run("ingest", str(folder), "--artifacts", art)
    assert code == 0 and "nothing to write" in out
    assert shared().sent == before
    fpdf_pages(folder / "d3.pdf", [["document three rewritten"]])
    code, out, _ = run("ingest", str(folder), "--artifacts", art)
    assert code == 0 and "1 changed" in out
    assert shared().sent == before + 1


def test_real_pdfs_page_counts():
    real = shared_data("documents", "pdf", "real")
    readme = (real.parent.parent / "README.md").read_text()
    expected = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("real/") and cells[1].isdigit():
            expected[cells[0][5:]] = int(cells[1])
    assert len(expected) == 19
    with Extractor() as ex:
        for name, pages in expected.items():
            data = (real / name).read_bytes()
            doc = ex.read(detect(name, data), data)
            assert doc.pages == pages, name
            assert "\f" not in doc.text.replace("\f", "", pages - 1)


def test_hostile_pdfs_are_read_or_skipped_with_a_reason_and_the_rest_indexed(tmp_path):
    import shutil

    hostile = shared_data("documents", "pdf", "hostile")
    folder = tmp_path / "mixed"
    shutil.copytree(hostile, folder)
    (folder / "ok.md").write_text("a readable note\n")
    code, out, err = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--json")
    assert code == 0, err
    assert "Traceback" not in err
    report = json.loads(out)
    assert "mixed/ok.md" in report["added"]
    names = {Path(s["path"]).name for s in report["skipped"]} | {a.split("/")[-1] for a in report["added"]}
    assert names >= {p.name for p in hostile.iterdir()}
    assert all(s["reason"] for s in report["skipped"])
    reasons = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    assert reasons["bug1782186.pdf"] == "encrypted: the PDF needs a password"


def test_a_skipped_pdf_is_not_read_again_until_it_changes(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<\n")
    fpdf_pages(folder / "ok.pdf", [["readable page"]])
    art = str(tmp_path / "art")
    code, out, _ = run("ingest", str(folder), "--artifacts", art, "--json")
    assert code == 0 and [s["reason"] for s in json.loads(out)["skipped"]] == ["not a readable PDF (Data format error)"]
    before = shared().sent
    code, out, _ = run("ingest", str(folder), "--artifacts", art, "--json")
    report = json.loads(out)
    assert code == 0 and not report["published"] and report["unchanged"] == 1
    assert [s["reason"] for s in report["skipped"]] == ["not a readable PDF (Data format error)"]
    assert shared().sent == before  # neither file was given to a reader
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n2 0 obj <<\n")
    run("ingest", str(folder), "--artifacts", art)
    assert shared().sent == before + 1


def test_export_links_pdf_chunks_to_their_page(tmp_path):
    folder = tmp_path / "lib"
    folder.mkdir()
    long_pages = [[f"page {p} sentence {n} about the migration of arctic terns" for n in range(14)] for p in range(1, 7)]
    fpdf_pages(folder / "terns.pdf", long_pages)
    (folder / "a.md").write_text("# A\n\nwords\n")
    art = str(tmp_path / "art")
    assert run("ingest", str(folder), "--artifacts", art, "--max-tokens", "64", "--overlap", "8")[0] == 0
    out = tmp_path / "site"
    code, _, err = run("export", str(out), "--artifacts", art)
    assert code == 0, err
    corpus = json.loads(next(out.rglob("corpus.json")).read_text())
    urls = corpus["chunks"]["url"]
    ids = corpus["chunks"]["id"]
    pdf_urls = [u for i, u in zip(ids, urls) if i.startswith("lib/terns.pdf#")]
    assert [u for i, u in zip(ids, urls) if i.startswith("lib/a.md#")] == ["lib/a.md#L1"]
    pages = [int(u.split("#page=")[1]) for u in pdf_urls]
    assert pages[0] == 1 and pages[-1] == 6 and pages == sorted(pages)
    # Each anchor's page is the one the chunk's citation names.
    code, out_json, _ = run("inspect", *[i for i in ids if i.startswith("lib/terns.pdf#")], "--artifacts", art, "--json")
    cited = [c["page"] for c in json.loads(out_json)] if out_json.lstrip().startswith("[") else [
        json.loads(line)["page"] for line in out_json.splitlines() if line.strip()]
    assert cited == pages


def test_resolving_a_pdf_again_does_not_extract_it_again(tmp_path):
    from ragtui.core.citations import Resolver
    from ragtui.core.index.index_format import read_index

    folder = tmp_path / "again"
    folder.mkdir()
    fpdf_pages(folder / "one.pdf", [["first page words"], ["second page words"]])
    art = tmp_path / "art"
    assert run("ingest", str(folder), "--artifacts", str(art))[0] == 0
    data = read_index(art / "rag" / "again")
    first = Resolver(data).resolve("again/one.pdf#0")
    sent = shared().sent
    second = Resolver(data).resolve("again/one.pdf#0")  # a new resolver, as the TUI makes per query
    assert shared().sent == sent and second.status == first.status == "fresh"
    fpdf_pages(folder / "one.pdf", [["first page words, edited"]])
    assert Resolver(data).resolve("again/one.pdf#0").status == "changed"
    assert shared().sent == sent + 1
