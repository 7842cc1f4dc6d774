"""A PDF result in the TUI: its page in the detail pane and the source view, `e` opens the viewer at the page."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from ragtui.tui.backend import viewer_command
from ragtui.tui.screens.source import SourceScreen
from tests.documents.producers import fpdf_pages
from tests.tui import ingest, make_app, ready, search, settled, wait_for


def test_viewer_commands():
    none = {}
    pdf = Path("/d/paper.pdf")
    assert viewer_command(pdf, 12, {"RAGTUI_PDF_VIEWER": "zathura"}, lambda n: None) == (
        ["zathura", "-P", "12", "/d/paper.pdf"], None)
    assert viewer_command(pdf, 3, {"RAGTUI_PDF_VIEWER": "myview --page={page} {path}"}, lambda n: None) == (
        ["myview", "--page=3", "/d/paper.pdf"], None)
    assert viewer_command(pdf, 5, none, lambda n: "/usr/bin/evince" if n == "evince" else None) == (
        ["/usr/bin/evince", "-i", "5", "/d/paper.pdf"], None)
    assert viewer_command(pdf, 5, none, lambda n: "/usr/bin/okular" if n == "okular" else None)[0][1:3] == ["-p", "5"]
    argv, notice = viewer_command(pdf, 7, none, lambda n: None)
    assert argv == ["xdg-open", "/d/paper.pdf"] and "go to page 7" in notice


async def test_a_pdf_hit_shows_its_page_and_opens_the_viewer_there(tmp_path, monkeypatch):
    folder = tmp_path / "src" / "papers"
    folder.mkdir(parents=True)
    pages = [[f"page {p} line {n} plain words" for n in range(1, 16)] for p in range(1, 4)]
    pages[2][4] = "the albatross glides for hours over the southern ocean"
    fpdf_pages(folder / "ocean.pdf", pages)
    artifacts = tmp_path / "artifacts"
    ingest(folder, artifacts)
    record = tmp_path / "viewer-args"
    viewer = tmp_path / "viewer"
    viewer.write_text(f"#!{sys.executable}\nimport sys\nopen({str(record)!r}, 'w').write('\\n'.join(sys.argv[1:]))\n")
    viewer.chmod(viewer.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("RAGTUI_PDF_VIEWER", f"{viewer} --page={{page}} {{path}}")
    app = make_app(artifacts)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "albatross southern ocean")
        await pilot.press("escape")
        await settled(pilot)
        await wait_for(pilot, lambda: app.main.detail.citation is not None, "the citation")
        c = app.main.detail.citation
        assert c.doc_id == "papers/ocean.pdf" and c.page == 3
        assert c.place.startswith("p.3 L")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
        head = str(app.screen.query_one("#source-head").render())
        assert c.place in head
        await pilot.press("e")
        await wait_for(pilot, record.exists, "the viewer's record")
        assert record.read_text().splitlines() == ["--page=3", str(folder / "ocean.pdf")]
