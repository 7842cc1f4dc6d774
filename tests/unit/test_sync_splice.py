"""The incremental publish: after any edits, its four files equal a full rebuild's, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtui.core.index.bm25 import BM25Index
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import load_state, sync
from tests.files import write

from .fakes import HashEmbedder

NAMES = ["a.md", "b.txt", "sub/c.md", "sub/deep/d.md", "z.md", "Ωmega.md", "sub/e f.md"]
WORDS = ["cat", "dog", "σοφία", "東京", "mat", "the", "park", "x1", "bird", "ÉCOLE", "zebra", "alpha"]


def run(folder, art, **kw):
    return sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, **kw)


def index_bytes(art: Path, index_id: str) -> dict[str, bytes]:
    base = art / "rag" / index_id
    out = {name: (base / name).read_bytes() for name in ("docs.jsonl", "vectors.f32", "bm25.idx")}
    meta = json.loads((base / "meta.json").read_bytes())
    meta.pop("created_at")
    out["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    return out


def assert_same_as_rebuild(folder: Path, art: Path, scratch: Path) -> None:
    shutil.rmtree(scratch, ignore_errors=True)
    run(folder, scratch)
    assert index_bytes(art, folder.name) == index_bytes(scratch, folder.name)
    # The decoded BM25 arrays the writer left for readers are the file's own decoding.
    cache = art / "rag" / ".cache"
    data = read_index(art / "rag" / folder.name, cache_dir=cache)
    fresh = BM25Index.decode((art / "rag" / folder.name / "bm25.idx").read_bytes(), data.meta.k1, data.meta.b)
    for key, value in fresh.to_arrays().items():
        assert np.array_equal(np.asarray(data.bm25.to_arrays()[key]), value), key


text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=40).map(" ".join)
step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), text),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("rmdir"), st.just("sub"), st.just("")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.dictionaries(st.sampled_from(NAMES), text, min_size=1), steps=st.lists(step, min_size=1, max_size=6),
       by_paths=st.booleans())
def test_splice_equals_full_rebuild(tmp_path_factory, start, steps, by_paths):
    root = tmp_path_factory.mktemp("splice")
    folder, art, scratch = root / "docs", root / "art", root / "scratch"
    for name, body in start.items():
        write(folder / name, body)
    run(folder, art)
    for kind, name, arg in steps:
        path = folder / name
        touched = [path]
        if kind == "write":
            write(path, arg)
        elif kind == "delete" and path.exists():
            path.unlink()
        elif kind == "rename" and path.exists() and name != arg:
            (folder / arg).parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, folder / arg)
            touched.append(folder / arg)
        elif kind == "rmdir":
            shutil.rmtree(path, ignore_errors=True)
        report = run(folder, art, paths=touched if by_paths else None)
        if report.published:
            assert report.incremental
        assert_same_as_rebuild(folder, art, scratch)


def test_one_edit_reuses_everything_else(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(30):
        write(folder / f"f{i:02d}.md", f"document {i} " + "cat dog park " * (i + 3))
    run(folder, art)
    write(folder / "f07.md", "document seven rewritten about zebras")
    emb = HashEmbedder()
    report = sync(folder, artifacts=art, embedder=emb, max_tokens=12, overlap=3, paths=[folder / "f07.md"])
    assert report.incremental and report.changed == ["docs/f07.md"]
    assert emb.embedded == ["document seven rewritten about zebras"]
    assert report.chunks_added == 1 and report.chunks_removed > 0
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_a_touched_index_file_is_not_spliced(tmp_path):
    """Anything but the writer's own last generation is read and checked in full instead."""
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    write(folder / "b.md", "beta dog")
    run(folder, art)
    vectors = art / "rag" / "docs" / "vectors.f32"
    os.utime(vectors, ns=(1, 1))
    write(folder / "b.md", "beta dog edited")
    report = run(folder, art)
    assert report.published and not report.incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")
    # The full publish records the new generation's files, so the next one splices again.
    assert load_state(art, "docs")["index_files"]["vectors.f32"][0] == vectors.stat().st_size
    write(folder / "a.md", "alpha cat edited")
    assert run(folder, art).incremental


def test_a_damaged_previous_index_is_rebuilt_not_carried(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    write(folder / "b.md", "beta dog")
    run(folder, art)
    docs = art / "rag" / "docs" / "docs.jsonl"
    raw = docs.read_bytes()
    docs.write_bytes(raw.replace(b"alpha", b"ALPHA"))  # same size, fingerprint now wrong
    write(folder / "b.md", "beta dog edited")
    report = run(folder, art)
    assert report.published and not report.incremental
    assert b"ALPHA" not in docs.read_bytes()


def test_the_next_sync_starts_from_what_this_process_published(tmp_path):
    """A writer keeps the generation it just published (maps, postings, state) for its next sync."""
    from ragtui.core.ingest import sync as sync_module

    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(5):
        write(folder / f"f{i}.md", f"file {i} cat dog " * (i + 2))
    run(folder, art)
    key = (str(art), "docs")
    for i in range(4):
        write(folder / "f2.md", f"edit {i} " + "zebra park " * i)
        report = run(folder, art, paths=[folder / "f2.md"])
        assert report.incremental
        assert key in sync_module._CARRIED_INDEX and key in sync_module._CARRIED_STATE
        assert_same_as_rebuild(folder, art, tmp_path / "scratch")
    # Lost state on disk: the carried copy is not trusted over it.
    (art / "rag" / ".state" / "docs" / "files.json").unlink()
    write(folder / "f3.md", "rewritten after the state was lost")
    report = run(folder, art)
    assert report.published and not report.incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")


def test_prepare_opens_an_index_another_process_published(tmp_path):
    from ragtui.core.ingest import sync as sync_module
    from ragtui.core.ingest.sync import prepare

    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "a.md", "alpha cat")
    write(folder / "b.md", "beta dog")
    run(folder, art)  # a full build: nothing carried
    key = (str(art), "docs")
    assert key not in sync_module._CARRIED_INDEX
    assert prepare(art, "docs") and key in sync_module._CARRIED_INDEX
    write(folder / "b.md", "beta dog edited")
    assert run(folder, art, paths=[folder / "b.md"]).incremental
    assert_same_as_rebuild(folder, art, tmp_path / "scratch")
    assert not prepare(tmp_path / "nowhere", "docs")
