"""An embedding API key never appears in meta.json (or any artifact), output, --json, errors or logs."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_cli_http import secrets_cases


@pytest.mark.parametrize("case", params(secrets_cases(CI)))
def test_key_stays_out(case, tmp_path):
    case(tmp_path)
