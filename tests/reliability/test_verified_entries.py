"""Crafted or damaged verified entries, and index files tampered with under an intact one (helpers_verified)."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_verified import crafted_cases


@pytest.mark.parametrize("case", params(crafted_cases(CI)))
def test_crafted_entry_never_changes_what_the_reader_serves(case, tmp_path):
    case(tmp_path)


def test_the_crafted_entries_are_many():
    assert len(crafted_cases(CI)) >= 50
