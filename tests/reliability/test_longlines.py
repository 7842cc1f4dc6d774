"""Long single-line documents: chunked with linear work, correctly, and ingested in bounded memory."""

from __future__ import annotations

import pytest

from tests.reliability.helpers_longlines import CI_KINDS, run_ingest_long_line, run_long_lines, wordllama_tokenizer

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(wordllama_tokenizer() is None, reason="wordllama's tokenizer is not installed"),
]


def test_long_lines_chunk_linearly(tmp_path):
    tally, notes = run_long_lines(tmp_path, CI_KINDS)
    assert tally.failures == [], notes
    assert tally.tried == 2 * len(CI_KINDS) and tally.passed == tally.tried


def test_ingest_of_a_3_mb_line_in_bounded_address_space(tmp_path):
    # Before the fix: the tokenizer hit the limit and the child hung (no exit in 300 s);
    # without a limit it held 0.8 GB and spent minutes chunking.
    tally = run_ingest_long_line(tmp_path, 3_000_000)
    assert tally.failures == [] and tally.tried == 2
