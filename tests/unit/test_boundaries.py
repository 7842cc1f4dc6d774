"""The headless packages never load a UI library (checked in a fresh interpreter)."""

import pytest

from tests.helpers.imports import UI_LIBRARIES, loaded_by_import

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
    loaded = loaded_by_import(module, (*UI_LIBRARIES, "watchdog"))
    allowed = {"watchdog"} if module.startswith("ragtui.watch") else set()
    assert loaded - allowed == set()


def test_import_ragtui_loads_nothing_heavy():
    """The public API is lazy: ``import ragtui`` loads no library, not even numpy or the package metadata."""
    heavy = ("numpy", "httpx", "watchdog", "importlib.metadata", *UI_LIBRARIES)
    assert loaded_by_import("ragtui", heavy) == set()


def test_every_public_name_resolves_without_a_ui():
    """Each name in ``ragtui.__all__`` imports (a stale entry fails here) and none pulls in textual or rich."""
    import ragtui

    assert dir(ragtui) == sorted(ragtui.__all__)
    assert loaded_by_import("ragtui", UI_LIBRARIES, resolve_all=True) == set()
