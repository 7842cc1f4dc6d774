"""--no-documents and [ingest] kinds narrow what is read; ragtui info lists kinds and skips."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout

from tests.documents.producers import docx_report, fpdf_pages


def run(*argv: str) -> tuple[int, str, str]:
    from ragtui import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def folder_of_kinds(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    fpdf_pages(folder / "paper.pdf", [["a page about terns"]])
    docx_report(folder / "report.docx")
    (folder / "page.html").write_text("<html><body><p>html words</p></body></html>")
    (folder / "notes.md").write_text("# Notes\n\nmarkdown words\n")
    (folder / "locked.pdf").write_bytes(b"%PDF-1.4\ntruncated")
    return folder


def test_no_documents_reads_text_only(tmp_path):
    folder = folder_of_kinds(tmp_path)
    code, out, err = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--no-documents", "--json")
    assert code == 0, err
    assert json.loads(out)["added"] == ["docs/notes.md"]


def test_ingest_kinds_setting(tmp_path):
    folder = folder_of_kinds(tmp_path)
    cfg = tmp_path / "ragtui.toml"
    cfg.write_text('[ingest]\nkinds = ["text", "pdf"]\n')
    code, out, err = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--config", str(cfg), "--json")
    assert code == 0, err
    assert sorted(json.loads(out)["added"]) == ["docs/notes.md", "docs/paper.pdf"]
    cfg.write_text('[ingest]\nkinds = ["text", "pdfs"]\n')
    code, out, err = run("ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--config", str(cfg))
    assert code == 2
    assert err.startswith("ragtui: error: ") and "unknown kind 'pdfs'" in err and "Traceback" not in err


def test_info_lists_kinds_and_skips(tmp_path):
    folder = folder_of_kinds(tmp_path)
    art = str(tmp_path / "art")
    assert run("ingest", str(folder), "--artifacts", art)[0] == 0
    code, out, err = run("info", "--artifacts", art, "--index", "docs", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["kinds"] == {"docx": 1, "html": 1, "pdf": 1, "text": 1}
    assert [(s["doc_id"], s["reason"]) for s in info["skipped"]] == [
        ("docs/locked.pdf", "not a readable PDF (Data format error)")]
    code, out, _ = run("info", "--artifacts", art, "--index", "docs")
    assert "kinds: docx 1, html 1, pdf 1, text 1" in out
    assert "docs/locked.pdf: not a readable PDF (Data format error)" in out
