"""ragtui: local retrieval you can watch and look into.

The public API, loaded on first use so that ``import ragtui`` loads neither a
UI library nor numpy::

    from ragtui import Retriever, sync, make_embedder
    emb = make_embedder()                       # the embedded offline default
    sync("./docs", artifacts="./artifacts", embedder=emb)
    hits = Retriever.open("./artifacts/rag/docs", embedder=emb).search("query", mode="hybrid")
    reranked = rerank("query", hits, make_reranker(), n=10)   # the onnx extra
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the lazy exports below (the package ships py.typed)
    from ragtui.core.citations import Citation as Citation
    from ragtui.core.citations import resolve as resolve
    from ragtui.core.embedders import make_embedder as make_embedder
    from ragtui.core.errors import RagtuiError as RagtuiError
    from ragtui.core.index.analyzer import analyze as analyze
    from ragtui.core.index.index_format import read_index as read_index
    from ragtui.core.ingest.sync import SyncReport as SyncReport
    from ragtui.core.ingest.sync import sync as sync
    from ragtui.core.search.ivf import IVFParams as IVFParams
    from ragtui.core.search.query import literal as literal
    from ragtui.core.search.query import parse_query as parse_query
    from ragtui.core.search.rerank import make_reranker as make_reranker
    from ragtui.core.search.rerank import rerank as rerank
    from ragtui.core.search.retriever import Hit as Hit
    from ragtui.core.search.retriever import Hits as Hits
    from ragtui.core.search.retriever import Retriever as Retriever
    from ragtui.watch import WatchAgent as WatchAgent

    __version__: str

_EXPORTS = {
    "Citation": "ragtui.core.citations",
    "Hit": "ragtui.core.search.retriever",
    "Hits": "ragtui.core.search.retriever",
    "IVFParams": "ragtui.core.search.ivf",
    "RagtuiError": "ragtui.core.errors",
    "Retriever": "ragtui.core.search.retriever",
    "SyncReport": "ragtui.core.ingest.sync",
    "WatchAgent": "ragtui.watch",
    "analyze": "ragtui.core.index.analyzer",
    "literal": "ragtui.core.search.query",
    "make_embedder": "ragtui.core.embedders",
    "make_reranker": "ragtui.core.search.rerank",
    "parse_query": "ragtui.core.search.query",
    "read_index": "ragtui.core.index.index_format",
    "rerank": "ragtui.core.search.rerank",
    "resolve": "ragtui.core.citations",
    "sync": "ragtui.core.ingest.sync",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def _read_version() -> str:
    """The version pyproject.toml declares: from the installed package's metadata, else from the checkout.

    A source checkout that is not installed (``PYTHONPATH=.``) has no
    metadata; its pyproject.toml sits beside the package. Neither: "0+unknown".
    """
    from importlib import metadata

    try:
        return metadata.version("ragtui")
    except metadata.PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    try:
        project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text("utf-8"))["project"]
        if project["name"] == "ragtui":
            return str(project["version"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        pass
    return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read on first use, so `import ragtui` stays cheap
        value = globals()["__version__"] = _read_version()
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtui' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
