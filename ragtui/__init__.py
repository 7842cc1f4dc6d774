"""ragtui: local retrieval you can watch and look into.

The public API, loaded on first use so that ``import ragtui`` loads neither a
UI library nor numpy::

    from ragtui import Retriever, sync, make_embedder
    emb = make_embedder()                       # the embedded offline default
    sync("./docs", artifacts="./artifacts", embedder=emb)
    hits = Retriever.open("./artifacts/rag/docs", embedder=emb).search("query", mode="hybrid")
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Citation": "ragtui.core.citations",
    "Hit": "ragtui.core.retriever",
    "IVFParams": "ragtui.core.ivf",
    "RagtuiError": "ragtui.core.errors",
    "Retriever": "ragtui.core.retriever",
    "SyncReport": "ragtui.core.sync",
    "WatchAgent": "ragtui.watch",
    "analyze": "ragtui.core.analyzer",
    "make_embedder": "ragtui.core.embedders",
    "read_index": "ragtui.core.index_format",
    "resolve": "ragtui.core.citations",
    "sync": "ragtui.core.sync",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtui' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
