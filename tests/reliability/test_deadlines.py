"""Request deadlines and answer-size bounds: chat and embedder against servers that never finish answering."""

from __future__ import annotations

import pytest

from tests.reliability import helpers_deadlines as h


@pytest.fixture(scope="module")
def shared():
    from tests.helpers.embed_server import EmbedServer

    with EmbedServer() as s:
        yield s


def _ok(tally) -> None:
    assert tally.tried > 0 and tally.passed == tally.tried, tally.failures


def test_chat_deadlines(tmp_path):
    _ok(h.run_chat_deadlines(tmp_path))


def test_embedder_deadlines(tmp_path, shared):
    _ok(h.run_embed_deadlines(tmp_path, shared))


def test_answer_bounds(tmp_path, shared):
    _ok(h.run_answer_bounds(tmp_path, shared))
