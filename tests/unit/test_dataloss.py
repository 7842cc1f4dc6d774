"""Ingest never loses documents: damaged indexes, bad vector rows, unreadable files, odd names, same-name folders.

The broad matrices are in tests/reliability/test_dataloss.py; these are the
focused cases, one per behaviour.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.citations import resolve
from ragtui.core.errors import EmbeddingError, IndexFormatError, UsageError
from ragtui.core.index.index_format import NORM_TOLERANCE, bad_vector_rows, read_index
from ragtui.core.ingest.journal import EmbedJournal
from ragtui.core.ingest.sync import sync
from tests.files import write
from tests.helpers.cli import run as ragtui
from tests.reliability.helpers_dataloss import as_unprivileged, real_gen, set_row, shared_base
from tests.unit.fakes import HashEmbedder
from tests.unit.test_sync import tree_snapshot

DOCS = {"a.md": "alpha rivers and hills\n", "b.md": "bravo stones and birds\n", "sub/c.md": "charlie cats and dogs\n",
        "sub/d.md": "delta omega sigma\n", "e.md": "echo theta iota\n"}


def run(folder, art, emb=None, **kw):
    return sync(folder, artifacts=art, embedder=emb or HashEmbedder(), max_tokens=16, overlap=4, **kw)


@pytest.fixture()
def docs(tmp_path):
    folder = tmp_path / "docs"
    for rel, text in DOCS.items():
        write(folder / rel, text)
    return folder


def held(art: Path, index_id: str = "docs") -> dict[str, str]:
    """doc_id -> its text as the index holds it (these documents are one chunk each)."""
    out: dict[str, str] = {}
    for r in read_index(art / "rag" / index_id).records:
        out[r.doc_id] = out.get(r.doc_id, "") + r.text + "\n"
    return out


# -- 1. a damaged index plus one edit -------------------------------------------------------------------


def _flip_keep_mtime(gen: Path) -> None:
    path = gen / "docs.jsonl"
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[data.index(b'"text":"') + 9] ^= 1
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # only ctime tells


DAMAGE = {
    "vectors.f32 truncated by 4 bytes": lambda g: os.truncate(g / "vectors.f32", os.path.getsize(g / "vectors.f32") - 4),
    "docs.jsonl byte flipped, mtime put back": _flip_keep_mtime,
    "bm25.idx deleted": lambda g: os.unlink(g / "bm25.idx"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_index_with_unchanged_files_is_rebuilt_not_called_up_to_date(docs, tmp_path, damage):
    art = tmp_path / "art"
    run(docs, art)
    DAMAGE[damage](real_gen(art))
    with pytest.raises(IndexFormatError):
        read_index(art / "rag" / "docs")
    report = run(docs, art)
    assert report.published and "every file of the folder" in report.rebuilt
    assert held(art) == {f"docs/{rel}": text for rel, text in DOCS.items()}
    before = tree_snapshot(art / "rag")
    assert not run(docs, art).published  # the no-write rule holds again for the intact index
    assert tree_snapshot(art / "rag") == before


@pytest.mark.parametrize("partial", [False, True], ids=["ingest", "partial sync"])
@pytest.mark.parametrize("damage", DAMAGE)
def test_one_edit_on_a_damaged_index_keeps_every_unchanged_document(docs, tmp_path, damage, partial):
    art = tmp_path / "art"
    run(docs, art)
    DAMAGE[damage](real_gen(art))
    write(docs / "b.md", "bravo edited: now about zeta\n")
    report = run(docs, art, paths=[docs / "b.md"] if partial else None)
    assert report.published and "every file of the folder" in report.rebuilt
    expected = {f"docs/{rel}": text for rel, text in DOCS.items()} | {"docs/b.md": "bravo edited: now about zeta\n"}
    assert held(art) == expected
    assert not run(docs, art).published


def test_an_intact_index_with_unchanged_files_writes_nothing(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    before = tree_snapshot(art / "rag")
    report = run(docs, art)
    assert not report.published and report.rebuilt is None and report.unchanged == len(DOCS)
    assert tree_snapshot(art / "rag") == before


def test_the_watch_agent_rebuilds_from_the_whole_folder_and_says_so_in_its_log(docs, tmp_path):
    from ragtui.commands.watch import _Log
    from tests.watch import Harness

    h = Harness(tmp_path)
    try:
        agent, rec = h.agent()
        assert set(held(h.artifacts)) == {f"docs/{rel}" for rel in DOCS}
        os.truncate(real_gen(h.artifacts) / "vectors.f32", 4)
        write(docs / "a.md", "alpha edited while the index was damaged\n")
        rec.wait_for(lambda: any(r.rebuilt for r in rec.publishes), "a publish that rebuilt")
        assert agent.wait_idle(30)
        report = next(r for r in rec.publishes if r.rebuilt)
        assert "every file of the folder" in report.rebuilt
        assert held(h.artifacts) == {f"docs/{rel}": text for rel, text in DOCS.items()} | {
            "docs/a.md": "alpha edited while the index was damaged\n"}
        out = io.StringIO()
        _Log(False, stream=out).report(report)
        line = out.getvalue().strip().splitlines()[-1]
        assert "published docs" in line and "note: the existing index could not be read" in line
    finally:
        h.close()


def test_cli_ingest_repairs_a_damaged_index_after_an_edit(docs, tmp_path):
    art = tmp_path / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    os.truncate(real_gen(art) / "vectors.f32", os.path.getsize(real_gen(art) / "vectors.f32") - 4)
    assert ragtui("info", "--artifacts", str(art)).returncode == 3
    write(docs / "e.md", "echo edited\n")
    r = ragtui("ingest", str(docs), "--artifacts", str(art))
    assert r.returncode == 0 and "note: the existing index could not be read" in r.stderr, r.stderr
    info = ragtui("info", "--artifacts", str(art), "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["n_documents"] == len(DOCS)
    assert "nothing to write" in ragtui("ingest", str(docs), "--artifacts", str(art)).stdout


# -- 3. vector rows ------------------------------------------------------------------------------------------


def _unit(dim=16):
    v = np.arange(1.0, dim + 1)
    return v / np.linalg.norm(v)


BAD_ROWS = {
    "zero": (np.zeros(16), "row 2 is all zeros"),
    "scaled by 1e6": (_unit() * 1e6, "row 2 has norm 1e+06"),
    "scaled by 1.01": (_unit() * 1.01, "row 2 has norm 1.01,"),
    "NaN": (np.where(np.arange(16) == 3, np.nan, _unit()), "row 2 holds a non-finite value"),
    "inf": (np.where(np.arange(16) == 3, np.inf, _unit()), "row 2 holds a non-finite value"),
    "huge (squares overflow)": (_unit() * 1e30, "row 2 has norm 1e+30"),
}


@pytest.mark.parametrize("kind", BAD_ROWS)
def test_the_reader_rejects_rows_that_are_not_finite_unit_vectors(docs, tmp_path, kind):
    art = tmp_path / "art"
    run(docs, art)
    path = real_gen(art) / "vectors.f32"
    values, message = BAD_ROWS[kind]
    path.write_bytes(set_row(path.read_bytes(), 16, 2, values))
    with pytest.raises(IndexFormatError, match=re.escape(f"vectors.f32: {message}")):
        read_index(art / "rag" / "docs")


def test_rows_within_the_stated_tolerance_are_accepted():
    assert NORM_TOLERANCE == 1e-3  # spec/index-format.md states this number
    rows = np.stack([_unit() * f for f in (1.0, 1 + 0.9e-3, 1 - 0.9e-3, 1 + 1.1e-3, 1 - 1.1e-3)]).astype(np.float32)
    assert bad_vector_rows(rows).tolist() == [3, 4]
    one_hot = np.eye(4, dtype=np.float32)
    assert bad_vector_rows(one_hot).size == 0


def test_a_scaled_row_is_re_embedded_and_never_carried_forward(docs, tmp_path):
    art, clean = tmp_path / "art", tmp_path / "clean"
    run(docs, art)
    path = real_gen(art) / "vectors.f32"
    data = read_index(art / "rag" / "docs")
    assert data.records[1].doc_id == "docs/b.md"
    text = data.records[1].text
    path.write_bytes(set_row(path.read_bytes(), 16, 1, np.asarray(data.vectors[1]) * 1e6))
    del data
    assert ragtui("info", "--artifacts", str(art)).returncode == 3
    emb = HashEmbedder()
    write(docs / "e.md", "echo edited so that something changed\n")
    report = run(docs, art, emb)
    assert report.published and report.rebuilt
    assert text in emb.embedded  # the damaged row's chunk was embedded again
    run(docs, clean)
    fixed, fresh = read_index(art / "rag" / "docs"), read_index(clean / "rag" / "docs")
    assert np.array_equal(fixed.vectors, fresh.vectors)
    assert float(np.abs(np.linalg.norm(fixed.vectors, axis=1) - 1).max()) < 1e-5


def test_an_embedder_that_returns_a_non_unit_row_publishes_nothing(docs, tmp_path):
    class Unnormalised(HashEmbedder):
        def embed(self, texts):
            return super().embed(texts) * 3.0

    art = tmp_path / "art"
    run(docs, art)
    before = tree_snapshot(art / "rag" / ".gen")
    write(docs / "a.md", "alpha edited\n")
    with pytest.raises(EmbeddingError, match="has norm 3"):
        run(docs, art, Unnormalised())
    assert tree_snapshot(art / "rag" / ".gen") == before


def test_the_embed_journal_drops_rows_that_are_not_unit_vectors(tmp_path):
    journal = EmbedJournal(tmp_path, "docs", "test-hash", 4)
    good = np.array([[1, 0, 0, 0], [0, 0.6, 0.8, 0]], dtype=np.float32)
    bad = np.array([[2, 0, 0, 0], [0, 0, 0, 0]], dtype=np.float32)
    journal.append(["aa" * 32, "bb" * 32], good)
    journal.append(["cc" * 32, "dd" * 32], bad)
    loaded = journal.load()
    assert sorted(loaded) == ["aa" * 32, "bb" * 32]
    assert np.array_equal(loaded["bb" * 32], good[1])


# -- 2. a file that cannot be read now -------------------------------------------------------------------------


def _deny(monkeypatch, denied: Path) -> None:
    import ragtui.core.ingest.scan as sync_mod

    real = sync_mod.read_file

    def read_file(path, *args, **kwargs):
        if Path(path) == denied:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sync_mod, "read_file", read_file)


@pytest.mark.parametrize("how", ["ingest", "partial sync", "state lost"])
def test_an_unreadable_file_keeps_its_chunks(docs, tmp_path, monkeypatch, how):
    art = tmp_path / "art"
    run(docs, art)
    before = held(art)
    target = docs / "sub" / "c.md"
    os.utime(target, ns=(1, 1))  # its stamp changed, so it has to be read
    if how == "state lost":
        os.unlink(art / "rag" / ".state" / "docs" / "state.bin")
    _deny(monkeypatch, target)
    report = run(docs, art, paths=[target] if how == "partial sync" else None)
    assert report.removed == []
    assert report.skipped == [(str(target), "unreadable: Permission denied (kept as it was until it can be read)")]
    assert held(art) == before
    assert "docs/sub/c.md" not in report.changed + report.added
    monkeypatch.undo()
    again = run(docs, art)  # readable again: read, found unchanged, and nothing lost
    assert again.removed == [] and again.skipped == [] and held(art) == before


def test_an_unreadable_file_keeps_its_chunks_for_real(tmp_path):
    """EACCES from the kernel: the writer runs as an unprivileged user (a forked child of root when root)."""
    base = shared_base()
    try:
        folder, art = base / "docs", base / "art"
        for rel, text in DOCS.items():
            write(folder / rel, text)
        os.chmod(folder / "sub", 0o755)

        def go(paths=None):
            return sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4,
                        paths=paths).to_json()

        as_unprivileged(go)
        before = held(art)
        (folder / "a.md").chmod(0o000)
        report = as_unprivileged(go)
        assert report["removed"] == [] and held(art) == before
        assert report["skipped"] == [{"path": str(folder / "a.md"),
                                      "reason": "unreadable: Permission denied (kept as it was until it can be read)"}]
        (folder / "a.md").chmod(0o644)
        again = as_unprivileged(go)
        assert again["removed"] == again["skipped"] == [] and held(art) == before
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_file_that_became_a_directory_or_vanished_is_still_removed(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    (docs / "a.md").unlink()
    (docs / "b.md").unlink()
    (docs / "b.md").mkdir()
    report = run(docs, art)
    assert report.removed == ["docs/a.md", "docs/b.md"]


# -- 12. CR and LF in names -----------------------------------------------------------------------------------


def test_names_with_line_breaks_are_skipped_and_every_reference_resolves(docs, tmp_path):
    art = tmp_path / "art"
    write(docs / "new\nline.md", "a name with a line feed\n")
    write(docs / "cr\r.md", "a name with a carriage return\n")
    write(docs / "bad\ndir" / "inside.md", "a folder name with a line feed\n")
    report = run(docs, art)
    reasons = {os.path.basename(p): r for p, r in report.skipped}
    assert set(reasons) == {"new\nline.md", "cr\r.md", "bad\ndir"}
    assert all("line break (CR or LF)" in r for r in reasons.values())
    data = read_index(art / "rag" / "docs")
    assert {r.doc_id for r in data.records} == {f"docs/{rel}" for rel in DOCS}
    for r in data.records:
        assert resolve(data, r.chunk_id, root=tmp_path).status == "fresh"
    # The watch agent names such a path directly: skipped the same way.
    partial = run(docs, art, paths=[docs / "new\nline.md"])
    assert not partial.published and [r for _, r in partial.skipped] == [reasons["new\nline.md"]]


# -- 13. a second folder of the same name ------------------------------------------------------------------------


def test_a_second_folder_of_the_same_name_is_refused(docs, tmp_path):
    art = tmp_path / "art"
    other = write(tmp_path / "elsewhere" / "docs" / "x.md", "another folder's note\n").parent
    run(docs, art)
    before = tree_snapshot(art / "rag")
    with pytest.raises(UsageError) as e:
        run(other, art)
    assert str(docs) in str(e.value) and str(other) in str(e.value) and "--replace" in str(e.value)
    assert e.value.exit_code == 2
    assert tree_snapshot(art / "rag") == before
    assert run(other, art, index_id="docs2").published
    assert run(other, art, replace=True).published
    assert set(held(art)) == {"docs/x.md"}
    with pytest.raises(UsageError):
        run(docs, art)


def test_a_moved_folder_takes_its_index_over(docs, tmp_path):
    art = tmp_path / "art"
    run(docs, art)
    moved = tmp_path / "moved" / "docs"
    moved.parent.mkdir()
    docs.rename(moved)
    report = run(moved, art)
    assert set(held(art)) == {f"docs/{rel}" for rel in DOCS} and not report.removed


def test_the_watch_agent_refuses_a_second_folder_of_the_same_name(docs, tmp_path):
    from ragtui.watch import WatchAgent

    art = tmp_path / "art"
    run(docs, art)
    other = write(tmp_path / "elsewhere" / "docs" / "x.md", "another folder's note\n").parent
    agent = WatchAgent(other, artifacts=art, embedder=HashEmbedder(), max_tokens=16, overlap=4)
    with pytest.raises(UsageError, match="--replace"):
        agent.run_once()
    assert set(held(art)) == {f"docs/{rel}" for rel in DOCS}


def test_cli_refuses_then_replaces(docs, tmp_path):
    art = tmp_path / "art"
    other = write(tmp_path / "elsewhere" / "docs" / "x.md", "another folder's note\n").parent
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    r = ragtui("ingest", str(other), "--artifacts", str(art))
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragtui: error: ") and str(docs) in lines[0] and str(other) in lines[0]
    r = ragtui("ingest", str(other), "--artifacts", str(art), "--replace")
    assert r.returncode == 0, r.stderr
    assert set(held(art)) == {"docs/x.md"}
