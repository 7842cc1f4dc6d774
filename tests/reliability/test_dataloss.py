"""Data loss: damaged indexes resync from the whole folder, bad vector rows, unreadable files, same-name folders."""

from __future__ import annotations

from tests.reliability.helpers_dataloss import (
    DAMAGE,
    MODES,
    ROW_ACCEPTED,
    ROW_VALUES,
    ROWS,
    UNREADABLE_CASES,
    run_bad_vector_rows,
    run_damaged_resync,
    run_same_name_refused,
    run_unreadable_keeps_chunks,
)


def test_damaged_state_resync(tmp_path):
    tally = run_damaged_resync(tmp_path)
    assert tally.failures == []
    assert tally.tried == len(DAMAGE) * len(MODES)


def test_bad_vector_rows(tmp_path):
    tally = run_bad_vector_rows(tmp_path)
    assert tally.failures == []
    assert tally.tried == len(ROW_VALUES) * len(ROWS) + len(ROW_ACCEPTED)


def test_unreadable_file_keeps_chunks():
    tally, _ = run_unreadable_keeps_chunks()
    assert tally.failures == []
    assert tally.tried == len(UNREADABLE_CASES)


def test_same_name_folder_refused(tmp_path):
    tally = run_same_name_refused(tmp_path)
    assert tally.failures == []
    assert tally.tried == 6
