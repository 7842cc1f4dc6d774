"""ragtui.watch loads no UI library, and every public name of it resolves and is documented."""

from __future__ import annotations

import pytest

import ragtui.watch
from tests.helpers.imports import UI_LIBRARIES, loaded_by_import

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    "module", ["ragtui.watch", "ragtui.watch.agent", "ragtui.watch.events", "ragtui.watch.observers", "ragtui.commands.watch"]
)
def test_no_ui_library_loads(module):
    assert loaded_by_import(module, UI_LIBRARIES, resolve_all=True) == set()


def test_every_public_name_is_documented():
    assert ragtui.watch.__all__, "ragtui.watch exports nothing"
    for name in ragtui.watch.__all__:
        assert getattr(ragtui.watch, name).__doc__, name
