"""Data loss: damaged indexes resync from the whole folder, bad vector rows, unreadable files, same-name folders."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_dataloss import (
    bad_row_cases,
    damaged_resync_cases,
    same_folder_name_cases,
    unreadable_cases,
)


@pytest.mark.parametrize("case", params(damaged_resync_cases(CI)))
def test_damaged_state_resync(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(bad_row_cases(CI)))
def test_bad_vector_row(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(unreadable_cases(CI)))
def test_unreadable_keeps_chunks(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(same_folder_name_cases(CI)))
def test_same_folder_name(case, tmp_path):
    case(tmp_path)
