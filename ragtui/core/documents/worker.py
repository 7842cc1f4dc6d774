"""Reading documents of the isolated kinds in worker processes, each file within a wall-time and a
memory bound (spec/documents.md, "Bounds").

A worker is a child Python process (``python -m ragtui.core.documents.worker``) that limits its
own address space (``RLIMIT_AS``) and then reads one file at a time from its stdin, answering on its
stdout. A file that takes longer than ``Limits.seconds`` costs its worker (killed and replaced); one
that crashes the native library costs the worker too; either way the file is skipped with the reason
and the other files go on. The workers are started once and kept for every later file (process
start-up is paid once per ``Extractor``, not per file).

Frames both ways are an 8-byte little-endian length and a pickle; the parent only unpickles what its
own child wrote.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ragtui.core.documents.base import Document, Heading, Limits, Unreadable
from ragtui.core.documents.registry import Kind, kind_named

__all__ = ["Extractor", "Job", "set_limits", "shared"]

_LEN = 8


@dataclass(frozen=True)
class Job:
    key: str
    kind: Kind
    data: bytes


class _Worker:
    def __init__(self, limits: Limits) -> None:
        env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragtui.core.documents.worker", str(limits.memory)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            close_fds=True, start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.out = self.proc.stdout.fileno()
        self.buf = bytearray()
        self.job: Job | None = None
        self.deadline = 0.0

    def send(self, job: Job, limits: Limits) -> bool:
        payload = pickle.dumps((job.kind.name, job.data, limits), protocol=pickle.HIGHEST_PROTOCOL)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(len(payload).to_bytes(_LEN, "little") + payload)
            self.proc.stdin.flush()
        except OSError:
            return False
        self.job, self.deadline, self.buf = job, time.monotonic() + limits.seconds, bytearray()
        return True

    def take(self) -> tuple[bool, Any]:
        """(done, answer) after the output is readable: done with the answer once a whole frame came;
        (True, None) when the worker ended."""
        try:
            block = os.read(self.out, 1 << 20)
        except OSError:
            block = b""
        if not block:
            return True, None
        self.buf += block
        if len(self.buf) >= _LEN:
            size = int.from_bytes(self.buf[:_LEN], "little")
            if len(self.buf) >= _LEN + size:
                return True, pickle.loads(bytes(self.buf[_LEN : _LEN + size]))
        return False, None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        self.proc.wait()


def _answer(kind_name: str, answer: Any, died: str | None) -> Document | Unreadable:
    if died is not None:
        return Unreadable(died)
    if not isinstance(answer, tuple) or not answer:
        return Unreadable("the reader ended without an answer")
    if answer[0] == "skip":
        return Unreadable(str(answer[1]))
    _, text, title, heads, paged = answer
    return Document(text, kind_name, title, tuple(Heading(*h) for h in heads), paged)


class Extractor:
    """Reads documents: kinds that are not ``isolated`` in this process, the others in workers."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None) -> None:
        self.limits = limits or Limits()
        self.n_workers = max(1, workers if workers is not None else min(2, os.cpu_count() or 1))
        self._idle: list[_Worker] = []
        self.sent = 0
        """How many files were given to a worker so far (a no-op sync gives none)."""

    def read(self, kind: Kind, data: bytes) -> Document:
        """One file's document; ``Unreadable`` with the reason when it is not one."""
        for _key, got in self.run([Job("", kind, data)]):
            if isinstance(got, Unreadable):
                raise got
            return got
        raise Unreadable("not read")  # pragma: no cover (run answers every job)

    def run(self, jobs: Iterable[Job]) -> Iterator[tuple[str, Document | Unreadable]]:
        """(key, document or the reason it is unreadable) for every job, in the order they finish.

        Jobs are taken from ``jobs`` only when a worker is free, so a lazy iterable holds at most
        one file per worker in memory.
        """
        todo = iter(jobs)
        busy: list[_Worker] = []
        exhausted = False
        try:
            while True:
                while not exhausted and len(busy) < self.n_workers:
                    job = next(todo, None)
                    if job is None:
                        exhausted = True
                        break
                    if not job.kind.isolated:
                        yield job.key, self._inline(job)
                        continue
                    worker = self._idle.pop() if self._idle else _Worker(self.limits)
                    if not worker.send(job, self.limits):
                        worker.kill()  # an idle worker that ended since: a new one
                        worker = _Worker(self.limits)
                        if not worker.send(job, self.limits):
                            worker.kill()
                            yield job.key, Unreadable("the reader's process could not be started")
                            continue
                    self.sent += 1
                    busy.append(worker)
                if not busy:
                    return
                now = time.monotonic()
                wait = max(0.0, min(w.deadline for w in busy) - now)
                ready, _, _ = select.select([w.out for w in busy], [], [], wait)
                for worker in list(busy):
                    job = worker.job
                    assert job is not None
                    if worker.out in ready:
                        done, answer = worker.take()
                        if not done:
                            continue
                        busy.remove(worker)
                        worker.job = None
                        if answer is None:
                            code = worker.proc.poll()
                            worker.kill()
                            yield job.key, _answer(job.kind.name, None, _crash_reason(code, self.limits))
                        else:
                            if len(self._idle) < self.n_workers:
                                self._idle.append(worker)
                            else:  # another thread's run left workers idle already
                                worker.kill()
                            yield job.key, _answer(job.kind.name, answer, None)
                    elif time.monotonic() >= worker.deadline:
                        busy.remove(worker)
                        worker.kill()
                        yield job.key, Unreadable(f"took longer than {self.limits.seconds:g} s to read (stopped)")
        finally:
            for worker in busy:  # the caller stopped early
                worker.kill()

    def _inline(self, job: Job) -> Document | Unreadable:
        try:
            return job.kind.read(job.data, self.limits)
        except Unreadable as e:
            return e

    def close(self) -> None:
        while self._idle:
            self._idle.pop().kill()

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: list[Extractor] = []


def shared() -> Extractor:
    """The process's extractor (its workers started on first use, ended at exit)."""
    if not _SHARED:
        import atexit

        _SHARED.append(Extractor())
        atexit.register(_SHARED[0].close)
    return _SHARED[0]


def set_limits(limits: Limits) -> None:
    """Read with ``limits`` from now on (idle workers are replaced, so the memory bound applies)."""
    ex = shared()
    ex.close()
    ex.limits = limits


def _crash_reason(code: int | None, limits: Limits) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the reader crashed on it ({name}); the file is skipped"
    return f"the reader ended on it (exit status {code}; out of its {limits.memory:,}-byte memory limit?)"


def _end_with_parent() -> None:  # pragma: no cover (runs in the worker process)
    """End this worker once its parent is gone (it would otherwise finish a long file for nobody)."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="ragtui-worker-parent", daemon=True).start()


def _serve(memory: int) -> None:  # pragma: no cover (runs in the worker process)
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = memory if hard == resource.RLIM_INFINITY else min(memory, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a worker ends
    _end_with_parent()
    inp = sys.stdin.buffer
    # Answers go on a private copy of stdout; anything a native library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        head = inp.read(_LEN)
        if len(head) < _LEN:
            return
        size = int.from_bytes(head, "little")
        payload = inp.read(size)
        if len(payload) < size:
            return
        answer: tuple[Any, ...]
        try:
            kind_name, data, limits = pickle.loads(payload)
            del payload
            kind = kind_named(kind_name)
            if kind is None:
                raise Unreadable(f"unknown kind {kind_name!r}")
            doc = kind.read(data, limits)
            del data
            answer = ("ok", doc.text, doc.title, [(h.offset, h.level, h.title) for h in doc.headings], doc.paged)
        except Unreadable as e:
            answer = ("skip", str(e))
        except MemoryError:
            answer = ("skip", f"needs more than the reader's {memory:,}-byte memory limit")
        except RecursionError:
            answer = ("skip", "nested too deeply to read")
        except Exception as e:  # noqa: BLE001 (a library's failure on one file is that file's skip reason)
            answer = ("skip", f"cannot be read ({type(e).__name__}: {str(e)[:200]})")
        try:
            frame = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            frame = pickle.dumps(("skip", "needs more memory than the reader's limit"))
        out.write(len(frame).to_bytes(_LEN, "little") + frame)
        out.flush()


if __name__ == "__main__":  # pragma: no cover
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else Limits().memory)
