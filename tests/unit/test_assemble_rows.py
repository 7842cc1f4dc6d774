"""The fingerprint look-up of the assembly step, against a plain dict of every row."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtui.core.ingest.assemble import _first_rows, fingerprint_keys


def fp(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).hexdigest().encode("ascii")


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.integers(0, 40), max_size=60), wanted=st.lists(st.integers(0, 60), max_size=20))
def test_first_rows_equals_a_dict_of_every_row(rows, wanted):
    fingerprints = np.array([fp(i) for i in rows], dtype="S64")
    first: dict[bytes, int] = {}
    for row, f in enumerate(fingerprints.tolist()):
        first.setdefault(f, row)
    want = [fp(i) for i in wanted]
    assert _first_rows(fingerprints, want) == {f: first[f] for f in want if f in first}


def test_fingerprints_that_share_their_first_digits_are_told_apart():
    a = b"0" * 16 + hashlib.sha256(b"a").hexdigest()[16:].encode()
    b = b"0" * 16 + hashlib.sha256(b"b").hexdigest()[16:].encode()
    fingerprints = np.array([a, fp(1), a], dtype="S64")
    assert _first_rows(fingerprints, [b, a]) == {a: 0}


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.integers(0, 40), max_size=60), wanted=st.lists(st.integers(0, 60), max_size=20),
       among=st.lists(st.booleans(), min_size=60, max_size=60))
def test_first_rows_with_kept_keys_and_among_rows(rows, wanted, among):
    """Kept keys give the same answer; ``among`` looks at those rows alone, numbered as in the whole array."""
    fingerprints = np.array([fp(i) for i in rows], dtype="S64")
    want = [fp(i) for i in wanted]
    keys = fingerprint_keys(fingerprints)
    assert _first_rows(fingerprints, want, keys) == _first_rows(fingerprints, want)
    picked = np.flatnonzero(np.array(among[: len(rows)], dtype=bool))
    first: dict[bytes, int] = {}
    for row in picked.tolist():
        first.setdefault(fingerprints[row], row)
    assert _first_rows(fingerprints, want, keys, among=picked) == {f: first[f] for f in want if f in first}
