"""Run a writer in a child process that dies or fails at its Nth filesystem step.

``ForkServer`` starts this module once as a subprocess (``--serve``); it
imports ragtui and numpy, then forks one child per job, so a job costs a fork
rather than a Python start. The child installs ``Tracer`` — wrappers around
the ``os`` and ``io`` calls that change the disk — runs the job (a ``sync`` or
the CLI's ``main``) and:

* with ``kill_at=N`` sends itself SIGKILL just before its Nth step;
* with a ``fault`` ({"op", "errno", "match", "nth", "persistent"}) makes the
  steps of that op whose detail contains ``match`` raise ``OSError(errno)``
  without doing them: the ``nth`` such step, or every one when ``persistent``;
* with ``log`` writes one line per step: ``<n> <op> <detail>``;
* with ``write_max`` lets each write put at most that many bytes (a short
  write, which the writer must loop on), so a file is written in several steps.

Steps are the calls that change what is on disk, plus fsync: ``open`` for
writing, ``write``, ``fsync``, ``close`` (of a file opened for writing),
``mkdir``, ``rename`` (also ``os.replace`` and the atomic exchange),
``symlink``, ``unlink``, ``rmdir``. Reads are not steps. The library code under
test carries no test hook: everything here is monkeypatching inside the child.
"""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEP_OPS = ("open", "write", "fsync", "close", "mkdir", "rename", "symlink", "unlink", "rmdir")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Tracer:
    """Counts, logs, kills at or fails the filesystem steps of this process (see the module docstring)."""

    def __init__(self, kill_at=None, fault=None, log=None, write_max=None) -> None:
        self.kill_at = kill_at
        self.fault = fault
        self.write_max = write_max
        self.n = 0
        self.counts = dict.fromkeys(STEP_OPS, 0)
        self.failed = 0
        self.matched = 0
        self._orig = {name: getattr(os, name) for name in
                      ("open", "write", "copy_file_range", "fsync", "close", "mkdir", "rename", "replace", "symlink",
                       "unlink", "rmdir")}
        self._io_open = io.open
        self._write_fds: set[int] = set()
        self._log_fd = self._orig["open"](log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log else None

    def step(self, op: str, detail: str) -> None:
        self.n += 1
        self.counts[op] += 1
        if self._log_fd is not None:
            self._orig["write"](self._log_fd, f"{self.n} {op} {detail}\n".encode("utf-8", "backslashreplace"))
        if self.kill_at is not None and self.n >= self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        f = self.fault
        if f and f["op"] == op and f.get("match", "") in detail:
            self.matched += 1
            if f.get("persistent") or self.matched == f.get("nth", 1):
                self.failed += 1
                raise OSError(f["errno"], os.strerror(f["errno"]), detail.split(" ")[0])

    def install(self) -> None:
        o = self._orig

        def open_(path, flags, mode=0o777, *, dir_fd=None):
            if flags & _WRITE_FLAGS:
                self.step("open", os.fsdecode(path))
                fd = o["open"](path, flags, mode, dir_fd=dir_fd)
                self._write_fds.add(fd)
                return fd
            return o["open"](path, flags, mode, dir_fd=dir_fd)

        def write(fd, data):
            if fd not in self._write_fds:
                return o["write"](fd, data)
            self.step("write", f"{_fd_path(fd)} {len(data)} bytes")
            if self.write_max:
                data = memoryview(data)[: self.write_max]
            return o["write"](fd, data)

        def copy_file_range(src, dst, count, offset_src=None, offset_dst=None):
            # A copy in the kernel is a write step of its destination.
            if dst not in self._write_fds:
                return o["copy_file_range"](src, dst, count, offset_src, offset_dst)
            self.step("write", f"{_fd_path(dst)} {count} bytes copied")
            if self.write_max:
                count = min(count, self.write_max)
            return o["copy_file_range"](src, dst, count, offset_src, offset_dst)

        def fsync(fd):
            self.step("fsync", _fd_path(fd))
            return o["fsync"](fd)

        def close(fd):
            if fd in self._write_fds:
                self._write_fds.discard(fd)
                self.step("close", _fd_path(fd))
            return o["close"](fd)

        def simple(op, name):
            def call(*args, **kwargs):
                self.step(op, " -> ".join(os.fsdecode(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))))
                return o[name](*args, **kwargs)
            return call

        def io_open(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+") and isinstance(file, (str, bytes, os.PathLike)):
                self.step("open", os.fsdecode(file))
                return _TracedFile(self, self._io_open(file, mode, *args, **kwargs), os.fsdecode(file))
            return self._io_open(file, mode, *args, **kwargs)

        os.open, os.write, os.fsync, os.close = open_, write, fsync, close
        os.copy_file_range = copy_file_range
        for op, name in (("mkdir", "mkdir"), ("rename", "rename"), ("rename", "replace"), ("symlink", "symlink"),
                         ("unlink", "unlink"), ("rmdir", "rmdir")):
            setattr(os, name, simple(op, name))
        io.open = io_open
        import builtins

        builtins.open = io_open
        from ragtui.core.ingest import publish

        exchange = publish.FsOps.exchange

        def traced_exchange(ops, a, b):
            self.step("rename", f"exchange {a} <-> {b}")
            return exchange(ops, a, b)

        publish.FsOps.exchange = traced_exchange


class _TracedFile:
    """A file opened for writing through ``io.open``: its writes and close are steps."""

    def __init__(self, tracer: Tracer, f, path: str) -> None:
        self._t, self._f, self._path = tracer, f, path

    def write(self, data):
        self._t.step("write", f"{self._path} {len(data)}")
        return self._f.write(data)

    def close(self):
        if not self._f.closed:
            self._t.step("close", self._path)
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


# -- jobs ----------------------------------------------------------------------------------------


def run_job(job: dict) -> int:
    """Run one job in this (forked) process; return its exit code."""
    # The server's stdout is the answer pipe: the child must never write there.
    for fd, key in ((1, "stdout"), (2, "stderr")):
        out = os.open(job.get(key) or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    for name, value in job.get("env", {}).items():
        os.environ[name] = value
    if job.get("user") is not None:
        os.setgroups([])
        os.setgid(job["user"])
        os.setuid(job["user"])
    tracer = Tracer(**job.get("trace", {}))
    from ragtui.core.errors import RagtuiError
    from ragtui.core.index import verified

    # The writer records a verified entry only when its files are old enough not to be racy, waiting for
    # that only when the wait is short: which a run does would depend on the clock, and with it the steps
    # a harness counts and kills before. Here it always waits, so every run takes the same steps (and the
    # recording is among the steps killed and failed).
    record = verified.record
    verified.record = lambda *args, **kwargs: record(*args, **{**kwargs, "max_wait_ns": 10**10})

    if job.get("embedder") == "hash":
        import ragtui.app
        from tests.unit.fakes import HashEmbedder

        ragtui.app.open_embedder = lambda settings, warm=True: HashEmbedder()
    tracer.install()
    try:
        if job["action"] == "cli":
            from ragtui.cli import main

            return main(job["argv"])
        from ragtui.core.ingest.sync import sync
        from ragtui.core.ingest.walk import WalkRules
        from tests.unit.fakes import HashEmbedder

        rules = WalkRules(max_bytes=job["max_bytes"]) if job.get("max_bytes") else None
        if job.get("overlay"):  # the watch agent's writer: the overlay before the publish
            from ragtui.core.ingest.sync import IndexWriter

            report = IndexWriter(job["folder"], artifacts=job["artifacts"], embedder=HashEmbedder(),
                                 index_id=job.get("index_id"), max_tokens=job.get("max_tokens", 16),
                                 overlap=job.get("overlap", 4), rules=rules, overlay=True).sync()
        else:
            report = sync(job["folder"], artifacts=job["artifacts"], embedder=HashEmbedder(),
                          index_id=job.get("index_id"), max_tokens=job.get("max_tokens", 16),
                          overlap=job.get("overlap", 4), rules=rules)
        print(json.dumps(report.to_json()))
        return 0
    except RagtuiError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return e.exit_code
    except BaseException:
        traceback.print_exc()
        return 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def serve() -> None:
    """Read one JSON job per line from stdin; fork a child for it; answer its pid and how it ended."""
    import numpy  # noqa: F401  (imported once here, so forked children start warm)

    import ragtui.cli
    import ragtui.core.ingest.sync  # noqa: F401
    import ragtui.core.textsafe  # noqa: F401
    import tests.unit.fakes  # noqa: F401

    # Every module a job may import lazily is imported now: a child that drops
    # root may not be able to read the interpreter's library any more.
    ragtui.cli.build_parser()

    print("READY", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                code = run_job(job)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        answer = {"pid": pid, "exit": None, "signal": None}
        if os.WIFSIGNALED(status):
            answer["signal"] = os.WTERMSIG(status)
        else:
            answer["exit"] = os.WEXITSTATUS(status)
        print(json.dumps(answer), flush=True)


class ForkServer:
    """The parent's handle on a ``serve`` process: ``run(job)`` -> {"pid", "exit", "signal"}."""

    def __init__(self, timeout: float = 300.0) -> None:
        self.timeout = timeout
        # The user's own configuration stays out of the jobs: a private, world-readable home.
        self.home = Path(tempfile.mkdtemp(prefix="ragtui-forkserver-"))
        self.home.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), HOME=str(self.home),
                   XDG_CONFIG_HOME=str(self.home / ".config"), XDG_CACHE_HOME=str(self.home / ".cache"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.helpers_child", "--serve"],
            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        ready = self._line()
        if ready != "READY":
            raise RuntimeError(f"fork server did not start: {ready!r}")

    def _line(self) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.close()
            raise TimeoutError(f"fork server gave no answer within {self.timeout} s")
        return self.proc.stdout.readline().strip()

    def run(self, job: dict) -> dict:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(run_job(json.loads(sys.argv[1])))
