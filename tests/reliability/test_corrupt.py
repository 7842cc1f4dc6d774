"""Corrupt indexes: >= 1,000 generated mutations of each file; the reader raises only IndexFormatError.

The oracle is a plain reference validator written from the spec
(helpers_reference): the reader must reject exactly what it rejects and,
where it accepts, return exactly the content it decoded.
"""

from __future__ import annotations

import random

import pytest

from ragtui.core.index.index_format import FILES
from tests.reliability.cases import CI, groups, params
from tests.reliability.helpers_fuzz import cli_corrupt_cases, corrupt_cases, judge, seed_block
from tests.reliability.helpers_mutations import base_files, mutate
from tests.reliability.helpers_reference import Invalid, validate


@pytest.mark.parametrize("case", params(groups(corrupt_cases(CI), seed_block, one_folder=True)))
def test_reader_on_generated_corruptions(case, tmp_path):
    """A hundred corruptions of one file per test (``meta.json-0100-0199``); a failure names its case."""
    case(tmp_path)


def test_the_pristine_index_is_read_as_the_reference_reads_it(tmp_path):
    index = tmp_path / "docs"
    index.mkdir()
    for name, data in base_files().items():
        (index / name).write_bytes(data)
    assert judge(index, base_files()) is None


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


@pytest.mark.parametrize("case", params(cli_corrupt_cases(CI)))
def test_cli_exits_3_on_corrupt_indexes(case, tmp_path):
    case(tmp_path)
