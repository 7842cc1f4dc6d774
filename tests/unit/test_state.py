"""The writer state on disk: a snapshot plus appended deltas, checked record by record; files.json still read."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from ragtui.core.index.index_format import FILES
from ragtui.core.ingest import scan as scan_module
from ragtui.core.ingest import state_store as state_module
from ragtui.core.ingest.state import FileEntry, FileTable, IndexSettings, IndexStamp, Stamp, WriterState, chunk_total
from ragtui.core.ingest.state_store import MAGIC, StateStore, load_state, read_state, recorded_folder
from ragtui.core.ingest.sync import sync
from tests.files import write

from .fakes import HashEmbedder

SETTINGS = IndexSettings("m", 4, "t", 12, 3, 1.2, 0.75)


def a_state(n: int = 50) -> WriterState:
    files = {
        f"docs/f{i:03d}.md": FileEntry(Stamp(i, 10**18 + i, -5 + i, 7 + i), f"{i:064x}", i % 3) for i in range(n)
    }
    files["docs/Ωmega é.md"] = FileEntry(Stamp(1, -1, 2, (1 << 64) - 1), "ab" * 32, 0)  # a huge inode, a time before 1970
    files["docs/unread.md"] = FileEntry(None, None, None)
    stamp = IndexStamp("/x/.gen/docs/g1", tuple(Stamp(k, k, k, k) for k in range(len(FILES))))
    return WriterState("/home/u/docs", SETTINGS, {"include": None, "exclude": ["x"]}, "/x/g1:5:6", stamp, files)


def test_round_trip_through_a_snapshot(tmp_path):
    store = StateStore(tmp_path, "docs")
    state = a_state()
    assert store.save(state)
    assert store.path.read_bytes().startswith(MAGIC)
    assert read_state(tmp_path, "docs") == state
    assert recorded_folder(tmp_path, "docs") == "/home/u/docs"
    assert load_state(tmp_path, "docs")["root"] == "/home/u"


def test_a_save_appends_only_what_changed(tmp_path):
    store = StateStore(tmp_path, "docs")
    state = a_state(2000)
    store.save(state)
    snapshot = store.path.stat()
    files = dict(state.files)
    files["docs/f007.md"] = files["docs/f007.md"]._replace(sha256="cd" * 32, n_chunks=9)
    del files["docs/f008.md"]
    files["docs/new.md"] = FileEntry(Stamp(1, 2, 3, 4), "ef" * 32, 1)
    nxt = WriterState(state.folder, state.settings, state.walk, "/x/g2:5:6", state.index_files, files)
    assert store.save(nxt)
    after = store.path.stat()
    assert after.st_ino == snapshot.st_ino  # appended, not rewritten
    assert 0 < after.st_size - snapshot.st_size < 1024 < snapshot.st_size
    assert read_state(tmp_path, "docs") == nxt
    assert StateStore(tmp_path, "docs").current() == nxt  # another process reads the same


def test_a_save_told_what_changed_writes_the_same_state(tmp_path):
    """With the changed doc_ids given, the delta looks at those alone: read back, the same state as a full compare."""
    state = a_state(2000)
    files = dict(state.files)
    files["docs/f007.md"] = files["docs/f007.md"]._replace(sha256="cd" * 32, n_chunks=9)
    del files["docs/f008.md"]
    files["docs/new.md"] = FileEntry(Stamp(1, 2, 3, 4), "ef" * 32, 1)
    nxt = WriterState(state.folder, state.settings, state.walk, "/x/g2:5:6", state.index_files, files)
    records = {}
    for name, changed in (("full", None), ("told", ["docs/new.md", "docs/f008.md", "docs/f007.md", "docs/f009.md",
                                                    "docs/not-there.md"])):
        store = StateStore(tmp_path / name, "docs")
        store.save(state)
        size = store.path.stat().st_size
        assert store.save(nxt, changed)
        assert read_state(tmp_path / name, "docs") == nxt
        records[name] = store.path.read_bytes()[size:]
    assert records["told"] == records["full"]


def test_partial_syncs_keep_the_state_a_whole_walk_would_write(tmp_path):
    """Saves named by path (as the watch agent names them) record exactly what a whole walk finds afterwards."""
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(40):
        write(folder / "sub" / f"f{i:02d}.md", f"document {i} " + "cat dog park " * 5)
    kw = dict(artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    sync(folder, **kw)
    write(folder / "sub" / "f03.md", "rewritten " * 30)
    (folder / "sub" / "f04.md").unlink()
    write(folder / "new.md", "a new one " * 20)
    os.utime(folder / "sub" / "f05.md", ns=(1, 2))  # only its stamp changes
    assert sync(folder, paths=[folder / "sub" / n for n in ("f03.md", "f04.md", "f05.md")] + [folder / "new.md"],
                **kw).incremental
    (folder / "sub" / "deeper").mkdir()
    for i in range(6, 9):
        os.rename(folder / "sub" / f"f{i:02d}.md", folder / "sub" / "deeper" / f"f{i:02d}.md")
    assert sync(folder, paths=[folder / "sub"], **kw).incremental
    after_partial = read_state(art, "docs")
    whole = sync(folder, **kw)  # a whole walk: anything the partial saves missed, it would find and write
    assert (whole.added, whole.changed, whole.removed, whole.published) == ([], [], [], False)
    assert read_state(art, "docs") == after_partial
    assert chunk_total(after_partial.files) == sum(e.n_chunks or 0 for e in after_partial.files.values()) > 0


def test_a_torn_delta_ends_the_state_at_the_record_before(tmp_path):
    store = StateStore(tmp_path, "docs")
    first = a_state()
    store.save(first)
    second = WriterState(first.folder, first.settings, first.walk, "/x/g2:5:6", first.index_files, {})
    store.save(second)
    raw = store.path.read_bytes()
    store.path.write_bytes(raw[:-3])  # killed while appending
    assert read_state(tmp_path, "docs") == first
    # The next save does not append after the torn bytes: it rewrites the file.
    again = StateStore(tmp_path, "docs")
    assert again.current() == first and again.save(second)
    assert read_state(tmp_path, "docs") == second
    assert len(store.path.read_bytes()) < len(raw)


@pytest.mark.parametrize("where", ["magic", "snapshot", "length"])
def test_damage_to_the_snapshot_discards_the_state(tmp_path, where):
    store = StateStore(tmp_path, "docs")
    store.save(a_state())
    raw = bytearray(store.path.read_bytes())
    if where == "magic":
        raw[0] ^= 1
    elif where == "snapshot":
        raw[len(raw) // 2] ^= 0x40
    else:
        struct.pack_into("<I", raw, len(MAGIC), 1 << 31)  # a record longer than the file
    store.path.write_bytes(bytes(raw))
    assert read_state(tmp_path, "docs") is None and load_state(tmp_path, "docs") == {}


def _record(body: bytes) -> bytes:
    import zlib

    return struct.pack("<II", len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("counts", [(2, 1 << 31, 0, 0), (2, 0, 5, 0), (200, 0, 0, 0)])
def test_crafted_counts_are_refused_without_allocating(tmp_path, counts):
    """A record whose counts promise more than it holds (with a valid CRC) ends the state; nothing is allocated for it."""
    store = StateStore(tmp_path, "docs")
    store.save(a_state())
    body = struct.pack("<IIII", *counts) + b"{}"
    with open(store.path, "ab") as f:
        f.write(_record(body))
    assert read_state(tmp_path, "docs") == a_state()  # the snapshot before it still stands


def test_a_delta_deleting_what_is_not_there_discards_the_state(tmp_path):
    store = StateStore(tmp_path, "docs")
    store.save(a_state())
    name = b"docs/never.md"
    body = struct.pack("<IIII", 2, 0, 1, len(name)) + b"{}" + name
    with open(store.path, "ab") as f:
        f.write(_record(body))
    assert read_state(tmp_path, "docs") is None


def test_deltas_are_folded_into_a_snapshot_once_they_outgrow_it(tmp_path, monkeypatch):
    monkeypatch.setattr(state_module, "COMPACT_RECORDS", 3)
    store = StateStore(tmp_path, "docs")
    state = a_state(10)
    store.save(state)
    inodes = set()
    for i in range(8):
        files = {**state.files, "docs/f001.md": FileEntry(Stamp(i, i, i, i), "00" * 32, i)}
        state = WriterState(state.folder, state.settings, state.walk, f"/x/g{i}:1:1", state.index_files, files)
        assert store.save(state)
        inodes.add(store.path.stat().st_ino)
        assert read_state(tmp_path, "docs") == state
    assert len(inodes) >= 2  # rewritten at least once along the way


def test_the_earlier_json_state_is_read_and_replaced_at_the_next_save(tmp_path, monkeypatch):
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(6):
        write(folder / f"f{i}.md", f"document {i} cat dog")

    def run(**kw):
        return sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, **kw)

    run()
    state_dir = art / "rag" / ".state" / "docs"
    legacy = state_dir / "files.json"
    legacy.write_text(json.dumps(load_state(art, "docs")), encoding="utf-8")  # as an earlier version wrote it
    (state_dir / "state.bin").unlink()
    before = legacy.stat()
    # Nothing changed: nothing is read, nothing is written (the earlier state is trusted as it is).
    monkeypatch.setattr(scan_module, "read_file", lambda *a, **k: pytest.fail("a document was read"))
    report = run()
    assert not report.published and report.unchanged == 6
    assert sorted(os.listdir(state_dir)) == ["files.json"] and legacy.stat().st_mtime_ns == before.st_mtime_ns
    monkeypatch.undo()
    write(folder / "f2.md", "document two edited")
    report = run(paths=[folder / "f2.md"])
    assert report.incremental and report.changed == ["docs/f2.md"]
    assert sorted(os.listdir(state_dir)) == ["state.bin"]
    assert read_state(art, "docs") is not None and read_state(art, "docs").files["docs/f2.md"].n_chunks == 1


def test_a_publish_appends_one_small_record(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(300):
        write(folder / f"f{i:03d}.md", f"document {i} " + "cat dog park " * 5)
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    path = Path(art / "rag" / ".state" / "docs" / "state.bin")
    size = path.stat().st_size
    write(folder / "f150.md", "rewritten")
    assert sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3,
                paths=[folder / "f150.md"]).incremental
    assert 0 < path.stat().st_size - size < 1024 < size


def test_a_snapshot_is_read_as_columns_and_behaves_as_the_dict_it_was(tmp_path):
    """state.bin's snapshot stays numpy columns (a no-op sync of 100k files builds nothing per document)."""
    store = StateStore(tmp_path, "docs")
    state = a_state(300)
    store.save(state)
    got = read_state(tmp_path, "docs")
    assert got is not None and isinstance(got.files, FileTable)
    table = got.files
    assert dict(table.items()) == state.files and table.as_dict() == state.files and len(table) == len(state.files)
    assert "docs/Ωmega é.md" in table and "docs/absent.md" not in table and table.get("docs/absent.md") is None
    assert table["docs/Ωmega é.md"].stamp == Stamp(1, -1, 2, (1 << 64) - 1)  # unsigned inode, time before 1970
    assert table["docs/unread.md"] == FileEntry(None, None, None)
    assert chunk_total(table) == chunk_total(state.files) == sum(i % 3 for i in range(300))


def test_same_stamps_compares_in_any_order_and_misses_nothing(tmp_path):
    store = StateStore(tmp_path, "docs")
    files = {f"d/f{i}.md": FileEntry(Stamp(i, i, i, (1 << 64) - i - 1), "ab" * 32, 1) for i in range(50)}
    store.save(WriterState("/d", SETTINGS, {}, None, None, files))
    state = read_state(tmp_path, "docs")
    assert state is not None and isinstance(state.files, FileTable)
    table = state.files
    names = list(reversed(files))
    stamps = [tuple(files[n].stamp) for n in names]
    assert table.same_stamps(names, stamps)
    assert table.same_stamps(list(files), [tuple(e.stamp) for e in files.values()])
    assert not table.same_stamps(names[:-1], stamps[:-1])  # one document fewer
    assert not table.same_stamps([*names[:-1], "d/other.md"], stamps)  # one replaced by another
    changed = [*stamps[:-1], (stamps[-1][0], stamps[-1][1] + 1, stamps[-1][2], stamps[-1][3])]
    assert not table.same_stamps(names, changed)  # one touched


def test_a_document_without_a_stamp_is_never_taken_as_unchanged(tmp_path):
    store = StateStore(tmp_path, "docs")
    store.save(a_state(3))
    table = read_state(tmp_path, "docs").files
    assert isinstance(table, FileTable)
    names = list(table)
    stamps = [tuple(table[n].stamp) if table[n].stamp is not None else (0, 0, 0, 0) for n in names]
    assert not table.same_stamps(names, stamps)


def test_a_name_written_twice_counts_once_and_is_no_no_op():
    import numpy as np

    nums = np.zeros((5, 2), dtype="<i8")
    table = FileTable(["d/a.md", "d/a.md"], nums, np.full(2, 3, dtype=np.uint8), bytes(64))
    assert len(table) == 1 and list(table) == ["d/a.md"]
    assert not table.same_stamps(["d/a.md", "d/b.md"], [(0, 0, 0, 0)] * 2)


@pytest.mark.parametrize("flag, count", [(4, 1), (3, -2)])
def test_a_snapshot_row_with_an_unknown_flag_or_count_discards_the_state(tmp_path, flag, count):
    name = b"docs/a.md"
    nums = struct.pack("<5q", 1, 2, 3, 4, count)
    body = struct.pack("<IIII", 2, 1, 0, len(name)) + b"{}" + name + nums + bytes([flag]) + bytes(32)
    path = tmp_path / "rag" / ".state" / "docs" / "state.bin"
    path.parent.mkdir(parents=True)
    path.write_bytes(MAGIC + _record(body))
    assert read_state(tmp_path, "docs") is None


def test_a_no_op_sync_after_deltas_is_still_recognised(tmp_path):
    """With a delta record after the snapshot the no-op is recognised all the same."""
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(30):
        write(folder / f"f{i:02d}.md", f"document {i} about cats")
    sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3)
    write(folder / "f07.md", "rewritten about dogs")
    assert sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3).published
    state = read_state(art, "docs")
    assert state is not None and isinstance(state.files, FileTable)  # snapshot + one delta, folded as columns
    path = art / "rag" / ".state" / "docs" / "state.bin"
    before = path.stat()
    emb = HashEmbedder()
    report = sync(folder, artifacts=art, embedder=emb, max_tokens=12, overlap=3)
    assert not report.published and report.unchanged == 30 and emb.embedded == []
    assert report.chunks_total == sum(e.n_chunks for e in state.files.values())
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_deltas_that_delete_replace_and_put_back_fold_into_the_right_columns(tmp_path):
    """Many saves appended as deltas (puts, deletes, a name deleted then put back, one put then deleted)
    read back as exactly the last state, still as columns."""
    store = StateStore(tmp_path, "docs")
    state = a_state(40)
    assert store.save(state)
    files = dict(state.files)
    steps = [
        lambda f: f.pop("docs/f001.md"),
        lambda f: f.__setitem__("docs/f001.md", FileEntry(Stamp(9, 9, 9, 9), "09" * 32, 4)),  # put back
        lambda f: f.__setitem__("docs/f002.md", f["docs/f002.md"]._replace(n_chunks=7)),  # replaced
        lambda f: f.__setitem__("docs/new.md", FileEntry(Stamp(1, 2, 3, 4), "ef" * 32, 1)),
        lambda f: f.pop("docs/new.md"),  # put by one delta, deleted by the next
        lambda f: [f.pop(k) for k in [k for k in f if k.startswith("docs/f03")]],
        lambda f: f.__setitem__("docs/unread.md", FileEntry(Stamp(5, 5, 5, 5), "55" * 32, 2)),
    ]
    inode = store.path.stat().st_ino
    for i, step in enumerate(steps):
        step(files)
        state = WriterState(state.folder, state.settings, state.walk, f"/x/g{i}:1:1", state.index_files, dict(files))
        assert store.save(state)
        got = read_state(tmp_path, "docs")
        assert got == state and isinstance(got.files, FileTable), i
        assert chunk_total(got.files) == chunk_total(files)
    assert store.path.stat().st_ino == inode  # every save appended
