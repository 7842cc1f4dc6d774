"""ragtui.watch loads no UI library, and its public surface is pinned."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ragtui.watch

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "module", ["ragtui.watch", "ragtui.watch.agent", "ragtui.watch.events", "ragtui.watch.observers", "ragtui.commands.watch"]
)
def test_no_ui_library_loads(module):
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(' '.join(sorted(m for m in ('textual', 'rich') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_public_api_is_pinned():
    assert ragtui.watch.__all__ == sorted(ragtui.watch.__all__)
    assert ragtui.watch.__all__ == [
        "AgentEvent", "AgentStats", "Batch", "Change", "ChangeBuffer", "Hooks", "IndexFollower", "Scope",
        "WatchAgent", "classify", "make_observer",
    ]
    for name in ragtui.watch.__all__:
        assert getattr(ragtui.watch, name).__doc__, name
