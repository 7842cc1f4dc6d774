"""Embedders: text -> unit float32 vectors, and the tokenizer that cuts chunks.

The seam other code relies on is two protocols (``embedders.base``)::

    Tokenizer: name, count(text), spans(text), count_many(texts)
    Embedder:  model, dim, tokenizer, embed(texts) -> (n, dim) float32, close()

and one factory, ``make_embedder(kind, **options)``:

    "wordllama"  WordLlamaEmbedder — in-process, offline, 256-d (the default)
    "http"       HTTPEmbedder      — an OpenAI-compatible /v1/embeddings server
    "onnx"       OnnxEmbedder      — a transformer in a local folder, run with onnxruntime
                 (the optional ``onnx`` extra); ``"onnx:bge-small"`` names a preset,
                 ``"onnx:/path/to/folder"`` a folder

Failures are ``ragtui.core.errors``: ``UsageError`` for bad configuration,
``EmbeddingError`` (exit 3) for a backend that failed or answered nonsense.
spec/embedders.md is the full contract.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ragtui.core.embedders.base import Embedder, Tokenizer, empty_text_vector, tile_spans
from ragtui.core.errors import UsageError

__all__ = [
    "Embedder",
    "HFTokenizer",
    "HTTPEmbedder",
    "HTTPTokenizer",
    "KINDS",
    "OnnxEmbedder",
    "Tokenizer",
    "WordLlamaEmbedder",
    "empty_text_vector",
    "make_embedder",
    "tile_spans",
]

KINDS = ("wordllama", "http", "onnx")


def make_embedder(kind: str = "wordllama", **options: Any) -> Embedder:
    """Build the embedder ``kind`` with ``options`` (its constructor's keyword arguments).

    Raises ``UsageError`` for an unknown kind or option, or a missing one
    (``http`` needs ``base_url`` and ``model``). ``"onnx:<preset>"`` and
    ``"onnx:<folder>"`` are ``kind="onnx"`` with ``model=<preset>`` or
    ``model_dir=<folder>`` (a name with no ``/`` is a preset; write ``./name``
    for a folder in the current directory).
    """
    if isinstance(kind, str) and kind.startswith("onnx:"):
        from ragtui.core.embedders.onnx_model import is_preset_name

        spec = kind[len("onnx:"):]
        if not spec:
            raise UsageError("onnx embedder: write onnx:<preset> or onnx:<folder>, e.g. onnx:bge-small")
        options = {**options, ("model" if is_preset_name(spec) else "model_dir"): spec}
        kind = "onnx"
    if kind not in KINDS:
        raise UsageError(f"unknown embedder kind {kind!r}; expected one of: {', '.join(KINDS)}")
    cls = _embedder_class(kind)
    signature = inspect.signature(cls)
    foreign = [name for name in options if name not in signature.parameters]
    if foreign:
        raise UsageError(_foreign_options_message(kind, foreign))
    try:
        signature.bind(**options)
    except TypeError as exc:
        raise UsageError(f"{kind} embedder: {exc}") from None
    return cls(**options)


def _embedder_class(kind: str) -> Callable[..., Embedder]:
    cls: Callable[..., Embedder]
    if kind == "wordllama":
        from ragtui.core.embedders.wordllama import WordLlamaEmbedder as cls
    elif kind == "http":
        from ragtui.core.embedders.http import HTTPEmbedder as cls
    else:
        from ragtui.core.embedders.onnx import OnnxEmbedder as cls
    return cls


def _foreign_options_message(kind: str, foreign: list[str]) -> str:
    """Which kind the options given to ``kind`` belong to, and how to choose it or drop them."""
    owners: dict[str, list[str]] = {}
    for other in KINDS:
        if other == kind:
            continue
        params = inspect.signature(_embedder_class(other)).parameters
        taken = [name for name in foreign if name in params]
        if taken:
            owners[other] = taken
    names = ", ".join(foreign)
    if not owners:
        return f"{kind} embedder: unknown option(s) {names}"
    best = max(owners, key=lambda k: len(owners[k]))
    whose = "; ".join(f"{', '.join(v)}: the {k} embedder's" for k, v in owners.items())
    return (f"the {kind} embedder takes no {names} ({whose}): to use the {best} embedder set "
            f"kind = \"{best}\" in [embedder] (or RAGTUI_EMBEDDER={best}), or remove {names} from the "
            f"[embedder] table")


def __getattr__(name: str) -> Any:
    # Implementations load lazily: importing the package must not read 32 MB
    # of weights or import httpx for a caller that only needs the protocols.
    if name == "WordLlamaEmbedder":
        from ragtui.core.embedders.wordllama import WordLlamaEmbedder

        return WordLlamaEmbedder
    if name == "HTTPEmbedder":
        from ragtui.core.embedders.http import HTTPEmbedder

        return HTTPEmbedder
    if name == "OnnxEmbedder":
        from ragtui.core.embedders.onnx import OnnxEmbedder

        return OnnxEmbedder
    if name == "HTTPTokenizer":
        from ragtui.core.embedders.http_tokenizer import HTTPTokenizer

        return HTTPTokenizer
    if name == "HFTokenizer":
        from ragtui.core.embedders.hf_tokenizer import HFTokenizer

        return HFTokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
