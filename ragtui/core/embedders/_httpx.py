"""httpx, imported without its command-line client (which would load rich).

``httpx/__init__.py`` ends with ``from ._main import main``, and ``httpx._main``
imports rich, click and pygments whenever they are installed — and rich is
installed, because ragtui's own CLI uses it. core must never load rich, so
before httpx is first imported, a stand-in ``httpx._main`` is registered; the
library itself is untouched and the real ``httpx`` console script, which runs
in its own process, is unaffected. If something imported httpx earlier, this
changes nothing (rich is then already loaded by that import).

Every core module imports httpx from here: ``from ragtui.core.embedders._httpx import httpx``.
"""

from __future__ import annotations

import sys
import types

__all__ = ["httpx"]

if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
    _stand_in = types.ModuleType("httpx._main")

    def _main() -> None:
        raise SystemExit("httpx's command-line client is not available inside ragtui; run `httpx` instead")

    _stand_in.main = _main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = _stand_in

import httpx  # noqa: E402  (must follow the stand-in)
