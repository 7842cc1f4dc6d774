"""Every file ragtui reads outside the index, as a FIFO, a folder, a link to /dev/zero and an oversized file:
refused by name (exit 2) or, for state ragtui rebuilds, ignored; never a hang or a read without end."""

from __future__ import annotations

from tests.reliability.helpers_bounded import KINDS, cases, run_bounded_reads


def test_every_file_read_outside_the_index_is_bounded(tmp_path):
    tally = run_bounded_reads(tmp_path)
    assert tally.failures == []
    assert tally.tried == len(cases(tmp_path)) * len(KINDS)
