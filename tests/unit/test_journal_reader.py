"""EmbedJournal.reader: the journal read once, its records looked up on demand, checked as load checks them."""

from __future__ import annotations

import numpy as np

from ragtui.core.index.records import fingerprint
from ragtui.core.ingest.journal import EmbedJournal


def _unit(seed: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_the_reader_gives_what_load_gives_and_not_what_was_appended_after_it(tmp_path):
    journal = EmbedJournal(tmp_path, "docs", "model", 8)
    fps = [fingerprint(f"text {i}") for i in range(5)]
    journal.append(fps[:3], np.stack([_unit(i) for i in range(3)]))
    journal.append(fps[1:2], _unit(10)[None, :])  # a later record of the same text wins, as in load
    reader = journal.reader()
    try:
        journal.append(fps[3:4], _unit(3)[None, :])
        got = reader(fps)
        assert set(got) == set(fps[:3])
        loaded = EmbedJournal(tmp_path, "docs", "model", 8).load(set(fps[:3]))
        for fp in fps[:3]:
            assert np.array_equal(got[fp], loaded[fp])
        assert np.array_equal(got[fps[1]], _unit(10))
    finally:
        reader.close()
    again = journal.reader()
    assert set(again(fps)) == set(fps[:4])  # a new reader sees the record appended since
    again.close()


def test_a_damaged_record_or_another_model_gives_nothing(tmp_path):
    journal = EmbedJournal(tmp_path, "docs", "model", 8)
    fps = [fingerprint("a"), fingerprint("b")]
    journal.append(fps, np.stack([_unit(1), _unit(2)]))
    raw = bytearray(journal.path.read_bytes())
    raw[-10] ^= 0xFF  # inside the second record's vector: its CRC no longer matches
    journal.path.write_bytes(bytes(raw))
    reader = journal.reader()
    try:
        assert set(reader(fps)) == {fps[0]}
    finally:
        reader.close()
    other = EmbedJournal(tmp_path, "docs", "another model", 8).reader()
    try:
        assert other(fps) == {}
    finally:
        other.close()
    missing = EmbedJournal(tmp_path, "nothing here", "model", 8).reader()
    assert missing(fps) == {}
    missing.close()
