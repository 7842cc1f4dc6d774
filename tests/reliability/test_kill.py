"""A publishing writer killed (SIGKILL) before each of its I/O steps in turn: old or new index, never a mix.

``update``: a realistic incremental publish; ``first``: the first publish of an index; ``adopt``:
replacing an index another tool wrote as a plain directory. The export's scenarios: ``new``
(nothing at the target), ``empty`` (an empty folder there), ``replace`` (a previous export there).
Each kill point is a test of its own: ``test_writer_killed_before_step[update-17]``.
"""

from __future__ import annotations

import pytest

from tests.reliability.cases import CI, params
from tests.reliability.helpers_kill import (
    EXPORT_SCENARIOS,
    SCENARIOS,
    _counted,
    _export_counted,
    export_kill_cases,
    kill_cases,
)


@pytest.mark.parametrize("case", params(kill_cases(CI)))
def test_writer_killed_before_step(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("case", params(export_kill_cases(CI)))
def test_export_killed_before_step(case, tmp_path):
    case(tmp_path)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_publish_has_the_steps_of_a_real_one(scenario):
    steps = _counted(scenario)[0]
    assert len(steps) >= 50, f"a realistic publish should have at least 50 steps, counted {len(steps)}"


@pytest.mark.parametrize("scenario", EXPORT_SCENARIOS)
def test_an_export_has_the_steps_of_a_real_one(scenario):
    steps = _export_counted(scenario)[0]
    assert len(steps) >= 20, f"an export of six documents should have at least 20 steps, counted {len(steps)}"
