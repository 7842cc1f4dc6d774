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
