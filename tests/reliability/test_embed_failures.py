"""The embedding backend failing during ingest: no publish, the index intact, a clear message, no work redone."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_cli_http import backend_cli_cases
from tests.reliability.helpers_embed import backend_cases


@pytest.mark.parametrize("case", params(backend_cases(CI)))
def test_backend_fault(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(backend_cli_cases(CI)))
def test_cli_exits_3_and_keeps_the_index(case, tmp_path):
    case(tmp_path)
