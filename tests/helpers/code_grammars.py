"""The code grammars (``ragtui[code]``): tests that need them skip when they are not installed, and fail instead
when ``RAGTUI_REQUIRE_CODE`` is set (CI sets it, so a missing extra cannot pass as a skip)."""

from __future__ import annotations

import os

import pytest

from ragtui.core.code.languages import missing_grammars


def require_grammars() -> None:
    missing = missing_grammars()
    if not missing:
        return
    reason = f"the code grammars are not installed ({', '.join(missing)}): pip install 'ragtui[code]'"
    if os.environ.get("RAGTUI_REQUIRE_CODE"):
        pytest.fail(f"RAGTUI_REQUIRE_CODE is set but {reason}")
    pytest.skip(reason)


@pytest.fixture
def grammars() -> None:
    require_grammars()
