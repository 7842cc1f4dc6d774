"""Citations read sources only inside the ingested folder the writer state records, never from a guessed root."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ragtui.core.citations import Resolver, resolve, resolver, source_folder, source_root
from ragtui.core.errors import IndexFormatError, UsageError
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.publish import state_dir
from ragtui.core.ingest.sync import load_state, sync
from tests.files import write

from .fakes import HashEmbedder

SECRET = "PRIVATE KEY MATERIAL that only a read of the file could show"


def crafted(home: Path, doc_id: str, text: str = SECRET):
    """Ingest ``home/docs`` (one document), then rename its doc_id in docs.jsonl; the index stays valid."""
    write(home / "docs" / "a.md", text + "\n")
    art = home / "art"
    sync(home / "docs", artifacts=art, embedder=HashEmbedder(), max_tokens=64, overlap=8)
    docs_jsonl = Path(os.path.realpath(art / "rag" / "docs")) / "docs.jsonl"
    record = json.loads(docs_jsonl.read_text(encoding="utf-8"))
    record.update(chunk_id=f"{doc_id}#0", doc_id=doc_id, uri=doc_id)
    docs_jsonl.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    return art, read_index(art / "rag" / "docs")


@pytest.fixture()
def no_reads(monkeypatch):
    monkeypatch.setattr(resolver, "read_file", lambda *a, **k: pytest.fail("a source was read"))


@pytest.mark.parametrize(
    "doc_id, words",
    [
        (".ssh/id_rsa", "not in the ingested folder 'docs'"),
        ("other/id_rsa", "not in the ingested folder 'docs'"),
        ("docs/.git/config", "hidden component '.git'"),
        ("docs/sub/.env", "hidden component '.env'"),
    ],
)
def test_doc_ids_beside_or_hidden_in_the_recorded_folder_are_refused_before_any_read(tmp_path, no_reads,
                                                                                     doc_id, words):
    home = tmp_path / "home"
    _art, data = crafted(home, doc_id)
    write(home / doc_id, SECRET + "\n")
    with pytest.raises(IndexFormatError, match=words):
        resolve(data, "docs#0")
    # --root moves the folder's parent, not its name.
    with pytest.raises(IndexFormatError, match=words):
        resolve(data, "docs#0", root=home)


def test_no_recorded_folder_refuses_instead_of_using_the_current_directory(tmp_path, monkeypatch):
    home = tmp_path / "home"
    art, data = crafted(home, "etc/passwd")
    shutil.rmtree(state_dir(art, "docs"))
    write(home / "etc" / "passwd", SECRET + "\n")
    monkeypatch.chdir(home)  # where the old default would have looked
    assert source_folder(art, "docs") is None and source_root(art, "docs") is None
    with pytest.raises(UsageError, match="pass --root DIR"):
        Resolver(data).resolve("docs#0")
    # Given explicitly, the root is used, and still no hidden first component.
    c = resolve(data, "docs#0", root=home)
    assert c.status == "fresh" and c.path == home / "etc" / "passwd"
    art2, data2 = crafted(tmp_path / "home2", ".ssh/id_rsa")
    shutil.rmtree(state_dir(art2, "docs"))
    with pytest.raises(IndexFormatError, match="hidden component '.ssh'"):
        resolve(data2, "docs#0", root=tmp_path / "home2")


def test_the_recorded_folder_and_a_hidden_ingested_folder(tmp_path):
    notes = tmp_path / "home" / ".notes"
    write(notes / "a.md", "Notes kept in a hidden folder, ingested on purpose.\n")
    art = tmp_path / "art"
    sync(notes, artifacts=art, embedder=HashEmbedder(), index_id="notes", max_tokens=64, overlap=8)
    assert source_folder(art, "notes") == notes and source_root(art, "notes") == notes.parent
    c = resolve(read_index(art / "rag" / "notes"), "notes#0")
    assert c.status == "fresh" and c.path == notes / "a.md"


@pytest.mark.parametrize("folder", ["/", "relative/docs", 7, "/a\0b"])
def test_a_state_recording_a_useless_folder_records_none(tmp_path, folder):
    art, data = crafted(tmp_path / "home", "docs/a.md")
    # Written in the earlier JSON form (which the writer still reads), where any value can be planted.
    doc = load_state(art, "docs")
    doc["folder"] = folder
    (state_dir(art, "docs") / "state.bin").unlink()
    (state_dir(art, "docs") / "files.json").write_text(json.dumps(doc), encoding="utf-8")
    assert source_folder(art, "docs") is None
    with pytest.raises(UsageError, match="--root"):
        resolve(data, "docs#0")


def test_a_link_out_of_the_real_folder_is_missing(tmp_path):
    home = tmp_path / "home"
    _art, data = crafted(home, "docs/link.md")
    write(home / "outside" / "key", SECRET + "\n")
    (home / "docs" / "link.md").symlink_to(home / "outside" / "key")
    c = resolve(data, "docs#0")
    assert c.path is None and c.status == "missing"
    # A folder inside linked out (the walk never follows one) leads out too.
    _art, data = crafted(tmp_path / "home2", "docs/sub/key")
    (tmp_path / "home2" / "docs" / "sub").symlink_to(home / "outside", target_is_directory=True)
    c = resolve(data, "docs#0")
    assert c.path is None and c.status == "missing"


def test_sources_are_read_by_the_walks_reader(tmp_path, monkeypatch):
    _art, data = crafted(tmp_path / "home", "docs/a.md")
    seen = []
    real = resolver.read_file
    monkeypatch.setattr(resolver, "read_file",
                        lambda p, n, **k: seen.append((p, n, k)) or real(p, n, **k))
    assert resolve(data, "docs#0").status == "fresh"
    [(path, bound, options)] = seen
    folder = os.path.realpath(tmp_path / "home" / "docs")
    assert path == Path(folder) / "a.md" and bound == resolver.MAX_SOURCE_BYTES and options == {"inside": folder}
