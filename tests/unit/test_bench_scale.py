"""The scale benchmark's corpus builder: the same seed writes the same bytes, sized to the chunks asked for."""

import hashlib
import importlib.util
import os
from pathlib import Path

from tests.conftest import shared_data

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_scale_under_test", ROOT / "bench" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(folder: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = Path(dirpath) / name
            out[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_weave_marks_every_paragraph_with_the_copy_and_keeps_the_whitespace():
    bench = load_bench()
    assert bench.weave("# title\n\n- item\n`cmd`  \n \n\n", 7) == "# title [7]\n\n- item\n`cmd` [7]  \n \n\n"
    assert bench.weave("   \n", 2) == "   \n"


class LengthCounter:
    """Counts a text's chunks as one per 10 bytes (at least one): the plan's arithmetic without a tokenizer."""

    def count(self, items):
        return [max(1, len(d) // 10) for d in items]


def test_plan_fills_whole_copies_then_part_of_one_within_the_target():
    bench = load_bench()
    base = [(f"f{i:03d}.txt", b"x" * (10 * (1 + i % 7))) for i in range(100)]
    per_copy = sum(LengthCounter().count([bench.weave(d.decode(), 0).encode() for _, d in base]))
    target = 2 * per_copy + per_copy // 3
    picks, got = bench.plan_corpus(base, target, seed=5, counter=LengthCounter())
    assert 0.998 * target <= got <= target
    copies = {c for c, _ in picks}
    assert copies == {0, 1, 2}
    assert sorted(i for c, i in picks if c < 2) == sorted(list(range(100)) * 2)
    assert len(set(picks)) == len(picks)
    assert bench.plan_corpus(base, target, seed=5, counter=LengthCounter()) == (picks, got)
    assert bench.plan_corpus(base, target, seed=6, counter=LengthCounter())[0] != picks


def test_same_seed_same_bytes_and_the_chunk_count_asked_for(tmp_path):
    shared_data("corpora", "tldr-pages")
    shared_data("eval", "scifact")
    bench = load_bench()
    counts = tmp_path / "counts.json"
    one = bench.build_corpus(tmp_path / "a" / "corpus", 1000, seed=3, counts_cache=counts)
    two = bench.build_corpus(tmp_path / "b" / "corpus", 1000, seed=3, counts_cache=counts)
    files = tree(tmp_path / "a" / "corpus")
    assert files == tree(tmp_path / "b" / "corpus")
    assert one == two and one["files"] == len(files)
    assert (tmp_path / "a" / "corpus" / one["edit"]).stat().st_size < 2048
    other = bench.build_corpus(tmp_path / "c" / "corpus", 1000, seed=4, counts_cache=counts)
    assert other["sha256"] != one["sha256"]

    # The chunks ragtui's chunker cuts from the files written (woven) are within 5 % of the 1,000 asked for.
    from ragtui.core.ingest.chunker import chunk_text

    tokenizer = bench.ChunkCounter(None).tokenizer
    folder = tmp_path / "a" / "corpus"
    cut = sum(len(chunk_text((folder / rel).read_text(encoding="utf-8"), tokenizer, bench.MAX_TOKENS, bench.OVERLAP))
              for rel in files)
    assert abs(cut - 1000) <= 50, cut
