"""Regression tests: a partial sync (``paths=``) must agree with a full walk of the same folder.

Both bugs were found while building the agent: a partial sync of a folder
dropped links to documents elsewhere in the folder, and a named path under a
linked folder read files outside it. Either made the index flip between two
answers depending on which kind of sync ran last.
"""

from __future__ import annotations

import os

import pytest

from ragtui.core.ingest.sync import sync
from tests.unit.fakes import HashEmbedder
from tests.watch import indexed, write

pytestmark = pytest.mark.timeout(60)


def run(folder, art, **kw):
    return sync(folder, artifacts=art, embedder=HashEmbedder(), **kw)


def test_partial_sync_of_a_folder_keeps_links_to_documents_elsewhere_in_the_folder(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(folder / "real.md", "the real document\n")
    (folder / "sub").mkdir()
    os.symlink("../real.md", folder / "sub" / "link.md")  # inside the folder: the walk indexes it
    run(folder, art)
    assert set(indexed(art)) == {"docs/real.md", "docs/sub/link.md"}
    report = run(folder, art, paths=[folder / "sub"])  # e.g. after `mv sub sub; mv sub sub` or a moved-in folder
    assert report.skipped == [] and set(indexed(art)) == {"docs/real.md", "docs/sub/link.md"}


def test_partial_sync_never_reads_outside_the_folder_through_a_linked_folder(tmp_path):
    folder, art = tmp_path / "docs", tmp_path / "art"
    write(tmp_path / "outside" / "secret.md", "outside the folder\n")
    write(folder / "a.md", "alpha\n")
    os.symlink(tmp_path / "outside", folder / "linked")  # the walk never follows it
    run(folder, art)
    run(folder, art, paths=[folder / "linked" / "secret.md"])
    assert set(indexed(art)) == {"docs/a.md"}
