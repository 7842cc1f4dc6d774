"""A publishing writer killed (SIGKILL) before each of its I/O steps in turn: old or new index, never a mix."""

from __future__ import annotations

import pytest

from tests.reliability.helpers_child import ForkServer
from tests.reliability.helpers_kill import EXPORT_SCENARIOS, SCENARIOS, run_export_kill_harness, run_kill_harness


@pytest.fixture(scope="module")
def server():
    with ForkServer() as s:
        yield s


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_kill_at_every_step(tmp_path, server, scenario):
    """``update``: a realistic incremental publish; ``first``: the first publish of an index;
    ``adopt``: replacing an index another tool wrote as a plain directory."""
    tally, steps = run_kill_harness(tmp_path, server, scenario)
    assert len(steps) >= 50, f"a realistic publish should have at least 50 steps, counted {len(steps)}"
    assert tally.failures == []
    assert tally.tried == len(steps) + 1


@pytest.mark.parametrize("scenario", EXPORT_SCENARIOS)
def test_export_killed_at_every_step(tmp_path, server, scenario):
    """The export's target holds the old or the new export after a SIGKILL at any step, and the next
    export removes what the killed one left."""
    tally, steps = run_export_kill_harness(tmp_path, server, scenario)
    assert len(steps) >= 20, f"an export of six documents should have at least 20 steps, counted {len(steps)}"
    assert tally.failures == []
    assert tally.tried == len(steps) + 1
