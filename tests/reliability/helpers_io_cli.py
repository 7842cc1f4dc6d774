"""I/O faults seen from the command line: ``ragtui ingest`` exits 3 with one clear line, the index stays.

Two kinds of runs:

* ``run_cli_faults``: the CLI's ``main`` in a forked child (helpers_child)
  whose ``os`` calls fail — write, fsync, rename; ENOSPC, EIO, EACCES; once
  and persistently — with the fast test embedder;
* ``run_real_fs_faults``: real failures from the kernel — the installed
  ``ragtui`` on a full tmpfs (ENOSPC) and on a read-only remount (EROFS),
  and the CLI's main as an unprivileged user in a folder it may not write
  (EACCES; a forked child that dropped root, since the interpreter may live
  where that user cannot reach). Each needs root (mount, setuid) and is
  reported as skipped, with the reason, where that is not available.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run
from tests.reliability.cases import Case
from tests.reliability.helpers import leftovers, make_folder, snapshot
from tests.reliability.helpers_child import ForkServer

CLI_OPS = ("write", "fsync", "rename")
ERRNOS = (errno.ENOSPC, errno.EIO, errno.EACCES)


def _cli_job(folder: Path, art: Path, out: Path, fault: dict | None) -> dict:
    return {"action": "cli", "argv": ["ingest", str(folder), "--artifacts", str(art), "--json"],
            "embedder": "hash", "stdout": str(out / "stdout"), "stderr": str(out / "stderr"),
            "trace": {"fault": fault} if fault else {}}


def _prepare(base: Path) -> tuple[Path, Path, dict]:
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1)
    job_ok = _cli_job(folder, art, base, None)
    return folder, art, job_ok


def check_cli_fault(server: ForkServer, base: Path, fault: dict, publish_fails: bool = True) -> None:
    folder, art, job_ok = _prepare(base)
    assert server.run(job_ok)["exit"] == 0
    old = snapshot(art / "rag" / "docs")
    make_folder(folder, 2)
    answer = server.run(_cli_job(folder, art, base, fault))
    stderr = (base / "stderr").read_text(encoding="utf-8", errors="replace")
    if publish_fails:
        assert answer["exit"] == 3, f"exit {answer}, stderr {stderr!r}"
        assert one_clear_line(stderr), f"not one clear line: {stderr!r}"
        assert os.strerror(fault["errno"]) in stderr and "previous index is unchanged" in stderr, stderr
        assert snapshot(art / "rag" / "docs") == old, "the previous index changed"
    else:  # a fault in the writer's state file only costs time later
        assert answer["exit"] == 0, f"exit {answer}, stderr {stderr!r}"
    answer = server.run(job_ok)
    assert answer["exit"] == 0, (base / "stderr").read_text()
    new_art = base / "clean"
    assert server.run(_cli_job(folder, new_art, base, None))["exit"] == 0
    assert snapshot(art / "rag" / "docs") == snapshot(new_art / "rag" / "docs"), "not the new generation"
    assert leftovers(art) == [], f"left behind: {leftovers(art)}"


def cli_fault_cases(size: str = "ci") -> list[Case]:
    """``ragtui ingest`` (the CLI's main in a forked child) with each call of the publish failing:
    ``write-once-ENOSPC``, ``rename-every-EIO``; then the writer's state file failing after a publish."""
    out = []
    for op in CLI_OPS:
        for err in ERRNOS:
            for persistent in (False, True):
                fault = {"op": op, "errno": err, "match": "/rag/.gen/", "persistent": persistent}
                label = f"{op}-{'every' if persistent else 'once'}-{errno.errorcode[err]}"
                out.append(Case(label, functools.partial(_cli_fault, fault, True)))
    for op in ("open", "write", "rename"):  # the state file after a successful publish
        fault = {"op": op, "errno": errno.ENOSPC, "match": "state.bin", "persistent": True}
        out.append(Case(f"state-file-{op}-ENOSPC", functools.partial(_cli_fault, fault, False)))
    return out


def _cli_fault(fault: dict, publish_fails: bool, base: Path) -> None:
    from tests.reliability.cases import fork_server

    check_cli_fault(fork_server(), base, fault, publish_fails=publish_fails)


# -- real filesystems -------------------------------------------------------------------------------


class Skip(pytest.skip.Exception):
    """This environment cannot produce the fault (no root, no mount)."""


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        raise Skip("needs root and mount(8)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(fs: Path) -> Path:
    """Write a file until the filesystem is full; return it."""
    filler = fs / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def _ingest(folder: Path, art: Path, **kw):
    return run("ingest", str(folder), "--artifacts", str(art), **kw)


def _indexed_on_tmpfs(base: Path, size: str) -> tuple[Path, Path, Path, dict]:
    """A small tmpfs holding the index of a first version of the folder, then a second version
    of the folder: (the mount, folder, artifacts, the first index's snapshot)."""
    fs = base / "fs"
    _mount_tmpfs(fs, size)
    try:
        folder, art = base / "docs", fs / "art"
        make_folder(folder, 1)
        assert _ingest(folder, art).returncode == 0
        old = snapshot(art / "rag" / "docs")
        make_folder(folder, 2)
    except BaseException:
        _umount(fs)
        raise
    return fs, folder, art, old


def check_full_disk(base: Path) -> None:
    fs, folder, art, old = _indexed_on_tmpfs(base, "4m")
    try:
        try:
            filler = _fill(fs)
        except OSError:
            filler = fs / "filler"  # full already: the close reported it
        r = _ingest(folder, art)
        assert r.returncode == 3 and one_clear_line(r.stderr), (r.returncode, r.stderr)
        assert "No space left on device" in r.stderr, r.stderr
        assert snapshot(art / "rag" / "docs") == old
        filler.unlink()
        r = _ingest(folder, art, )
        assert r.returncode == 0, r.stderr
        assert leftovers(art) == [], leftovers(art)
    finally:
        _umount(fs)


def check_read_only(base: Path) -> None:
    fs, folder, art, old = _indexed_on_tmpfs(base, "8m")
    try:
        r = subprocess.run(["mount", "-o", "remount,ro", str(fs)], capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip(f"cannot remount read-only: {r.stderr.strip()}")
        r = _ingest(folder, art)
        assert r.returncode == 3 and one_clear_line(r.stderr), (r.returncode, r.stderr)
        assert "Read-only file system" in r.stderr, r.stderr
        assert snapshot(art / "rag" / "docs") == old
        subprocess.run(["mount", "-o", "remount,rw", str(fs)], check=True)
        assert _ingest(folder, art).returncode == 0
    finally:
        _umount(fs)


NOBODY = 65534


def check_permission_denied(base: Path, server: ForkServer) -> None:
    """As an unprivileged user (the CLI's main in a forked child that dropped root): EACCES from the kernel."""
    if os.geteuid() != 0:
        raise Skip("needs root to run the command as another user")
    base.chmod(0o755)
    folder, art = base / "docs", base / "art"
    make_folder(folder, 1)
    art.mkdir()
    os.chown(art, NOBODY, NOBODY)
    out = base / "out"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)

    def as_nobody():
        answer = server.run({**_cli_job(folder, art, out, None), "user": NOBODY})
        return answer["exit"], (out / "stderr").read_text(errors="replace")

    code, stderr = as_nobody()
    if code != 0:
        raise Skip(f"the command does not run as an unprivileged user here: {stderr.strip()[-200:]}")
    old = snapshot(art / "rag" / "docs")
    make_folder(folder, 2)
    gens = art / "rag" / ".gen" / "docs"
    gens.chmod(0o555)  # nobody may no longer add a generation
    code, stderr = as_nobody()
    assert code == 3 and one_clear_line(stderr), (code, stderr)
    assert "Permission denied" in stderr, stderr
    assert snapshot(art / "rag" / "docs") == old
    gens.chmod(0o755)
    assert as_nobody()[0] == 0
    assert leftovers(art) == []


REAL_CASES = {"full disk (tmpfs)": check_full_disk, "read-only filesystem": check_read_only,
              "permission denied (unprivileged user)": check_permission_denied}


def real_fs_cases(size: str = "ci") -> list[Case]:
    """A full tmpfs, a read-only remount, a folder the user may not write; skipped where they cannot be made."""
    return [Case(label.split(" (")[0].replace(" ", "-"), functools.partial(_real_case, fn)) for label, fn in REAL_CASES.items()]


def _real_case(fn, _tmp: Path) -> None:
    from tests.reliability.cases import fork_server

    # Under /tmp itself, not the test's private folder: another user must reach it.
    case = Path(tempfile.mkdtemp(prefix="ragtui-reliability-"))
    try:
        fn(case, fork_server()) if fn is check_permission_denied else fn(case)
    finally:
        shutil.rmtree(case, ignore_errors=True)
