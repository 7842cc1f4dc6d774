"""Hostile query syntax through the API and the installed command (tests/reliability/helpers_query.py)."""

from __future__ import annotations

import pytest

from ragtui.core.search.retriever import MODES
from tests.reliability.cases import CI, params
from tests.reliability.helpers_query import FIXED, syntax_cases


@pytest.mark.parametrize("case", params(syntax_cases(CI)))
def test_hostile_query_syntax(case, tmp_path):
    case(tmp_path)


def test_every_query_in_every_mode():
    n = len(syntax_cases(CI))
    api = (len(FIXED) + 60) * len(MODES)  # every mode, bm25doc included
    assert api + 2 * (len(FIXED) - 1) <= n <= api + 2 * (len(FIXED) + 2)  # CLI: no argument holds NUL
