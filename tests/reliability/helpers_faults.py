"""I/O faults while publishing, through the writer's ``FsOps`` seam: call order, and every call failing.

``RecordingOps`` records each call with the path it acts on; ``FaultOps``
also makes chosen calls raise ``OSError`` (the nth call of one kind, or every
one) and splits writes into short writes. ``durability_problems`` checks a
recorded publish against the order spec/index-format.md promises.
``run_io_matrix`` fails every kind of call, once at each of its occurrences
and persistently, with each errno, and checks what the writer leaves.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
from pathlib import Path

from ragtui.core.errors import StorageError
from ragtui.core.ingest import publish as publish_mod
from ragtui.core.ingest.publish import FsOps
from tests.reliability.cases import Case
from tests.reliability.helpers import leftovers, make_folder, run_sync, snapshot

OPS = ("open", "write", "fsync", "close", "mkdir", "rename", "exchange", "symlink", "unlink", "rmdir")
ERRNOS = (errno.ENOSPC, errno.EIO, errno.EACCES)


class RecordingOps(FsOps):
    """Records every call as (op, path); ``fd`` calls are named by the path the fd was opened on."""

    def __init__(self, write_max: int | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.write_max = write_max
        self._paths: dict[int, str] = {}

    def _call(self, op: str, path) -> None:
        self.calls.append((op, str(path)))

    def mkdir(self, path):
        self._call("mkdir", path)
        return super().mkdir(path)

    def open(self, path, flags, mode=0o644):
        self._call("open", path)
        fd = super().open(path, flags, mode)
        self._paths[fd] = str(path)
        return fd

    def write(self, fd, data):
        self._call("write", self._paths.get(fd, fd))
        return super().write(fd, data[: self.write_max] if self.write_max else data)

    def copy_range(self, src_fd, dst_fd, count, offset):
        # A copy in the kernel is a write to its destination, for the order checks and the faults.
        self._call("write", self._paths.get(dst_fd, dst_fd))
        return super().copy_range(src_fd, dst_fd, min(count, self.write_max) if self.write_max else count, offset)

    def fsync(self, fd):
        self._call("fsync", self._paths.get(fd, fd))
        return super().fsync(fd)

    def close(self, fd):
        self._call("close", self._paths.pop(fd, fd))
        return super().close(fd)

    def rename(self, src, dst):
        self._call("rename", f"{src} -> {dst}")
        return super().rename(src, dst)

    def exchange(self, a, b):
        self._call("exchange", f"{a} <-> {b}")
        return super().exchange(a, b)

    def symlink(self, target, path):
        self._call("symlink", path)
        return super().symlink(target, path)

    def unlink(self, path):
        self._call("unlink", path)
        return super().unlink(path)

    def rmdir(self, path):
        self._call("rmdir", path)
        return super().rmdir(path)


class FaultOps(RecordingOps):
    """``RecordingOps`` whose ``op`` calls fail with ``err``: the ``nth`` one, or all when ``persistent``."""

    def __init__(self, op: str, err: int, nth: int = 1, persistent: bool = False, write_max: int | None = 1024):
        super().__init__(write_max)
        self.op, self.err, self.nth, self.persistent = op, err, nth, persistent
        self.seen = 0
        self.failed_at: int | None = None  # index in ``calls`` of the first injected failure

    def close(self, fd):
        try:
            self._call("close", self._paths.pop(fd, fd))
        finally:
            os.close(fd)  # close(2) frees the descriptor even when it reports an error

    def _call(self, op, path):
        super()._call(op, path)
        if op == self.op:
            self.seen += 1
            if self.persistent or self.seen == self.nth:
                if self.failed_at is None:
                    self.failed_at = len(self.calls) - 1
                raise OSError(self.err, os.strerror(self.err), str(path))


@contextlib.contextmanager
def using_ops(ops: FsOps):
    """Make ``publish`` (called by ``sync``) use ``ops`` for the duration."""
    saved = publish_mod.OS_OPS
    publish_mod.OS_OPS = ops
    try:
        yield ops
    finally:
        publish_mod.OS_OPS = saved


def _first(calls, op, pred=lambda p: True, start=0):
    for i in range(start, len(calls)):
        if calls[i][0] == op and pred(calls[i][1]):
            return i
    return None


def _last(calls, op, pred=lambda p: True):
    found = None
    for i, (o, p) in enumerate(calls):
        if o == op and pred(p):
            found = i
    return found


def durability_problems(calls: list[tuple[str, str]], root: Path, index_id: str = "docs") -> list[str]:
    """What in one recorded publish breaks "flush before publish, flush the directory after"."""
    problems = []
    link = str(root / index_id)
    gens = str(root / ".gen" / index_id)
    i_gen_rename = _first(calls, "rename", lambda p: p.startswith(gens) and ".tmp ->" in p)
    i_link = _first(calls, "rename", lambda p: p.endswith(f"-> {link}")) or _first(calls, "exchange")
    if i_gen_rename is None or i_link is None:
        return [f"no generation rename or no link rename in {calls}"]
    tmp_gen = calls[i_gen_rename][1].split(" -> ")[0]
    for name in ("meta.json", "docs.jsonl", "vectors.f32", "bm25.idx"):
        path = f"{tmp_gen}/{name}"
        last_write = _last(calls, "write", lambda p, path=path: p == path)
        i_fsync = _first(calls, "fsync", lambda p, path=path: p == path)
        if last_write is None or i_fsync is None or not last_write < i_fsync < i_gen_rename:
            problems.append(f"{name}: not flushed after its last write and before the generation rename")
    i_dir = _first(calls, "fsync", lambda p: p == tmp_gen)
    if i_dir is None or not max(_last(calls, "fsync", lambda p: p.startswith(tmp_gen + "/")) or 0, 0) < i_dir < i_gen_rename:
        problems.append("the generation directory is not flushed after its files and before its rename")
    i_gens = _first(calls, "fsync", lambda p: p == gens, i_gen_rename)
    if i_gens is None or not i_gens < i_link:
        problems.append(".gen/<id> is not flushed between the generation rename and the link rename")
    i_root = _first(calls, "fsync", lambda p: p == str(root), i_link)
    if i_root is None:
        problems.append("rag/ is not flushed after the link rename")
    first_removal = min([i for i, (o, _) in enumerate(calls) if o in ("unlink", "rmdir") and i > i_link] or [len(calls)])
    if i_root is not None and first_removal < i_root:
        problems.append("an old generation is removed before the new link is flushed")
    for i, (op, path) in enumerate(calls):
        if op == "mkdir" and i < i_link:
            parent = str(Path(path).parent)
            if _first(calls, "fsync", lambda p, parent=parent: p == parent, i) is None:
                problems.append(f"the new folder {path} is never flushed in its parent")
    return problems


def _fresh(base: Path) -> tuple[Path, Path, dict]:
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1)
    run_sync(folder, art)
    old = snapshot(art / "rag" / "docs")
    make_folder(folder, 2)
    return folder, art, old


def _gen_bytes_equal(gen_dir: Path, snap: dict) -> bool:
    import json

    files = {name: (gen_dir / name).read_bytes() for name in snap}
    meta = json.loads(files["meta.json"])
    meta.pop("created_at")
    files["meta.json"] = json.dumps(meta, sort_keys=True).encode()
    return files == snap


def count_calls(base: Path) -> dict[str, int]:
    """How often a clean publishing sync makes each kind of call (with 1 KiB writes)."""
    folder, art, _ = _fresh(base)
    with using_ops(RecordingOps(write_max=1024)) as rec:
        run_sync(folder, art)
    shutil.rmtree(base, ignore_errors=True)
    return {op: sum(1 for o, _ in rec.calls if o == op) for op in OPS}


def check_fault_case(base: Path, op: str, err: int, nth: int, persistent: bool, new: dict) -> None:
    """One fault: raise AssertionError naming what went wrong."""
    folder, art, old = _fresh(base)
    root = art / "rag"
    old_gen = Path(os.path.realpath(root / "docs"))
    ops = FaultOps(op, err, nth, persistent)
    error = None
    with using_ops(ops):
        try:
            run_sync(folder, art)
        except StorageError as e:
            error = str(e)
    assert ops.failed_at is not None, "the fault was never reached"
    after = ops.calls[ops.failed_at + 1 :]
    cleanup_only = all(o in ("close", "unlink", "rmdir") for o, _ in after)
    i_link = _first(ops.calls, "rename", lambda p: p.endswith(f"-> {root / 'docs'}"))
    committed = i_link is not None and i_link < ops.failed_at and ops.calls[i_link] != ops.calls[ops.failed_at]
    if op in ("unlink", "rmdir"):
        # Removing old generations is best effort after the publish: no error, a later writer finishes it.
        assert error is None, f"a failed cleanup failed the publish: {error}"
        assert snapshot(root / "docs") == new
    elif committed:
        assert error and "published" in error and os.strerror(err) in error, f"message: {error}"
        assert snapshot(root / "docs") == new
        assert old_gen.is_dir() and _gen_bytes_equal(old_gen, old), "the previous generation was not kept"
    else:
        assert error is not None, "the publish did not fail"
        assert os.strerror(err) in error and "previous index is unchanged" in error, f"message: {error}"
        assert snapshot(root / "docs") == old, "the previous index changed"
        assert cleanup_only, f"after the failure the writer did more than clean up: {after}"
        assert leftovers(art) == [".state/docs/embedded.bin"], f"left behind: {leftovers(art)}"
    if persistent:  # the next run fails the same way and still leaves the index as it was
        with using_ops(FaultOps(op, err, nth, persistent)):
            try:
                run_sync(folder, art)
            except StorageError:
                pass
        assert snapshot(root / "docs") in (old, new)
    report = run_sync(folder, art)  # the fault is gone
    assert snapshot(root / "docs") == new, "the run after the fault did not publish the new generation"
    assert report.chunks_embedded == 0, f"the next run embedded {report.chunks_embedded} chunks again"
    assert leftovers(art) == [], f"left behind after the next run: {leftovers(art)}"


FULL_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EACCES, errno.EROFS, errno.EDQUOT)


def _matrix_base() -> tuple[dict[str, int], dict]:
    """(how often a publishing sync makes each kind of call, the index it publishes)."""
    from tests.reliability.cases import once

    def build(base: Path):
        counts = count_calls(base / "count")
        folder, art, _ = _fresh(base / "new")
        run_sync(folder, art)
        return counts, snapshot(art / "rag" / "docs")

    return once("io-matrix", build)


def io_matrix_cases(size: str = "ci", every_occurrence: bool = True) -> list[Case]:
    """Every kind of call x errno x (once at each occurrence | persistently): ``fsync-2-EIO``, ``fsync-every-EIO``."""
    counts = _matrix_base()[0]
    out = []
    for op in OPS:
        n = counts[op]
        nths = list(range(1, n + 1)) if every_occurrence else sorted({1, n} - {0}) if n else []
        plans = [(nth, False) for nth in nths] + ([(1, True)] if n else [])
        for err in ERRNOS if size == "ci" else FULL_ERRNOS:
            for nth, persistent in plans:
                label = f"{op}-{nth if not persistent else 'every'}-{errno.errorcode[err]}"
                out.append(Case(label, functools.partial(_matrix_case, op, err, nth, persistent)))
    return out


def _matrix_case(op: str, err: int, nth: int, persistent: bool, case: Path) -> None:
    check_fault_case(case, op, err, nth, persistent, _matrix_base()[1])


def durability_cases(size: str = "ci") -> list[Case]:
    """The recorded order of a first publish, an update and an adoption, with writes of several sizes."""
    from tests.reliability.helpers_kill import SCENARIOS

    return [Case(f"{scenario}-{write_max or 'any'}", functools.partial(check_durability, scenario, write_max))
            for scenario in SCENARIOS for write_max in (None, 7, 512, 4096)]


def check_durability(scenario: str, write_max: int | None, base: Path) -> None:
    from tests.reliability.helpers_kill import _prepare

    folder, art = _prepare(base, scenario)
    with using_ops(RecordingOps(write_max=write_max)) as rec:
        run_sync(folder, art)
    problems = durability_problems(rec.calls, art / "rag")
    assert problems == [], problems
