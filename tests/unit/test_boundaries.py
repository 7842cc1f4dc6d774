"""Import boundaries.

Which part of ragtui may import which (the layers, the UI libraries kept out of core and watch, core's
groups, no cycles) is declared as import-linter contracts in pyproject.toml ([tool.importlinter]); one
test here runs them, as `make lint` does. What a static import graph cannot see is checked here in a
fresh interpreter: what importing a module actually loads, through third-party libraries and lazy exports.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.imports import UI_LIBRARIES, loaded_by_import

ROOT = Path(__file__).resolve().parents[2]

HEADLESS = [
    "ragtui",
    "ragtui.app",
    "ragtui.config",
    "ragtui.core",
    "ragtui.core.index.analyzer",
    "ragtui.core.index.bm25",
    "ragtui.core.ingest.chunker",
    "ragtui.core.citations",
    "ragtui.core.eval.datasets",
    "ragtui.core.embedders",
    "ragtui.core.embedders.http",
    "ragtui.core.embedders.wordllama",
    "ragtui.core.eval.evaluate",
    "ragtui.core.search.flat",
    "ragtui.core.search.fusion",
    "ragtui.core.index.index_format",
    "ragtui.core.search.ivf",
    "ragtui.core.ingest.journal",
    "ragtui.core.eval.metrics",
    "ragtui.core.ingest.publish",
    "ragtui.core.search.query",
    "ragtui.core.search.query_plan",
    "ragtui.core.search.retriever",
    "ragtui.core.ingest.sync",
    "ragtui.core.textsafe",
    "ragtui.core.ingest.walk",
    "ragtui.watch",
]


@pytest.mark.parametrize(("modules", "allowed"), [
    pytest.param([m for m in HEADLESS if not m.startswith("ragtui.watch")], set(), id="core-app-config"),
    pytest.param([m for m in HEADLESS if m.startswith("ragtui.watch")], {"watchdog"}, id="watch"),
])
def test_headless_modules_load_no_ui(modules, allowed):
    """Importing them all in one fresh interpreter loads no UI library (nor watchdog, but for watch): if the
    whole group loads none, no one of them does. On a failure, each is imported alone to name which."""
    watched = (*UI_LIBRARIES, "watchdog")
    if loaded_by_import(modules, watched) - allowed:
        culprits = {m: sorted(loaded_by_import(m, watched) - allowed) for m in modules}
        pytest.fail(f"loaded by importing: { {m: c for m, c in culprits.items() if c} }")


def test_the_application_layer_loads_nothing_heavy():
    """Every command imports ``ragtui.app``: importing it costs no numpy, httpx or watchdog (each call imports
    what it needs)."""
    assert loaded_by_import("ragtui.app", ("numpy", "httpx", "watchdog", *UI_LIBRARIES)) == set()


def test_import_ragtui_loads_nothing_heavy():
    """The public API is lazy: ``import ragtui`` loads no library, not even numpy or the package metadata."""
    heavy = ("numpy", "httpx", "watchdog", "importlib.metadata", *UI_LIBRARIES)
    assert loaded_by_import("ragtui", heavy) == set()


def test_every_public_name_resolves_without_a_ui():
    """Each name in ``ragtui.__all__`` imports (a stale entry fails here) and none pulls in textual or rich."""
    import ragtui

    assert dir(ragtui) == sorted(ragtui.__all__)
    assert loaded_by_import("ragtui", UI_LIBRARIES, resolve_all=True) == set()


def test_the_import_contracts_hold():
    """`lint-imports` over pyproject.toml's contracts: a broken one fails here with import-linter's report.

    Its own process, as `make lint` runs it: the tool configures logging for the whole interpreter (which
    would silence every logger of this test run)."""
    code = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
    done = subprocess.run([sys.executable, "-c", code, "--no-cache", "--config", str(ROOT / "pyproject.toml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and "0 broken" in done.stdout, done.stdout + done.stderr
