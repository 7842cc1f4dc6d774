"""Which files are documents, under random and hostile patterns and ignore files (helpers_patterns)."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, groups, params
from tests.reliability.helpers_patterns import (
    flag_pattern_cases,
    gitignore_cases,
    hostile_ignore_cases,
    watch_agrees_cases,
)

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("case", params(gitignore_cases(CI)))
def test_ignore_files_as_git_reads_them(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(watch_agrees_cases(CI)))
def test_watch_filter_agrees_with_the_walk(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(hostile_ignore_cases(CI)))
def test_hostile_ignore_file(case, tmp_path):
    case(tmp_path)


def test_every_kind_of_hostile_ignore_file():
    assert len(hostile_ignore_cases(CI)) >= 13


def _hundreds(case) -> str:
    kind, i = case.id.rsplit("-", 1)
    return f"{kind}-{int(i) // 100 * 100:04d}" if kind == "pattern" else case.id


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("case", params(groups(flag_pattern_cases(CI), _hundreds)))
def test_flag_patterns(case, tmp_path):
    """A hundred random patterns per test (``pattern-0100``), and each through the CLI (``cli-2``)."""
    case(tmp_path)
