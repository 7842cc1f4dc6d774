"""Corrupt Seekite exports: >= 1,000 generated mutations of each file; the strict reader raises only
IndexFormatError naming a file of the export, on one line, and never hangs; the command exits 3."""

from __future__ import annotations

import random
import shutil

import pytest

from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import run as ragtui
from tests.reliability.cases import CI, groups, params
from tests.reliability.helpers_export import (
    FILES,
    base_export,
    check_export_corrupt,
    export_corrupt_cases,
    judge,
    mutate_export_file,
)
from tests.reliability.helpers_fuzz import seed_block


@pytest.mark.parametrize("case", params(groups(export_corrupt_cases(CI), seed_block, one_folder=True)))
def test_reader_on_generated_corruptions(case, tmp_path):
    """A hundred corruptions of one file per test (``search/corpus.json-0100-0199``); a failure names its case."""
    case(tmp_path)


def test_the_pristine_export_is_read_correctly(tmp_path):
    assert judge(base_export(tmp_path)) == (None, "accepted")


@pytest.mark.parametrize("rel", FILES)
def test_most_generated_corruptions_break_the_file_they_name(rel, tmp_path):
    """The fuzzer is worth something only if most cases break the file, and the error names it."""
    n = 200
    outcomes = [check_export_corrupt(rel, i, n, tmp_path) for i in range(n)]
    assert outcomes.count(f"rejected: {rel.rsplit('/', 1)[-1]}") >= n // 2, sorted(set(outcomes))


def test_verify_command_exits_3_naming_the_file(tmp_path):
    base = base_export(tmp_path / "base")
    for k, rel in enumerate(FILES):
        rng = random.Random(f"cli-{rel}")
        for attempt in range(50):
            site = tmp_path / f"c{k}-{attempt}"
            shutil.copytree(base, site)
            kind, data = mutate_export_file(rel, (site / rel).read_bytes(), rng)
            (site / rel).write_bytes(data)
            if judge(site)[1].startswith("rejected"):
                break
        r = ragtui("export", "--verify", str(site))
        assert r.returncode == 3 and one_clear_line(r.stderr), (rel, kind, r.returncode, r.stderr)
        assert str(site) in r.stderr and "Traceback" not in r.stderr
    ok = ragtui("export", "--verify", str(base))
    assert ok.returncode == 0 and ok.stdout.startswith("ok: docs: 6 chunks"), ok
