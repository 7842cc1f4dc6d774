"""A save that ends in a close after writing (IN_CLOSE_WRITE) is synced without the full quiet period: real inotify."""

from __future__ import annotations

import pytest

from tests.watch import harness_for, indexed, write

pytestmark = pytest.mark.timeout(120)

HOUR = 3600.0
"""A quiet period no test waits out: a batch released at all was released by the close."""


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


def test_a_save_closed_after_writing_is_synced_without_the_quiet_period(harness):
    write(harness.folder / "a.md", "alpha original\n")
    agent, rec = harness.agent(quiet_seconds=HOUR, max_delay=HOUR, settle_seconds=HOUR)
    assert agent.mode == "inotify"
    write(harness.folder / "a.md", "alpha saved and closed\n")  # open, write, close: IN_CLOSE_WRITE last
    write(harness.folder / "b.md", "beta written and closed too\n")
    rec.wait_for(lambda: indexed(harness.artifacts) == {"docs/a.md": "alpha saved and closed",
                                                         "docs/b.md": "beta written and closed too"},
                 "both saves to be searchable")
    fulls = [e.data["full"] for e in rec.events if e.kind == "batch"]
    assert fulls[0] == "start" and all(full is None for full in fulls[1:])  # path batches, not a reconcile
