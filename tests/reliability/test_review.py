"""The harness itself: bench/reliability.py's pytest rows count a file that runs no test as a failure.

A TUI row once passed with 0 of 0 cases: its test file skipped itself when our own module did not
import. Zero tests, a collection error or everything skipped must show as a failed row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TALLY = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bench_reliability", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
sys.modules["bench_reliability"] = bench
spec.loader.exec_module(bench)
t = bench.pytest_row("row", sys.argv[2])
print(json.dumps({"tried": t.tried, "passed": t.passed, "failures": t.failures}))
"""


def _tally(test_file: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", TALLY, str(REPO / "bench" / "reliability.py"), str(test_file)],
                            capture_output=True, text=True, env=env, cwd=test_file.parent, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("import ragtui.no_such_module\n\ndef test_x():\n    pass\n", "collection error"),
        ("import pytest\n\npytest.importorskip('ragtui.no_such_module')\n\ndef test_x():\n    pass\n", "no test ran"),
        ("X = 1\n", "no test ran"),
    ],
    ids=["import-error", "skipped-module", "no-tests"],
)
def test_a_file_that_runs_no_test_is_a_failed_row(tmp_path, body, why):
    test_file = tmp_path / "test_row.py"
    test_file.write_text(body)
    tally = _tally(test_file)
    assert tally["tried"] >= 1 and tally["passed"] < tally["tried"], tally
    assert any(why in f for f in tally["failures"]), tally


def test_passing_and_failing_tests_are_counted(tmp_path):
    test_file = tmp_path / "test_row.py"
    test_file.write_text("import pytest\n\n@pytest.mark.parametrize('x', [1, 2, 3])\ndef test_x(x):\n    assert x < 3\n")
    tally = _tally(test_file)
    assert (tally["tried"], tally["passed"]) == (3, 2) and len(tally["failures"]) == 1, tally
