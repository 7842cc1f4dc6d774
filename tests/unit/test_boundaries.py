"""The headless packages never load a UI library (checked in a fresh interpreter)."""

import subprocess
import sys

import pytest

HEADLESS = [
    "ragtui",
    "ragtui.config",
    "ragtui.core",
    "ragtui.core.analyzer",
    "ragtui.core.bm25",
    "ragtui.core.chunker",
    "ragtui.core.citations",
    "ragtui.core.datasets",
    "ragtui.core.embedders",
    "ragtui.core.embedders.http",
    "ragtui.core.embedders.wordllama",
    "ragtui.core.evaluate",
    "ragtui.core.flat",
    "ragtui.core.fusion",
    "ragtui.core.index_format",
    "ragtui.core.ivf",
    "ragtui.core.journal",
    "ragtui.core.metrics",
    "ragtui.core.publish",
    "ragtui.core.retriever",
    "ragtui.core.sync",
    "ragtui.core.textsafe",
    "ragtui.core.walk",
    "ragtui.watch",
]


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_loads_no_ui(module):
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(' '.join(sorted(m for m in ('textual', 'rich', 'watchdog') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    allowed = {"watchdog"} if module.startswith("ragtui.watch") else set()
    assert set(out.split()) - allowed == set()


def test_public_api_is_pinned_and_lazy():
    code = (
        "import sys, ragtui\n"
        "loaded = sorted(m for m in ('numpy', 'textual', 'rich', 'watchdog', 'httpx') if m in sys.modules)\n"
        "print(' '.join(loaded) or '-')\n"
        "print(' '.join(ragtui.__all__))\n"
        "missing = [n for n in ragtui.__all__ if not hasattr(ragtui, n)]\n"
        "print(' '.join(missing) or '-')\n"
    )
    loaded, names, missing = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")[:3]
    assert loaded == "-"
    assert names.split() == sorted(names.split())
    assert names.split() == [
        "Citation", "Hit", "IVFParams", "RagtuiError", "Retriever", "SyncReport", "WatchAgent",
        "__version__", "analyze", "make_embedder", "read_index", "resolve", "sync",
    ]
    assert missing == "-"
