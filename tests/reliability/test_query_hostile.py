"""Hostile query syntax through the API and the installed command (tests/reliability/helpers_query.py)."""

from __future__ import annotations

from ragtui.core.search.retriever import MODES
from tests.reliability.helpers_query import FIXED, run_hostile_syntax


def test_hostile_query_syntax(tmp_path):
    tally = run_hostile_syntax(tmp_path, n_random=60, cli_cases=2)
    assert tally.failures == []
    api = (len(FIXED) + 60) * len(MODES)  # every mode, bm25doc included
    assert api + 2 * (len(FIXED) - 1) <= tally.tried <= api + 2 * (len(FIXED) + 2)  # CLI: no argument holds NUL
