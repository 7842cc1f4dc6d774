"""Corrupt indexes: >= 1,000 generated mutations of each file; the reader raises only IndexFormatError.

The oracle is a plain reference validator written from the spec
(helpers_reference): the reader must reject exactly what it rejects and,
where it accepts, return exactly the content it decoded.
"""

from __future__ import annotations

import random

import pytest

from ragtui.core.index.index_format import FILES
from tests.reliability.helpers_child import ForkServer
from tests.reliability.helpers_fuzz import run_cli_corrupt, run_fuzz
from tests.reliability.helpers_mutations import base_files, mutate
from tests.reliability.helpers_reference import Invalid, validate

PER_FILE = 1000


@pytest.mark.parametrize("name", FILES)
def test_reader_on_generated_corruptions(tmp_path, name):
    tally = run_fuzz(tmp_path, PER_FILE, names=(name,))[name]
    assert tally.tried == PER_FILE
    assert tally.failures == []


@pytest.mark.parametrize("name", FILES)
def test_most_generated_corruptions_are_invalid(name):
    """The fuzzer is worth something only if it breaks the files it says it breaks."""
    pristine = base_files()
    rng = random.Random(f"0-{name}")
    invalid = 0
    for _ in range(300):
        _, data = mutate(name, pristine[name], rng)
        try:
            validate({**pristine, name: data}, "docs")
        except Invalid:
            invalid += 1
    assert invalid >= (150 if name == "vectors.f32" else 240)  # vectors.f32 has no structure to break but size


def test_reference_accepts_the_real_writer_output():
    assert validate(base_files(), "docs")["meta"]["n_chunks"] == 6


@pytest.fixture(scope="module")
def server():
    with ForkServer() as s:
        yield s


def test_cli_exits_3_on_corrupt_indexes(tmp_path, server):
    tally = run_cli_corrupt(tmp_path, server, per_file=8, installed=1)
    assert tally.failures == []
    assert tally.tried == 4 * 8 + 4
