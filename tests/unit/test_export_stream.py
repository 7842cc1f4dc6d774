"""The streamed export writer writes exactly the bytes the old in-memory writer did, and fails cleanly mid-stream.

The old writer (every file built as one dict) is kept as tests/helpers/export_reference.py; the
streamed one is run with tiny block sizes too, so every boundary it cuts (postings blocks, JSON
batches, vector blocks, content shards) is crossed many times.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.errors import IndexFormatError
from ragtui.core.export import writer
from ragtui.core.export.writer import Written, export_files, export_to, write_export
from ragtui.core.index.index_format import read_index
from tests.helpers.export_reference import export_files as reference_files
from tests.unit.indexgen import build
from tests.unit.test_export import DOCS, STAMP

TINY = {"_POSTINGS_BLOCK": 1, "_BATCH": 2, "_VECTOR_BLOCK": 3}


def _many_docs(seed: int, n_docs: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    words = ["install", "pip", "Zürich", "café", "日本語", "apt", "python", "the", "a", "x" * 40, "über", "naïve"]
    kinds = [".md", ".rst", ".txt", ".adoc", "", ".MD"]
    docs = {}
    for d in range(n_docs):
        chunks = []
        for _ in range(rng.randint(1, 6)):
            lines = []
            for _ in range(rng.randint(1, 5)):
                head = rng.choice(["", "# ", "## ", "=== ", ""])
                lines.append(head + " ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
            chunks.append("\n".join(lines))
        docs[f"d{d:03d}/{rng.choice(['a', 'b c', 'é'])}{rng.choice(kinds)}"] = chunks
    return docs


@pytest.mark.parametrize("tiny", [False, True], ids=["default-blocks", "tiny-blocks"])
@pytest.mark.parametrize("docs", [DOCS, {}, _many_docs(1, 40), {"one.md": ["# Only\n\n" + ("w" * 999 + " ") * 200, "short"]}],
                         ids=["docs", "empty", "forty", "one-large-chunk"])
def test_streamed_bytes_equal_the_old_dict_writer(tmp_path, monkeypatch, docs, tiny):
    path, _, _ = build(tmp_path / "art", "docs", docs, dim=8)
    if tiny:
        for name, value in TINY.items():
            monkeypatch.setattr(writer, name, value)
    for vectors in ("i8", "f32", "none"):
        old = reference_files(read_index(path, full=True), generated_at=STAMP, vectors=vectors)
        new = export_files(read_index(path, full=False), generated_at=STAMP, vectors=vectors)
        assert sorted(new) == sorted(old)
        assert [rel for rel in old if new[rel] != old[rel]] == []


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 25), block=st.integers(1, 400))
def test_streamed_bytes_equal_the_old_dict_writer_property(tmp_path_factory, seed, n_docs, block):
    path, _, _ = build(tmp_path_factory.mktemp("art"), "p", _many_docs(seed, n_docs), dim=4, seed=seed)
    old = reference_files(read_index(path, full=True), generated_at=STAMP)
    saved = writer._POSTINGS_BLOCK
    writer._POSTINGS_BLOCK = block
    try:
        new = export_files(read_index(path, full=False), generated_at=STAMP)
    finally:
        writer._POSTINGS_BLOCK = saved
    assert new == old


def test_the_folder_written_file_by_file_holds_the_same_bytes(tmp_path):
    path, _, _ = build(tmp_path / "art", "docs", _many_docs(2, 30), dim=8)
    expected = export_files(read_index(path, full=True), generated_at=STAMP)
    written: list[Written] = []
    out = export_to(tmp_path / "site", lambda sink: written.append(
        write_export(read_index(path, full=False), sink, generated_at=STAMP)))
    found = {}
    for root, _dirs, names in os.walk(out):
        for name in names:
            full = os.path.join(root, name)
            found[os.path.relpath(full, out)] = open(full, "rb").read()
    assert found == expected
    assert written == [Written(len(expected), sum(len(b) for b in expected.values()))]


def _damage_last_line(index_path) -> None:
    docs = os.path.realpath(index_path / "docs.jsonl")
    raw = bytearray(open(docs, "rb").read())
    at = raw.rindex(b'"text":"') + len('"text":"')
    raw[at] = ord("Q") if raw[at] != ord("Q") else ord("R")  # the text no longer matches its fingerprint
    os.chmod(docs, 0o644)
    with open(docs, "wb") as f:
        f.write(raw)


def test_a_bad_line_found_mid_stream_leaves_no_export_and_no_temporary_folder(tmp_path):
    path, _, _ = build(tmp_path / "art", "docs", _many_docs(3, 30), dim=8)
    _damage_last_line(path)
    data = read_index(path, full=False)  # lazily: the damage is only seen by the export's pass
    with pytest.raises(IndexFormatError, match="fingerprint"):
        export_to(tmp_path / "site", lambda sink: write_export(data, sink, generated_at=STAMP))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_a_bad_line_mid_stream_leaves_a_previous_export_as_it_was(tmp_path):
    path, _, _ = build(tmp_path / "art", "docs", _many_docs(4, 30), dim=8)
    out = export_to(tmp_path / "site", export_files(read_index(path, full=True), generated_at=STAMP))
    before = sorted((p.relative_to(out), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    _damage_last_line(path)
    data = read_index(path, full=False)
    with pytest.raises(IndexFormatError):
        export_to(out, lambda sink: write_export(data, sink, generated_at="2027-01-01T00:00:00Z"))
    assert sorted((p.relative_to(out), p.read_bytes()) for p in out.rglob("*") if p.is_file()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art", "site"]


def test_stream_checks_the_order_rules_as_verify_does(tmp_path):
    path, _, _ = build(tmp_path / "art", "docs", {"a.md": ["one", "two"], "b.md": ["three"]}, dim=4)
    docs = os.path.realpath(path / "docs.jsonl")
    lines = open(docs, "rb").read().splitlines(keepends=True)
    os.chmod(docs, 0o644)
    with open(docs, "wb") as f:
        f.write(lines[2] + lines[0] + lines[1])  # b.md before a.md
    records = read_index(path, full=False).records
    seen = []
    with pytest.raises(IndexFormatError, match="line 2: documents are out of order"):
        for rec in records.stream():
            seen.append(rec.chunk_id)
    assert seen == ["b.md#0"]
    with pytest.raises(IndexFormatError, match="line 2: documents are out of order"):
        records.verify()
