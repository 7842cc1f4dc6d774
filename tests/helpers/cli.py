"""Running ragtui from a test: in-process by default, as a process only where the process is the contract.

``run(*argv)`` calls ``ragtui.cli.main`` in this interpreter with its own stdin, stdout and stderr
(text, with a byte ``.buffer`` as a terminal-less process has), its own environment (every
``RAGTUI_*`` variable of the test run removed, then ``env`` applied) and its own working
directory; everything is put back afterwards. ``run_process(*argv)`` starts the installed
``ragtui`` command instead, for exit codes under signals, memory limits, real terminals and the
interpreter's own start-up. Both return a ``Result`` whose fields also answer to the names of a
``subprocess.CompletedProcess`` (``returncode``, ``stdout``, ``stderr``) and unpack as ``code, out, err``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Result", "one_error_line", "ragtui_exe", "run", "run_process"]


@dataclass(frozen=True)
class Result:
    code: int | None
    out: str
    err: str

    def __iter__(self) -> Iterator[int | str | None]:
        """``code, out, err = run(...)``."""
        return iter((self.code, self.out, self.err))

    @property
    def returncode(self) -> int | None:
        return self.code

    @property
    def stdout(self) -> str:
        return self.out

    @property
    def stderr(self) -> str:
        return self.err


class _Stream(io.TextIOWrapper):
    """A text stream over bytes (``.buffer`` works), never a terminal."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8", errors="surrogateescape", newline=None,
                         write_through=True)

    def text(self) -> str:
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return raw.getvalue().decode("utf-8", errors="replace")


@contextmanager
def _environment(env: Mapping[str, str] | None, cwd: Path | str | None) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    try:
        for key in [k for k in os.environ if k.startswith("RAGTUI_")]:
            del os.environ[key]
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run(*argv: str | os.PathLike[str], env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
        stdin: str | bytes | None = None) -> Result:
    """``ragtui ARGV...`` in this process; its exit code and what it wrote."""
    from ragtui import cli

    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    streams = (sys.stdin, sys.stdout, sys.stderr)
    new_in, out, err = _Stream(data), _Stream(), _Stream()
    code: int | None
    with _environment(env, cwd):
        sys.stdin, sys.stdout, sys.stderr = new_in, out, err
        try:
            code = cli.main([os.fspath(a) for a in argv])
        except SystemExit as e:  # argparse's --help and usage errors exit
            code = e.code if isinstance(e.code, int) or e.code is None else 2
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
    return Result(code, out.text(), err.text())


def ragtui_exe() -> list[str]:
    """The installed ``ragtui`` command (beside this Python), else ``python -m ragtui``."""
    exe = Path(sys.executable).parent / "ragtui"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ragtui")
    return [found] if found else [sys.executable, "-m", "ragtui"]


def run_process(*argv: str | os.PathLike[str], env: Mapping[str, str] | None = None,
                cwd: Path | str | None = None, stdin: str | None = None, timeout: float = 300,
                prefix: Sequence[str] = ()) -> Result:
    """The installed command as a process, with the test run's ``RAGTUI_*`` variables removed.

    ``prefix`` goes before the command (``setpriv ...`` to run it as another user)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    full_env.update(env or {})
    done = subprocess.run([*prefix, *ragtui_exe(), *map(os.fspath, argv)], capture_output=True, text=True, env=full_env,
                          cwd=cwd, input=stdin, timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL)
    return Result(done.returncode, done.stdout, done.stderr)


def one_error_line(stderr: str) -> bool:
    """Exactly one line, ``ragtui: error: ...``, with no traceback."""
    lines = stderr.strip("\n").split("\n")
    return len(lines) == 1 and lines[0].startswith("ragtui: error: ") and "Traceback" not in stderr
