"""Which files are documents, under random and hostile patterns and ignore files (helpers_patterns)."""

from __future__ import annotations

import shutil

import pytest

from tests.reliability.helpers_patterns import (
    run_flag_patterns_fuzz,
    run_gitignore_vs_git,
    run_hostile_ignore_files,
    run_watch_agrees_with_walk,
)

pytestmark = pytest.mark.timeout(300)


def assert_all_passed(tally) -> None:
    assert tally.tried > 0 and tally.passed == tally.tried, tally.failures


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_ignore_files_as_git_reads_them(tmp_path):
    assert_all_passed(run_gitignore_vs_git(tmp_path, cases=80))


def test_watch_filter_agrees_with_the_walk(tmp_path):
    assert_all_passed(run_watch_agrees_with_walk(tmp_path, cases=80))


def test_hostile_ignore_files(tmp_path):
    tally = run_hostile_ignore_files(tmp_path)
    assert tally.tried >= 13
    assert_all_passed(tally)


@pytest.mark.filterwarnings("error")
def test_flag_patterns_fuzz(tmp_path):
    assert_all_passed(run_flag_patterns_fuzz(tmp_path, cases=300, cli_cases=4))
