"""Hostile documents of every kind end in a skip with a reason, within time and memory bounds, and
the rest of the folder is indexed."""

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ragtui.core.documents import Limits, Unreadable, detect
from ragtui.core.documents.worker import Extractor, set_limits
from tests.documents.hostile import (
    lie_about_size,
    pdf_inflation_bomb,
    pdf_pages,
    replace_member,
    set_encrypted_flag,
)
from tests.documents.producers import docx_report, epub_book, fpdf_pages, odt_note


def read(name: str, data: bytes, limits: Limits | None = None):
    with Extractor(limits) as ex:
        return ex.read(detect(name, data[:4096]), data)


def test_zip_bombs_by_directory_and_by_counting(tmp_path):
    docx = docx_report(tmp_path / "r.docx").read_bytes()
    zeros = b"<w:document xmlns:w='http://schemas.openxmlformats.org/wordprocessingml/2006/main'>" + b" " * (64 << 20)
    bomb = replace_member(docx, "word/document.xml", zeros)
    assert len(bomb) < 1 << 20
    with pytest.raises(Unreadable, match="a decompression bomb"):
        read("bomb.docx", bomb)  # the directory says 64 MiB from 64 KiB
    liar = lie_about_size(bomb, "word/document.xml", 1000)
    # The directory says 1,000 bytes: inflating stops there (the member's check then fails).
    with pytest.raises(Unreadable, match="inflates past its declared size|cannot be inflated"):
        read("liar.docx", liar)
    epub = epub_book(tmp_path / "b.epub").read_bytes()
    ebomb = lie_about_size(replace_member(epub, "EPUB/c1.xhtml", b"<p>" + b"a" * (64 << 20)), "EPUB/c1.xhtml", 500)
    with pytest.raises(Unreadable, match="decompression bomb|cannot be inflated"):
        read("bomb.epub", ebomb)
    big = replace_member(docx, "word/document.xml", zeros[: 2 << 20])
    with pytest.raises(Unreadable, match="over the 1,048,576-byte limit"):
        read("big.docx", big, Limits(max_inflated=1 << 20, max_ratio=10**6))


def test_entities_encryption_truncation(tmp_path):
    docx = docx_report(tmp_path / "r.docx").read_bytes()
    laughs = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
              b"<w:document xmlns:w='http://schemas.openxmlformats.org/wordprocessingml/2006/main'>&lol2;</w:document>")
    with pytest.raises(Unreadable, match="never expands"):
        read("laughs.docx", replace_member(docx, "word/document.xml", laughs))
    with pytest.raises(Unreadable, match="encrypted .docx"):
        read("locked.docx", set_encrypted_flag(docx))
    for make, name in ((docx_report, "t.docx"), (epub_book, "t.epub"), (odt_note, "t.odt")):
        whole = make(tmp_path / name).read_bytes()
        with pytest.raises(Unreadable, match="broken"):
            read(name, whole[: len(whole) // 2])


def test_ten_thousand_pages_are_over_the_page_cap():
    with pytest.raises(Unreadable, match="10,000 pages, over the 5,000-page limit"):
        read("long.pdf", pdf_pages(10_000))


def _peak_rss_kib() -> int:
    """This process's resident high-water mark (VmHWM) since the last ``_reset_peak_rss``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


def _reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets the high-water mark to the current resident size (Linux >= 4.0), so
    # what earlier tests of this process held does not count.
    Path("/proc/self/clear_refs").write_text("5")


def test_a_small_pdf_that_inflates_to_a_gigabyte_costs_one_worker():
    bomb = pdf_inflation_bomb(1 << 30)
    _reset_peak_rss()
    before = _peak_rss_kib()
    assert len(bomb) < 4096
    with Extractor(Limits(memory=512 << 20)) as ex:
        with pytest.raises(Unreadable) as e:
            ex.read(detect("bomb.pdf", bomb), bomb)
        assert "crashed" in str(e.value) or "memory" in str(e.value) or "no text layer" in str(e.value)
        data = pdf_pages(2)  # the same extractor goes on reading other files
        assert ex.read(detect("two.pdf", data), data).pages == 2
    # This process never held the inflated stream: its peak grew by far less than the gigabyte.
    assert _peak_rss_kib() - before < 256 << 10  # KiB


def test_a_file_past_the_wall_deadline_is_stopped():
    # The depth judged before parsing is lifted, so the parser meets 100,000 nested elements (minutes).
    data = b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"</body></html>"
    with Extractor(Limits(seconds=1.0, max_depth=10**9)) as ex:
        with pytest.raises(Unreadable, match="took longer than 1 s to read"):
            ex.read(detect("deep.html", data), data)
        assert ex.read(detect("ok.html", b"<p>fine</p>"), b"<p>fine</p>").text == "fine\n"


def test_a_folder_of_hostile_files_still_ingests_the_rest(tmp_path):
    from ragtui import cli

    folder = tmp_path / "hostile"
    folder.mkdir()
    docx = docx_report(tmp_path / "r.docx").read_bytes()
    (folder / "bomb.pdf").write_bytes(pdf_inflation_bomb(1 << 30))
    (folder / "long.pdf").write_bytes(pdf_pages(10_000))
    (folder / "liar.docx").write_bytes(lie_about_size(
        replace_member(docx, "word/document.xml", b"<a>" + b" " * (8 << 20)), "word/document.xml", 100))
    epub = epub_book(tmp_path / "b.epub").read_bytes()
    (folder / "cut.epub").write_bytes(epub[: len(epub) // 2])
    (folder / "deep.html").write_bytes(b"<div>" * 100_000)
    (folder / "fake.docx").write_text("not a zip at all, just words\n")
    fpdf_pages(folder / "good.pdf", [["a good page about plovers"]])
    (folder / "good.md").write_text("# Good\n\nplovers\n")
    set_limits(Limits(memory=512 << 20))
    try:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(["ingest", str(folder), "--artifacts", str(tmp_path / "art"), "--json"])
    finally:
        set_limits(Limits())
    assert code == 0, err.getvalue()
    assert "Traceback" not in err.getvalue()
    report = json.loads(out.getvalue())
    assert sorted(Path(a).name for a in report["added"]) == ["fake.docx", "good.md", "good.pdf"]
    reasons = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    assert set(reasons) == {"bomb.pdf", "long.pdf", "liar.docx", "cut.epub", "deep.html"}
    assert "page limit" in reasons["long.pdf"]
    assert "decompression bomb" in reasons["liar.docx"] or "cannot be inflated" in reasons["liar.docx"]
    assert "broken .epub" in reasons["cut.epub"]
    assert "nested more than" in reasons["deep.html"]


def test_an_idle_worker_that_ended_is_replaced():
    data = pdf_pages(1)
    with Extractor(workers=1) as ex:
        assert ex.read(detect("a.pdf", data), data).pages == 1
        [worker] = ex._idle
        worker.proc.kill()
        worker.proc.wait()
        assert ex.read(detect("a.pdf", data), data).pages == 1
