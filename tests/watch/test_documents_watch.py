"""The agent reads PDFs as ingest does: a PDF saved into the watched folder becomes searchable, an
edit re-extracts it once, and a broken one is skipped while the rest is kept."""

from __future__ import annotations

import os

import pytest

from tests.documents.producers import fpdf_pages
from tests.watch import harness_for, indexed, write

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


def test_pdf_saved_edited_and_broken(harness, tmp_path):
    write(harness.folder / "a.md", "alpha text about cats\n")
    agent, rec = harness.agent(quiet_seconds=1.0)
    made = fpdf_pages(tmp_path / "owls.pdf", [["owls hunt at night"], ["owls nest in trees"]])
    os.replace(made, harness.folder / "owls.pdf")  # as a browser finishes a download: one rename
    rec.wait_for(lambda: "docs/owls.pdf" in indexed(harness.artifacts), "the PDF to be indexed")
    assert indexed(harness.artifacts)["docs/owls.pdf"] == "owls hunt at night\n\fowls nest in trees"
    n = len(rec.publishes)
    fpdf_pages(tmp_path / "owls2.pdf", [["owls hunt at dusk"]])
    os.replace(tmp_path / "owls2.pdf", harness.folder / "owls.pdf")
    rec.wait_for(lambda: indexed(harness.artifacts).get("docs/owls.pdf") == "owls hunt at dusk", "the edit")
    assert len(rec.publishes) == n + 1 and rec.publishes[-1].changed == ["docs/owls.pdf"]
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.7\nnot really\n")
    os.replace(tmp_path / "bad.pdf", harness.folder / "bad.pdf")
    write(harness.folder / "b.md", "beta arrives after the broken PDF\n")
    rec.wait_for(lambda: "docs/b.md" in indexed(harness.artifacts), "b.md beside the broken PDF")
    assert set(indexed(harness.artifacts)) == {"docs/a.md", "docs/b.md", "docs/owls.pdf"}
