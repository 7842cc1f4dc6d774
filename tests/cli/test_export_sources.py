"""`ragtui export --with-sources`: every result link of the export is served by a static host, and nothing else is.

The export is written by the CLI in-process and served by a loopback http.server (what any static
host does): every chunk's url must answer 200 with the document's bytes as they are on disk.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ragtui import cli
from ragtui.core.export.reader import read_export
from ragtui.core.ingest.sync import sync
from tests.helpers.browser import serve
from tests.unit.fakes import HashEmbedder

STAMP = "2026-01-01T00:00:00Z"


def _export(capsys, art: Path, out: Path, *extra: str) -> tuple[int, dict | None, str]:
    code = cli.main(["export", str(out), "--artifacts", str(art), "--generated-at", STAMP, "--json", *extra])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def _ingest(folder: Path, art: Path) -> None:
    sync(folder, artifacts=art, embedder=HashEmbedder(dim=16), max_tokens=64, overlap=8)


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    (folder / "sub dir").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\nAlpha bravo charlie.\n" + "More alpha text.\n" * 40, encoding="utf-8")
    (folder / "sub dir" / "café #1.md").write_text("# Café\n\nCafé au lait and alpha.\n", encoding="utf-8")
    (folder / "b.txt").write_text("plain text about bravo and alpha\n", encoding="utf-8")
    _ingest(folder, tmp_path / "art")
    return folder


def _get(base: str, url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.parse.urljoin(base, url), timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_every_result_link_is_served_with_the_documents_bytes(capsys, tmp_path, notes):
    out = tmp_path / "site"
    code, summary, err = _export(capsys, tmp_path / "art", out, "--with-sources")
    assert code == 0, err
    assert summary["sources"] == {"folder": "notes", "documents": 3, "bytes": sum(
        p.stat().st_size for p in notes.rglob("*") if p.is_file()), "skipped": []}
    export = read_export(out)
    export.verify_text()  # the copied documents leave the search files as the format requires
    urls = export.corpora["notes"].urls
    assert any("%20" in u and "caf%C3%A9%20%231.md#L1" in u for u in urls)  # percent-encoded, as the page links
    with serve(out) as base:
        for url in urls:
            status, body = _get(base, url)
            doc_id = urllib.parse.unquote(url.split("#L")[0])
            assert status == 200, url
            assert body == (tmp_path / doc_id).read_bytes()
        assert _get(base, "notes/not-indexed.md")[0] == 404
    # Without the flag the links lead nowhere (what the flag is for).
    bare = tmp_path / "bare"
    assert _export(capsys, tmp_path / "art", bare)[0] == 0
    assert sorted(os.listdir(bare)) == ["index.html", "search"]


def test_an_export_with_sources_is_replaced_as_a_previous_export(capsys, tmp_path, notes):
    out = tmp_path / "site"
    assert _export(capsys, tmp_path / "art", out, "--with-sources")[0] == 0
    (notes / "b.txt").unlink()
    _ingest(notes, tmp_path / "art")
    code, summary, err = _export(capsys, tmp_path / "art", out, "--with-sources")
    assert code == 0, err
    assert summary["replaced"] is True and summary["sources"]["documents"] == 2
    assert not (out / "notes" / "b.txt").exists()
    # Anything else in OUT is still not ours to replace.
    (out / "mine.txt").write_text("keep me")
    code, _, err = _export(capsys, tmp_path / "art", out, "--with-sources")
    assert code == 2 and "not empty and does not hold a previous export" in err
    assert (out / "mine.txt").read_text() == "keep me"


def test_only_regular_files_inside_the_folder_are_copied(capsys, tmp_path, notes):
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret outside the folder")
    # After the ingest: one document becomes a link out, one a FIFO, one is deleted.
    (notes / "a.md").unlink()
    (notes / "a.md").symlink_to(secret)
    (notes / "b.txt").unlink()
    os.mkfifo(notes / "b.txt")  # never opened: opening a FIFO for reading would block
    (notes / "sub dir" / "café #1.md").unlink()
    out = tmp_path / "site"
    code, summary, err = _export(capsys, tmp_path / "art", out, "--with-sources")
    assert code == 0, err
    skipped = {d["doc_id"]: d["why"] for d in summary["sources"]["skipped"]}
    assert skipped == {"notes/a.md": "a link out of the folder (not followed)",
                       "notes/b.txt": "not a regular file now",
                       "notes/sub dir/café #1.md": "not readable now (No such file or directory)"}
    assert summary["sources"]["documents"] == 0
    assert not (out / "notes").exists() or list((out / "notes").rglob("*")) == []
    assert all("secret" not in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert err.count("ragtui: note: not copied: ") == 3


def test_a_folder_named_like_the_exports_own_files_is_refused(capsys, tmp_path):
    folder = tmp_path / "search"
    folder.mkdir()
    (folder / "a.md").write_text("alpha\n")
    _ingest(folder, tmp_path / "art")
    out = tmp_path / "site"
    code, _, err = _export(capsys, tmp_path / "art", out, "--with-sources")
    assert code == 2 and "is named 'search', as one of the export's own files" in err
    assert not out.exists()  # nothing written


def test_with_sources_and_verify_do_not_go_together(capsys, tmp_path, notes):
    code = cli.main(["export", "--verify", str(tmp_path / "site"), "--with-sources"])
    assert code == 2
    assert "--with-sources goes with writing an export" in capsys.readouterr().err
