"""Corrupt Seekite exports: >= 1,000 generated mutations of each file; the strict reader raises only
IndexFormatError naming a file of the export, on one line, and never hangs; the command exits 3."""

from __future__ import annotations

import random
import shutil

import pytest

from tests.reliability.helpers import one_clear_line, ragtui
from tests.reliability.helpers_export import FILES, base_export, judge, mutate_export_file, run_export_fuzz

PER_FILE = 1000


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    return run_export_fuzz(tmp_path_factory.mktemp("fuzz"), PER_FILE)


@pytest.mark.parametrize("rel", FILES)
def test_reader_on_generated_corruptions(fuzzed, rel):
    tally, outcomes = fuzzed[rel]
    assert tally.tried == PER_FILE
    assert tally.failures == []
    # The fuzzer is worth something only if most cases break the file, and the error names it.
    named = outcomes.get(f"rejected: {rel.rsplit('/', 1)[-1]}", 0)
    assert named >= PER_FILE // 2, outcomes


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
