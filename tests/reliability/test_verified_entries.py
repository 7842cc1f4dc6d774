"""Crafted or damaged verified entries, and index files tampered with under an intact one (helpers_verified)."""

from __future__ import annotations

from tests.reliability.helpers_verified import run_crafted_entries


def test_crafted_entries_never_change_what_the_reader_serves(tmp_path):
    tally = run_crafted_entries(tmp_path)
    assert tally.failures == []
    assert tally.tried >= 50
