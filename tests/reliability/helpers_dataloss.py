"""Data loss: a damaged index, bad vector rows, an unreadable file, a folder of the same name.

Generators of cases (one row each in the docs tables):

* ``damaged_resync_cases``: each kind of damage to a published generation ×
  {ingest of the unchanged folder, ingest after one edit, the watch agent's
  partial sync of the edited path}: the sync rebuilds from every file of the
  folder (no document lost: the result equals a clean build), says so in
  ``report.rebuilt``, and the next sync writes nothing;
* ``bad_row_cases``: zero, scaled, NaN, ±inf, tiny and huge rows at the
  first, a middle and the last row: the reader rejects them (naming the row),
  an ingest re-embeds them (the result equals a clean build); rows within the
  tolerance are accepted;
* ``unreadable_cases``: a file or folder that exists but cannot be
  read now (real EACCES: as an unprivileged user when the tests run as root)
  keeps its chunks, is reported as skipped, and is picked up again once it
  can be read;
* ``same_folder_name_cases``: ``ragtui ingest`` of a second folder with the
  same name exits 2 naming both folders and leaves the first index as it was;
  ``--replace`` and ``--index`` are the ways out; the same folder by another
  path is not refused.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import struct
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ragtui.core.errors import IndexFormatError, IndexMissingError
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import sync
from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run
from tests.reliability.cases import Case
from tests.reliability.helpers import (
    MAX_TOKENS,
    OVERLAP,
    doc_text,
    leftovers,
    run_sync,
    snapshot,
    write,
)
from tests.unit.fakes import HashEmbedder

N_DOCS = 6
EDITED = "doc1.md"


def real_gen(art: Path, index_id: str = "docs") -> Path:
    """The generation directory the index link names now."""
    return Path(os.path.realpath(art / "rag" / index_id))


def make_docs(folder: Path, n: int = N_DOCS) -> Path:
    for i in range(n):
        write(folder / ("sub" if i % 3 == 0 else "") / f"doc{i}.md", doc_text(i))
    return folder


def clean_build(folder: Path, base: Path) -> dict[str, bytes]:
    """The snapshot of a build of ``folder`` from scratch (the reference for "no document lost")."""
    art = base / "clean-art"
    shutil.rmtree(art, ignore_errors=True)
    run_sync(folder, art)
    out = snapshot(art / "rag" / "docs")
    shutil.rmtree(art, ignore_errors=True)
    return out


def _assert(ok: bool, what: str = "") -> None:
    if not ok:
        raise AssertionError(what)


# -- damage to a published generation ----------------------------------------------------------------


def _rewrite(path: Path, change: Callable[[bytes], bytes], keep_times: bool = False) -> None:
    st = os.stat(path)
    with open(path, "r+b") as f:  # in place: same inode, as a stray write or a disk error would do
        data = change(f.read())
        f.seek(0)
        f.write(data)
        f.truncate(len(data))
    if keep_times:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _flip_text_byte(data: bytes) -> bytes:
    i = data.index(b'"text":"') + 10
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :]


def set_row(data: bytes, dim: int, row: int, values: np.ndarray) -> bytes:
    """vectors.f32 bytes with row ``row`` (negative counts from the end) replaced by ``values``."""
    n = len(data) // (4 * dim)
    row %= n
    return data[: row * dim * 4] + np.asarray(values, dtype="<f4").tobytes() + data[(row + 1) * dim * 4 :]


def _scale_row(factor: float, row: int = 0):
    def change(data: bytes) -> bytes:
        dim = HashEmbedder().dim
        old = np.frombuffer(data, dtype="<f4").reshape(-1, dim)[row % (len(data) // (4 * dim))]
        return set_row(data, dim, row, old * np.float32(factor))
    return change


DAMAGE: dict[str, Callable[[Path], None]] = {
    "vectors.f32 truncated by 4 bytes": lambda g: os.truncate(g / "vectors.f32", os.path.getsize(g / "vectors.f32") - 4),
    "vectors.f32 grown by 4 bytes": lambda g: _rewrite(g / "vectors.f32", lambda d: d + b"\0\0\0\0"),
    "vectors.f32 row scaled by 1e6": lambda g: _rewrite(g / "vectors.f32", _scale_row(1e6, 3)),
    "vectors.f32 row zeroed": lambda g: _rewrite(g / "vectors.f32", _scale_row(0.0, -1)),
    "vectors.f32 row NaN": lambda g: _rewrite(g / "vectors.f32", lambda d: d[:8] + struct.pack("<f", float("nan")) + d[12:]),
    "docs.jsonl byte flipped": lambda g: _rewrite(g / "docs.jsonl", _flip_text_byte),
    "docs.jsonl byte flipped, mtime put back": lambda g: _rewrite(g / "docs.jsonl", _flip_text_byte, keep_times=True),
    "docs.jsonl last line cut": lambda g: _rewrite(g / "docs.jsonl", lambda d: d[: d.rindex(b"\n", 0, len(d) - 1) + 1]),
    "bm25.idx deleted": lambda g: os.unlink(g / "bm25.idx"),
    "bm25.idx truncated": lambda g: os.truncate(g / "bm25.idx", os.path.getsize(g / "bm25.idx") // 2),
    "meta.json n_chunks changed": lambda g: _rewrite(g / "meta.json", lambda d: d.replace(b'"n_chunks": ', b'"n_chunks": 1')),
    "meta.json deleted": lambda g: os.unlink(g / "meta.json"),
}

MODES = ("ingest, folder unchanged", "ingest after one edit", "watch: partial sync of the edited path")


def check_damaged_resync(base: Path, damage: Callable[[Path], None], mode: str) -> None:
    folder, art = make_docs(base / "docs"), base / "art"
    run_sync(folder, art)
    damage(real_gen(art))
    try:
        read_index(art / "rag" / "docs")
    except (IndexFormatError, IndexMissingError):
        pass
    else:
        raise AssertionError("the damage did not break the index (the case tests nothing)")
    paths = None
    if mode != MODES[0]:
        write(folder / EDITED, doc_text(500))
        if mode == MODES[2]:
            paths = [folder / EDITED]
    report = run_sync(folder, art, paths=paths)
    _assert(report.published, f"nothing published: {report.summary()}")
    _assert(report.rebuilt is not None and "every file of the folder" in report.rebuilt, f"no note: {report.rebuilt!r}")
    data = read_index(art / "rag" / "docs")
    held = {r.doc_id for r in data.records}
    _assert(len(held) == N_DOCS, f"{len(held)} of {N_DOCS} documents in the index: {sorted(held)}")
    _assert(snapshot(art / "rag" / "docs") == clean_build(folder, base), "not what a clean build holds")
    again = run_sync(folder, art)
    _assert(not again.published, f"the next sync wrote again: {again.summary()}")
    _assert(leftovers(art) == [], f"left behind: {leftovers(art)}")


def damaged_resync_cases(size: str = "ci") -> list[Case]:
    """Each kind of damage x {ingest unchanged, ingest after an edit, the watch agent's partial sync}."""
    return [Case(f"{_slug(label)}-{_slug(mode)}", functools.partial(_damaged, damage, mode))
            for label, damage in DAMAGE.items() for mode in MODES]


def _slug(label: str) -> str:
    label = label.replace("+", " plus ").replace(" - ", " minus ").replace("-inf", "minus inf")
    out = "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _damaged(damage, mode: str, case: Path) -> None:
    check_damaged_resync(case, damage, mode)


# -- bad vector rows -------------------------------------------------------------------------------------


def _unit(dim: int) -> np.ndarray:
    v = np.arange(1, dim + 1, dtype=np.float64)
    return v / np.linalg.norm(v)


ROW_VALUES: dict[str, Callable[[int], np.ndarray]] = {
    "zero": lambda d: np.zeros(d),
    "scaled by 1e6": lambda d: _unit(d) * 1e6,
    "scaled by 1.01": lambda d: _unit(d) * 1.01,
    "scaled by 0.99": lambda d: _unit(d) * 0.99,
    "scaled by 1e-30 (tiny)": lambda d: _unit(d) * 1e-30,
    "scaled by 1e30 (squares overflow)": lambda d: _unit(d) * 1e30,
    "one NaN": lambda d: np.where(np.arange(d) == 1, np.nan, _unit(d)),
    "one +inf": lambda d: np.where(np.arange(d) == 2, np.inf, _unit(d)),
    "one -inf": lambda d: np.where(np.arange(d) == 0, -np.inf, _unit(d)),
}
ROW_ACCEPTED: dict[str, Callable[[int], np.ndarray]] = {
    "scaled by 1 + 5e-4 (within the tolerance)": lambda d: _unit(d) * (1 + 5e-4),
    "scaled by 1 - 5e-4 (within the tolerance)": lambda d: _unit(d) * (1 - 5e-4),
}
ROWS = {"first row": 0, "a middle row": 7, "last row": -1}


def check_bad_row(base: Path, values: np.ndarray, row: int) -> None:
    folder, art = make_docs(base / "docs"), base / "art"
    run_sync(folder, art)
    dim = HashEmbedder().dim
    path = real_gen(art) / "vectors.f32"
    path.write_bytes(set_row(path.read_bytes(), dim, row, values))
    try:
        read_index(art / "rag" / "docs")
    except IndexFormatError as e:
        n = read_index_meta_rows(art)
        _assert("vectors.f32" in str(e) and f"row {row % n} " in str(e), f"message does not name the row: {e}")
    else:
        raise AssertionError("the reader accepted the row")
    report = run_sync(folder, art)
    _assert(report.published and report.rebuilt is not None, f"not rebuilt: {report.summary()}")
    _assert(snapshot(art / "rag" / "docs") == clean_build(folder, base), "a bad row was carried into the new index")
    _assert(not run_sync(folder, art).published, "the next sync wrote again")


def read_index_meta_rows(art: Path) -> int:
    return json.loads((real_gen(art) / "meta.json").read_bytes())["n_chunks"]


def check_accepted_row(base: Path, values: np.ndarray) -> None:
    folder, art = make_docs(base / "docs"), base / "art"
    run_sync(folder, art)
    path = real_gen(art) / "vectors.f32"
    path.write_bytes(set_row(path.read_bytes(), HashEmbedder().dim, 4, values))
    read_index(art / "rag" / "docs")  # raises if refused


def bad_row_cases(size: str = "ci") -> list[Case]:
    """Each bad row value at the first, a middle and the last row; rows within the tolerance accepted."""
    out = [Case(f"{_slug(label)}-{_slug(where)}", functools.partial(_bad_row, make, row))
           for label, make in ROW_VALUES.items() for where, row in ROWS.items()]
    return out + [Case(f"accepted-{_slug(label)}", functools.partial(_accepted_row, make))
                  for label, make in ROW_ACCEPTED.items()]


def _bad_row(make, row: int, case: Path) -> None:
    check_bad_row(case, make(HashEmbedder().dim), row)


def _accepted_row(make, case: Path) -> None:
    check_accepted_row(case, make(HashEmbedder().dim))


# -- a file that cannot be read now ---------------------------------------------------------------------

NOBODY = 65534


def as_unprivileged(fn: Callable[[], object]) -> object:
    """``fn()`` in a forked child that permissions apply to (as nobody when this process is root).

    Returns what ``fn`` returned (JSON-able); raises AssertionError with the
    child's error otherwise. Everything ``fn`` touches must be reachable by
    that user (see ``shared_base``).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(r)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            payload = json.dumps({"ok": fn()})
            code = 0
        except BaseException:  # noqa: BLE001 - reported to the parent
            payload = json.dumps({"error": traceback.format_exc(limit=4)})
        finally:
            try:
                view = memoryview(payload.encode())
                while view:
                    view = view[os.write(w, view) :]
            finally:
                os._exit(code)
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as f:
        while chunk := f.read(65536):
            chunks.append(chunk)
    os.waitpid(pid, 0)
    answer = json.loads(b"".join(chunks) or b'{"error": "the child said nothing"}')
    if "error" in answer:
        raise AssertionError(f"in the unprivileged child: {answer['error']}")
    return answer["ok"]


def shared_base() -> Path:
    """A fresh folder under /tmp that the unprivileged user owns (pytest's own folders are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="ragtui-dataloss-"))
    base.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(base, NOBODY, NOBODY)
    return base


def _sync_child(folder: Path, art: Path, paths=None) -> Callable[[], dict]:
    def go():
        report = sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=MAX_TOKENS, overlap=OVERLAP,
                      paths=paths)
        return report.to_json()
    return go


def _chunks_of(art: Path, doc_id: str) -> list[str]:
    return [r.text for r in read_index(art / "rag" / "docs").records if r.doc_id == doc_id]


UNREADABLE_CASES = {
    # label: (what to lock, the paths a partial sync names or None, lose the state first, also edit another file)
    "file (EACCES), ingest": ("doc1.md", None, False, False),
    "file (EACCES), watch partial sync of it": ("doc1.md", ["doc1.md"], False, False),
    "file (EACCES) and another file edited": ("doc1.md", None, False, True),
    "file (EACCES), writer state lost": ("doc1.md", None, True, False),
    "folder that cannot be listed, ingest": ("sub", None, False, False),
    "folder that cannot be listed, partial sync of it": ("sub", ["sub"], False, False),
    "folder that cannot be searched (r--), ingest": ("sub:r", None, False, False),
}


def check_unreadable(base: Path, lock: str, paths, lose_state: bool, edit_other: bool) -> None:
    folder, art = base / "docs", base / "art"
    make_docs(folder)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            os.chmod(os.path.join(dirpath, name), 0o755 if name in dirnames else 0o644)
    as_unprivileged(_sync_child(folder, art))
    name, _, mode = lock.partition(":")
    target = folder / name
    locked_ids = ([f"docs/{name}"] if target.is_file() else
                  sorted(f"docs/{name}/{p.name}" for p in target.iterdir()))
    before = {d: _chunks_of(art, d) for d in locked_ids}
    _assert(all(before.values()), "the case tests nothing: no chunks before")
    if lose_state:
        os.unlink(art / "rag" / ".state" / "docs" / "state.bin")
    if edit_other:
        write(folder / "doc2.md", doc_text(502))
        os.chmod(folder / "doc2.md", 0o644)
    target.chmod(0o444 if mode == "r" else 0o000)
    try:
        named = [folder / p for p in paths] if paths else None
        report = as_unprivileged(_sync_child(folder, art, named))
    finally:
        target.chmod(0o755 if target.is_dir() else 0o644)
    _assert(report["removed"] == [], f"removed: {report['removed']}")
    _assert(any(str(target) in s["path"] or s["path"].startswith(str(target)) for s in report["skipped"]),
            f"not reported as skipped: {report['skipped']}")
    if target.is_file():
        reasons = [s["reason"] for s in report["skipped"] if s["path"] == str(target)]
        _assert(reasons and "Permission denied" in reasons[0] and "kept" in reasons[0], f"reason: {reasons}")
    after = {d: _chunks_of(art, d) for d in locked_ids}
    _assert(after == before, f"chunks lost or changed: {after}")
    if edit_other:
        _assert(report["changed"] == ["docs/doc2.md"] and report["published"], f"the edit was not published: {report}")
        _assert(any(doc_text(502).split()[0] in t for t in _chunks_of(art, "docs/doc2.md")), "the edit is not in")
    # Readable again: picked up, and the index is what a clean build holds.
    as_unprivileged(_sync_child(folder, art))
    _assert(snapshot(art / "rag" / "docs") == clean_build(folder, base), "not a clean build once readable")
    again = as_unprivileged(_sync_child(folder, art))
    _assert(not again["published"], "the next sync wrote again")


def unreadable_cases(size: str = "ci") -> list[Case]:
    """A file or folder that cannot be read now (as nobody when the tests run as root) keeps its chunks."""
    return [Case(_slug(label), functools.partial(_unreadable, *spec)) for label, spec in UNREADABLE_CASES.items()]


def _unreadable(lock, paths, lose_state, edit_other, _tmp: Path) -> None:
    case = shared_base()  # a folder the unprivileged user can reach, not the test's own
    try:
        check_unreadable(case, lock, paths, lose_state, edit_other)
    finally:
        shutil.rmtree(case, ignore_errors=True)


# -- a second folder of the same name -----------------------------------------------------------------------


def _ingest(folder: Path, art: Path, *extra: str):
    return run("ingest", str(folder), "--artifacts", str(art), *extra)


def _two_folders(base: Path) -> tuple[Path, Path, Path, dict]:
    """(the first folder, indexed; a second folder of the same name; the artifacts; the first index)."""
    first, second, art = base / "a" / "docs", base / "b" / "docs", base / "art"
    write(first / "one.md", "the first folder's document about rivers\n")
    write(second / "two.md", "the second folder's document about hills\n")
    r = _ingest(first, art)
    assert r.returncode == 0, r.stderr
    return first, second, art, snapshot(art / "rag" / "docs")


def same_refused(base: Path) -> None:
    """The second folder is refused: exit 2, one line naming both folders and the fix; the index as it was."""
    first, second, art, before = _two_folders(base)
    r = _ingest(second, art)
    assert r.returncode == 2, f"exit {r.returncode}: {r.stderr}"
    assert one_clear_line(r.stderr), f"not one clear line: {r.stderr!r}"
    assert str(first) in r.stderr and str(second) in r.stderr, f"does not name both folders: {r.stderr}"
    assert "--replace" in r.stderr and "--index" in r.stderr, f"does not name the fix: {r.stderr}"
    assert snapshot(art / "rag" / "docs") == before, "the first folder's index changed"


def same_json_refused(base: Path) -> None:
    _, second, art, _ = _two_folders(base)
    r = _ingest(second, art, "--json")
    assert r.returncode == 2 and r.stdout == "" and one_clear_line(r.stderr), f"{r.returncode} {r.stderr!r}"


def same_folder_again(base: Path) -> None:
    first, _, art, _ = _two_folders(base)
    r = _ingest(first, art)
    assert r.returncode == 0 and "nothing to write" in r.stdout, f"{r.returncode} {r.stdout} {r.stderr}"


def same_folder_by_link(base: Path) -> None:
    first, _, art, before = _two_folders(base)
    link = base / "c" / "docs"  # the same name, so the same doc_ids
    link.parent.mkdir()
    link.symlink_to(first, target_is_directory=True)
    r = _ingest(link, art)
    assert r.returncode == 0, f"{r.returncode} {r.stderr}"
    assert snapshot(art / "rag" / "docs") == before, "the index changed"


def same_other_id(base: Path) -> None:
    _, second, art, before = _two_folders(base)
    r = _ingest(second, art, "--index", "docs2")
    assert r.returncode == 0, r.stderr
    assert snapshot(art / "rag" / "docs") == before, "the first index changed"
    assert {x.doc_id for x in read_index(art / "rag" / "docs2").records} == {"docs/two.md"}, "docs2"


def same_replaced(base: Path) -> None:
    first, second, art, _ = _two_folders(base)
    r = _ingest(second, art, "--replace")
    assert r.returncode == 0, r.stderr
    assert {x.doc_id for x in read_index(art / "rag" / "docs").records} == {"docs/two.md"}, "not replaced"
    r = _ingest(second, art)
    assert r.returncode == 0 and "nothing to write" in r.stdout, "the replacing folder is now the index's own"
    r = _ingest(first, art)
    assert r.returncode == 2, "the first folder is now the other one"


def same_folder_name_cases(size: str = "ci") -> list[Case]:
    """A second folder of the same name refused (and with --json); the same folder again, or by a link,
    is fine; ``--index ID`` keeps both; ``--replace`` replaces, and then the new folder is the index's own."""
    return [Case(fn.__name__.removeprefix("same_").replace("_", "-"), fn) for fn in
            (same_refused, same_json_refused, same_folder_again, same_folder_by_link, same_other_id, same_replaced)]
