"""Every file ragtui reads outside the index, as a FIFO, a folder, a link to /dev/zero and an oversized file:
refused by name (exit 2) or, for state ragtui rebuilds, ignored; never a hang or a read without end.

Each case runs ragtui as a process: a read that blocks on a FIFO fails its case instead of the test run."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_bounded import KINDS, bounded_cases, cases


@pytest.mark.parametrize("case", params(bounded_cases(CI)))
def test_every_file_read_outside_the_index_is_bounded(case, tmp_path):
    case(tmp_path)


def test_every_file_in_every_kind():
    assert len(bounded_cases(CI)) == len(cases(None)) * len(KINDS) >= 48
