"""The headless packages never load a UI library (checked in a fresh interpreter)."""

import pytest

from tests.helpers.imports import UI_LIBRARIES, loaded_by_import

HEADLESS = [
    "ragtui",
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
    "ragtui.core.search.retriever",
    "ragtui.core.ingest.sync",
    "ragtui.core.textsafe",
    "ragtui.core.ingest.walk",
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


# Which parts of ragtui each part may import (spec/architecture.md, "Import rules"). A part
# is ragtui.<name> (a module or a package); "ragtui" alone is the package root, whose
# lazy exports core reads only for __version__.
MAY_IMPORT = {
    "ragtui.core": {"ragtui", "ragtui.core"},
    "ragtui.config": {"ragtui.core"},
    "ragtui.progress": {"ragtui.terminal"},
    "ragtui.terminal": {"ragtui.core"},
    "ragtui.watch": {"ragtui.core", "ragtui.watch"},
    "ragtui.tui": {"ragtui.tui", "ragtui.cli", "ragtui.config", "ragtui.core", "ragtui.watch"},
    "ragtui.commands": {"ragtui.commands", "ragtui.cli", "ragtui.config", "ragtui.core", "ragtui.progress", "ragtui.terminal",
                        "ragtui.watch"},
    "ragtui.cli": {"ragtui", "ragtui.cli", "ragtui.commands", "ragtui.config", "ragtui.core", "ragtui.progress", "ragtui.terminal",
                   "ragtui.tui"},
    "ragtui.__main__": {"ragtui.cli"},
    "ragtui": set(),
}


def _part(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _ragtui_imports(path, module: str) -> set[str]:
    """Every ragtui module ``path`` imports, anywhere in it (inside functions too), relative imports resolved."""
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            names = [".".join([*base, node.module] if node.module else base)]
        else:
            continue
        found.update(n for n in names if n == "ragtui" or n.startswith("ragtui."))
    return found


def test_imports_point_down():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "ragtui"
    wrong = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        allowed = MAY_IMPORT[_part(module)]
        for target in sorted(_ragtui_imports(path, module)):
            if (target if target == "ragtui" else _part(target)) not in allowed:
                wrong.append(f"{module} imports {target}")
    assert wrong == []
