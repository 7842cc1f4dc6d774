"""Concurrency: a reader searching all four modes through 500 publishes, and with reloads injected
mid-search; two writers; a lock left by a killed writer."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_concurrency import lock_cases, race_cases, reader_cases, reload_cases


@pytest.mark.parametrize("case", params(reader_cases(CI)))
def test_reader_sees_one_whole_generation(case, tmp_path):
    """The reader process checks every read in all four modes against that generation alone."""
    case(tmp_path)


@pytest.mark.parametrize("case", params(reload_cases(CI)))
def test_a_reload_injected_mid_search_never_mixes_generations(case, tmp_path):
    """Before every 5th line of ragtui's code that a flat, ivf, bm25 or hybrid search runs, another thread
    publishes and reloads: each search answers as its old generation alone or its new one alone would."""
    case(tmp_path)


@pytest.mark.parametrize("case", params(lock_cases(CI)))
def test_lock(case, tmp_path):
    """``refused``: a second writer is refused and changes nothing; ``recovered``: a lock left by a
    killed writer is taken at once."""
    case(tmp_path)


@pytest.mark.parametrize("case", params(race_cases(CI)))
def test_two_writers_racing(case, tmp_path):
    """Two processes publishing at once: each publish either succeeds or is refused, never a third outcome."""
    case(tmp_path)
