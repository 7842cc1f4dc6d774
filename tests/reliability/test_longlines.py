"""Long single-line documents: chunked with linear work, correctly, and ingested in bounded memory."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_longlines import ingest_long_line_cases, long_line_cases, wordllama_tokenizer

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(wordllama_tokenizer() is None, reason="wordllama's tokenizer is not installed"),
]


@pytest.mark.parametrize("case", params(long_line_cases(CI)))
def test_long_lines_chunk_linearly(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(ingest_long_line_cases(CI)))
def test_ingest_of_a_long_line_in_bounded_address_space(case, tmp_path):
    # Before the fix: the tokenizer hit the limit and the child hung (no exit in 300 s);
    # without a limit it held 0.8 GB and spent minutes chunking.
    case(tmp_path)
