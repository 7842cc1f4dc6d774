"""HTML, DOCX, EPUB and ODT from real producers, read word for word; kinds by name and by bytes."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ragtui.core.documents import KINDS, Limits, Unreadable, by_extension, detect
from ragtui.core.documents.worker import Extractor
from tests.documents.producers import docx_report, epub_book, odt_note

PAGE = b"""<!doctype html><html><head><title>T x</title><style>a{color:red}</style><script>var x</script></head>
<body><!-- a comment --><nav>Menu</nav><h1>Hi <b>there</b></h1><p hidden>no</p><p>para &amp; one<br>two</p>
<template>tt</template><div style="color: red; display: none">hid</div><span aria-hidden="true">aria</span>
<noscript>ns</noscript><ul><li>a<li>b</ul><table><tr><th>k</th><th>v</th></tr><tr><td>1</td><td>2</td></tr></table>
<pre>  code
    indented</pre><h2>Sub</h2>text   with
   spaces</body></html>"""


def read(name: str, data: bytes, limits: Limits | None = None):
    with Extractor(limits) as ex:
        return ex.read(detect(name, data[:4096]), data)


def test_html_visible_text_blocks_headings_title():
    doc = read("page.html", PAGE)
    assert doc.text == ("Menu\n\nHi there\n\npara & one\ntwo\n\na\nb\n\nk\tv\n1\t2\n\n  code\n    indented\n\n"
                        "Sub\n\ntext with spaces\n")
    assert doc.title == "T x"
    assert [(doc.text[h.offset:h.offset + len(h.title)], h.level) for h in doc.headings] == [("Hi there", 1), ("Sub", 2)]


def test_html_charset_and_misnamed():
    latin = "<html><head><meta charset=iso-8859-1></head><body><p>caf\xe9</p></body></html>".encode("latin-1")
    assert read("x.htm", latin).text == "caf\xe9\n"
    # An extension-less file that is HTML is read as HTML; markup in a .txt stays text.
    assert read("saved_page", PAGE).kind == "html"
    assert read("notes.txt", PAGE).kind == "text"


def test_html_with_no_visible_text_is_skipped():
    with pytest.raises(Unreadable, match="no visible text"):
        read("empty.html", b"<html><head><title>t</title><script>x()</script></head><body> </body></html>")


def test_html_nested_100000_deep_is_skipped_in_bounded_time():
    data = b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"</body></html>"
    with pytest.raises(Unreadable, match="nested more than 512 deep"):
        read("deep.html", data)


def test_docx_from_python_docx(tmp_path):
    doc = read("r.docx", docx_report(tmp_path / "r.docx").read_bytes())
    assert doc.text == ("Overview\n\nThe first paragraph about kestrels.\n\nBold and plain\n\nNumbers\n\n"
                        "name\tcount\nkestrel\t3\n\nAfter the table.\n")
    assert doc.title == "Report"
    assert [(h.title, h.level) for h in doc.headings] == [("Overview", 1), ("Numbers", 2)]
    assert all(doc.text.startswith(h.title, h.offset) for h in doc.headings)


def test_epub_from_ebooklib_in_spine_order(tmp_path):
    doc = read("b.epub", epub_book(tmp_path / "b.epub").read_bytes())
    assert doc.text == "Chapter Two\n\nFinches feed.\n\nChapter One\n\nSparrows sing.\n"
    assert doc.title == "Bird Book"
    assert [h.title for h in doc.headings] == ["Chapter Two", "Chapter One"]
    assert all(doc.text.startswith(h.title, h.offset) for h in doc.headings)


def test_odt_from_odfpy(tmp_path):
    doc = read("o.odt", odt_note(tmp_path / "o.odt").read_bytes())
    assert doc.text == "Intro\n\nWrens are small.\n\nHabitat\n\nHedges and gardens.\n"
    assert doc.title == "Odt Title"
    assert [(h.title, h.level) for h in doc.headings] == [("Intro", 1), ("Habitat", 2)]


def test_kinds_by_bytes_whatever_the_name(tmp_path):
    for make, kind in ((docx_report, "docx"), (epub_book, "epub"), (odt_note, "odt")):
        data = make(tmp_path / f"x.{kind}").read_bytes()
        assert detect("renamed.bin", data[:4096]).name == kind
        assert detect("renamed.txt", data[:4096]).name == kind
    assert detect("a.md", b"# heading\n").name == "text"
    assert detect("a.pdf", b"plain words\n").name == "text"


def test_every_kind_is_one_row_with_its_extensions():
    names = [k.name for k in KINDS]
    assert names == ["text", "pdf", "html", "docx", "epub", "odt"]
    for kind in KINDS:
        for ext in kind.extensions:
            assert by_extension(f"dir/file{ext.upper()}") is kind


def test_ingest_a_mixed_folder(tmp_path):
    from ragtui import cli

    folder = tmp_path / "mixed"
    folder.mkdir()
    docx_report(folder / "report.docx")
    epub_book(folder / "birds.epub")
    odt_note(folder / "note.odt")
    (folder / "page.html").write_bytes(PAGE)
    (folder / "a.md").write_text("# A\n\nmarkdown words\n")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--json"])
    assert code == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert sorted(Path(a).name for a in report["added"]) == ["a.md", "birds.epub", "note.odt", "page.html",
                                                             "report.docx"]
    docs = [json.loads(line) for line in (tmp_path / "art" / "rag" / "mixed" / "docs.jsonl").read_text().splitlines()]
    texts = {d["doc_id"]: d["text"] for d in docs}
    assert "kestrel\t3" in texts["mixed/report.docx"]
    assert "var x" not in texts["mixed/page.html"] and "para & one" in texts["mixed/page.html"]
    assert set(docs[0]) == {"chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint"}


def test_documents_of_a_kind_whose_reader_changed_are_read_again(tmp_path, monkeypatch):
    from ragtui.core.documents.worker import shared
    from ragtui.core.ingest import walk

    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "page.html").write_bytes(PAGE)
    (folder / "a.md").write_text("# A\n\nwords\n")
    art = str(tmp_path / "art")

    def ingest() -> dict:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            assert cli_main(["ingest", str(folder), "--artifacts", art, "--json"]) == 0, err.getvalue()
        return json.loads(out.getvalue())

    ingest()
    sent = shared().sent
    assert ingest()["published"] is False and shared().sent == sent
    newer = {**walk.reader_versions(), "html": walk.reader_versions()["html"] + 1}
    monkeypatch.setattr(walk, "reader_versions", lambda: newer)
    monkeypatch.setattr("ragtui.core.ingest.writer.reader_versions", lambda: newer)
    ingest()
    assert shared().sent == sent + 1  # the HTML page, not the Markdown file
    assert ingest()["published"] is False and shared().sent == sent + 1


def cli_main(argv):
    from ragtui import cli

    return cli.main(argv)
