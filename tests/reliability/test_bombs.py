"""Bombs in the artifacts folder and hostile queries, through the installed command (helpers_bombs).

Every command runs as a subprocess with a 1 GiB address-space limit and a
timeout, so a reader that blocks on a FIFO or reads /dev/zero to the end
fails its case instead of hanging or exhausting the test run.
"""

from __future__ import annotations

import pytest

from ragtui.core.search.retriever import MODES
from tests.reliability.cases import CI, params
from tests.reliability.helpers_bombs import COMMANDS, INDEX_FILES, KINDS, bomb_cases, plan, query_cases

pytestmark = pytest.mark.timeout(900)


def test_the_plan_covers_every_file_kind_and_command():
    cases = plan(full=False)
    for target in (*INDEX_FILES, "generation", "link"):
        assert {(k, c) for t, k, c in cases if t == target} >= {(k, c) for k in KINDS for c in ("info", "ingest")}
        assert {c for t, _, c in cases if t == target} == set(COMMANDS)
    assert {t for t, _, _ in cases} >= {"cache", "state.bin", "embedded.bin", "lock"}
    assert len(plan(full=True)) == 6 * len(KINDS) * len(COMMANDS) + 7 * len(KINDS)


@pytest.mark.parametrize("case", params(bomb_cases(CI)))
def test_index_bomb(case, tmp_path):
    case(tmp_path)


def test_hostile_queries_cover_every_mode():
    # 13 hostile queries per mode (CLI and API) and 30 cases that do not depend on the mode.
    assert len(query_cases(CI)) == 30 + 13 * len(MODES)


@pytest.mark.parametrize("case", params(query_cases(CI)))
def test_hostile_query(case, tmp_path):
    case(tmp_path)
