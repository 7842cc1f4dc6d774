"""Request deadlines and answer-size bounds: chat and embedder against servers that never finish answering."""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_deadlines import answer_bound_cases, chat_deadline_cases, embed_deadline_cases


@pytest.mark.parametrize("case", params(chat_deadline_cases(CI)))
def test_chat_deadline(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(embed_deadline_cases(CI)))
def test_embedder_deadline(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(answer_bound_cases(CI)))
def test_answer_bound(case, tmp_path):
    case(tmp_path)
