"""Hostile project configs send nothing anywhere; crafted doc_ids never make inspect read outside the folder.

Each case is its own test: the command line against real loopback servers that record every request.
"""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_config import hostile_config_cases, out_of_root_cases, url_audit_cases

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("case", params(hostile_config_cases(CI)))
def test_hostile_config_case(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(url_audit_cases(CI)))
def test_url_audit_case(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(out_of_root_cases(CI)))
def test_out_of_root_case(case, tmp_path):
    """``-inspect``: inspect in text, --json, --check and --open; ``-tui``: the TUI's source view and $EDITOR."""
    case(tmp_path)
