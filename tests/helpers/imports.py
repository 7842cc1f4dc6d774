"""The one import-purity check: which libraries importing a module pulls in, seen from a fresh interpreter.

A fresh interpreter is needed because the test process itself has long since
imported textual, rich and watchdog. The child inherits the environment, so
``PYTHONPATH`` (a worktree) applies to it as well.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence

__all__ = ["UI_LIBRARIES", "loaded_by_import"]

UI_LIBRARIES = ("textual", "rich")
"""What no headless module (core, watch, config, the TUI's backend) may load."""


def loaded_by_import(module: str | Sequence[str], watched: Iterable[str], *, resolve_all: bool = False) -> set[str]:
    """Import ``module`` (or each of several, one after another) in a new interpreter; return which of the
    ``watched`` modules that loaded.

    With ``resolve_all`` every name in the module's ``__all__`` is looked up as
    well, so a lazy API (a module ``__getattr__``) imports what it exports. An
    import that fails, or a name in ``__all__`` that does not resolve, fails
    the calling test with the child's traceback.
    """
    watched = tuple(watched)
    modules = [module] if isinstance(module, str) else list(module)
    code = "\n".join(
        [
            "import importlib, sys",
            f"for name in {modules!r}:",
            "    m = importlib.import_module(name)",
            *(["    for n in getattr(m, '__all__', ()): getattr(m, n)"] if resolve_all else []),
            f"print(' '.join(x for x in {watched!r} if x in sys.modules))",
        ]
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, f"importing {module} in a fresh interpreter failed:\n{done.stderr[-3000:]}"
    return set(done.stdout.split())
