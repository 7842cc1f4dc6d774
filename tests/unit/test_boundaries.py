"""The headless packages never load a UI library (checked in a fresh interpreter)."""

from pathlib import Path

import pytest

from tests.helpers.imports import UI_LIBRARIES, loaded_by_import

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


@pytest.mark.parametrize("module", HEADLESS)
def test_headless_module_loads_no_ui(module):
    loaded = loaded_by_import(module, (*UI_LIBRARIES, "watchdog"))
    allowed = {"watchdog"} if module.startswith("ragtui.watch") else set()
    assert loaded - allowed == set()


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


# Which parts of ragtui each part may import (spec/architecture.md, "Import rules"). A part
# is ragtui.<name> (a module or a package); "ragtui" alone is the package root, whose
# lazy exports core reads only for __version__. Imports point down: cli/commands/tui ->
# app -> watch -> core; nothing imports the cli but __main__.
MAY_IMPORT = {
    "ragtui.core": {"ragtui", "ragtui.core"},
    "ragtui.config": {"ragtui.core"},
    "ragtui.progress": {"ragtui.terminal"},
    "ragtui.terminal": {"ragtui.core"},
    "ragtui.watch": {"ragtui.core", "ragtui.watch"},
    "ragtui.request": {"ragtui.config", "ragtui.core"},
    "ragtui.editor": {"ragtui.core"},
    "ragtui.app": {"ragtui.config", "ragtui.core", "ragtui.request", "ragtui.terminal", "ragtui.watch"},
    "ragtui.tui": {"ragtui.tui", "ragtui.app", "ragtui.request", "ragtui.editor", "ragtui.config", "ragtui.core",
                   "ragtui.watch"},
    "ragtui.commands": {"ragtui.commands", "ragtui.app", "ragtui.request", "ragtui.editor", "ragtui.config",
                        "ragtui.core", "ragtui.progress", "ragtui.terminal", "ragtui.watch", "ragtui.mcp"},
    "ragtui.mcp": {"ragtui.mcp", "ragtui.app", "ragtui.request", "ragtui.config", "ragtui.core"},
    "ragtui.cli": {"ragtui", "ragtui.app", "ragtui.commands", "ragtui.core", "ragtui.terminal", "ragtui.tui"},
    "ragtui.__main__": {"ragtui.cli"},
    # The package root's public API: its TYPE_CHECKING block names the classes the lazy exports load.
    "ragtui": {"ragtui.core", "ragtui.watch"},
}

# Inside core, the groups follow the data flow: the index is read by search, which ingest and
# eval build on; export reads the index and search's int8 encoding, and nothing in core imports
# it. (The root modules errors, files, fsops and textsafe, and embedders/ and documents/, are
# shared; citations/ reads the index and the ingested folder's record; answer/ builds on search
# and citations.)
CORE_MAY_NOT_IMPORT = {
    "ragtui.core.index": ("ragtui.core.search", "ragtui.core.ingest", "ragtui.core.eval", "ragtui.core.export"),
    "ragtui.core.search": ("ragtui.core.ingest", "ragtui.core.eval", "ragtui.core.export"),
    "ragtui.core.export": ("ragtui.core.ingest", "ragtui.core.eval"),
}

ALLOWED_CYCLES: dict[frozenset[str], str] = {}
"""Import cycles known and tolerated for now, each with why; one that is gone must leave this list."""

PACKAGE = Path(__file__).resolve().parents[2] / "ragtui"


def _part(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _modules() -> dict[str, Path]:
    """Every module of ragtui by its dotted name (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _ragtui_imports(path: Path, module: str, known=(), *, typing: bool = True) -> set[str]:
    """Every ragtui module ``path`` imports, anywhere in it (inside functions too), relative imports resolved.

    ``from package import name`` counts as importing ``package.name`` when that is one of the ``known``
    modules (``from ragtui import app``), else as importing ``package``. ``typing=False`` leaves out the
    imports under ``if TYPE_CHECKING:``, which only a type checker makes.
    """
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    if not typing:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join([*base, node.module] if node.module else base)
            names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source for alias in node.names]
        else:
            continue
        found.update(n for n in names if n == "ragtui" or n.startswith("ragtui."))
    return found


def _import_graph() -> dict[str, set[str]]:
    """module -> the ragtui modules it imports at run time (itself left out), from every import statement in it
    but those only a type checker makes."""
    modules = _modules()
    return {m: _ragtui_imports(path, m, modules, typing=False) - {m} for m, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per group of modules that import each other, as a path that ends where it starts."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # the shortest way from the group's first module back to it
        start = min(group)
        paths = {start: [start]}
        frontier = [start]
        while frontier and start not in [w for v in frontier for w in graph[v]]:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & group):
                    if w not in paths:
                        paths[w] = [*paths[v], w]
                        nxt.append(w)
            frontier = nxt
        last = next(v for v in frontier if start in graph[v])
        cycles.append([*paths[last], start])
    return sorted(cycles)


def test_imports_point_down():
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        allowed = MAY_IMPORT[_part(module)]
        for target in sorted(_ragtui_imports(path, module, modules)):
            if (target if target == "ragtui" else _part(target)) not in allowed:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_nothing_imports_the_cli():
    """The CLI parses and dispatches; what the front ends share lives in ragtui.app."""
    graph = _import_graph()
    assert sorted(m for m, targets in graph.items() if "ragtui.cli" in targets) == ["ragtui.__main__"]


def test_the_import_graph_has_no_cycles():
    found = {frozenset(cycle): " -> ".join(cycle) for cycle in _cycles(_import_graph())}
    assert sorted(text for group, text in found.items() if group not in ALLOWED_CYCLES) == []
    assert [ALLOWED_CYCLES[g] for g in ALLOWED_CYCLES if g not in found] == [], "a tolerated cycle is gone: drop it"


def test_the_cycle_finder_reports_each_cycle_as_its_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}, "f": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["e", "e2", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_in_functions_and_submodules_named_in_from(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from ragtui import app\nfrom ragtui import __version__\n"
                      "def f():\n    from ragtui.core.errors import UsageError\n    from . import sibling\n")
    found = _ragtui_imports(source, "ragtui.commands.mod", {"ragtui.app", "ragtui.commands.sibling"})
    assert found == {"ragtui.app", "ragtui", "ragtui.core.errors", "ragtui.commands.sibling"}


def test_core_groups_import_down():
    wrong = []
    for module, targets in _import_graph().items():
        for group, forbidden in CORE_MAY_NOT_IMPORT.items():
            if module == group or module.startswith(group + "."):
                wrong += [f"{module} imports {t}" for t in sorted(targets)
                          if any(t == f or t.startswith(f + ".") for f in forbidden)]
    assert wrong == []
