"""Hostile project configs send nothing anywhere; crafted doc_ids never make inspect read outside the folder.

Each case is its own test (a real ``ragtui`` subprocess, real loopback
servers that record every request); the last test runs the runners the
reliability table uses and asserts every case passed.
"""

from __future__ import annotations

import pytest

from tests.reliability.helpers_config import (
    OUT_OF_ROOT,
    check_out_of_root,
    check_out_of_root_tui,
    hostile_cases,
    run_hostile_config,
    run_out_of_root,
    run_url_audit,
    url_audit_cases,
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def embedder():
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder

    return WordLlamaEmbedder()


@pytest.mark.parametrize("name", list(hostile_cases(None)))
def test_hostile_config_case(tmp_path, embedder, name):
    hostile_cases(embedder)[name](tmp_path)


@pytest.mark.parametrize("name", list(url_audit_cases(None)))
def test_url_audit_case(tmp_path, embedder, name):
    url_audit_cases(embedder)[name](tmp_path)


@pytest.mark.parametrize("name", list(OUT_OF_ROOT))
def test_out_of_root_case(tmp_path, name):
    check_out_of_root(tmp_path, name)


@pytest.mark.parametrize("name", list(OUT_OF_ROOT))
def test_out_of_root_case_in_the_tui(tmp_path, name):
    check_out_of_root_tui(tmp_path, name)


def test_runners_count_every_case(tmp_path, embedder):
    hostile, _notes = run_hostile_config(tmp_path / "config", embedder)
    outside, _notes = run_out_of_root(tmp_path / "root")
    audit, _notes = run_url_audit(tmp_path / "audit", embedder)
    for tally in (hostile, outside, audit):
        assert tally.failures == [] and tally.passed == tally.tried > 0, tally.failures
