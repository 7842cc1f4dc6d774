"""A reader of a generation with an overlay searches the next generation: what ``ragtui watch`` saved and has not
published yet, ranked as the published next generation will rank it.

The overlay is made by the real writer: a save whose publish fails (no directory can be made) after the overlay
was written leaves the generation current and its overlay beside it, as a watch agent does for the seconds of a
publish at a million chunks. The reference is an index of the saved folder built from scratch.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from ragtui.core.citations import Resolver
from ragtui.core.index.index_format import IndexData
from ragtui.core.index.overlay import generation_dir_of, overlay_path
from ragtui.core.ingest.sync import IndexWriter
from ragtui.core.search.explain import explain_search
from ragtui.core.search.overlaid import OverlaidData
from ragtui.core.search.retriever import Retriever
from tests.files import write
from tests.unit.publishfaults import save_unpublished

from .fakes import HashEmbedder

WORDS = ["cat", "dog", "mat", "the", "park", "bird", "zebra", "alpha", "fjord", "otter", "river", "stone"]
MODES = ["bm25", "bm25doc", "bm25stem", "flat", "ivf", "hybrid"]


def writer(folder: Path, art: Path, overlay: bool = True) -> IndexWriter:
    return IndexWriter(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=12, overlap=3, overlay=overlay)


def open_reader(art: Path) -> Retriever:
    return Retriever.open(art / "rag" / "docs", embedder=HashEmbedder(), cache_dir=art / "rag" / ".cache")


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture
def layered(tmp_path):
    """(the folder's artifacts with an unpublished save, a reader opened before it, the reference index's art)."""
    rng = random.Random(5)
    folder, art = tmp_path / "docs", tmp_path / "art"
    for i in range(12):
        write(folder / f"d{i:02d}.md", text(rng, rng.randint(5, 60)))
    w = writer(folder, art)
    w.sync()
    before = open_reader(art)
    write(folder / "d03.md", text(rng, 40) + " quokka")  # changed: a word nobody had
    (folder / "d07.md").unlink()  # removed
    write(folder / "a00.md", text(rng, 30))  # added before every other
    write(folder / "z99.md", "otter otter quokka " + text(rng, 8))  # added after every other
    save_unpublished(w)
    reference = tmp_path / "ref"
    writer(folder, reference, overlay=False).sync()
    return art, before, reference


def ranked(reader: Retriever, query: str, mode: str, **params: object) -> list[tuple[str, int, float]]:
    return [(h.chunk_id, h.row, h.score) for h in reader.search(query, mode=mode, k=8, **params)]  # type: ignore[arg-type]


def same(got: list[tuple[str, int, float]], want: list[tuple[str, int, float]]) -> None:
    assert [(c, r) for c, r, _ in got] == [(c, r) for c, r, _ in want]
    assert np.allclose([s for *_, s in got], [s for *_, s in want], rtol=0, atol=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_a_reader_opened_after_the_save_searches_it_as_the_next_index_will(layered, mode):
    art, _, reference = layered
    reader, ref = open_reader(art), open_reader(reference)
    assert isinstance(reader.data, OverlaidData) and isinstance(reader.published, IndexData)
    assert reader.data.n_chunks == ref.data.n_chunks != reader.published.n_chunks
    params = {"nprobe": 10_000} if mode == "ivf" else {}
    for query in ("quokka", "otter river", "the cat sat on the mat", "zebra", "nothing-matches-this"):
        same(ranked(reader, query, mode, **params), ranked(ref, query, mode, **params))
    found = reader.search("quokka", mode="bm25", k=5)
    assert {h.doc_id for h in found} == {"docs/d03.md", "docs/z99.md"}


def test_its_records_vectors_and_citations_are_the_next_generations(layered):
    art, _, reference = layered
    view, ref = open_reader(art).data, open_reader(reference).data
    assert [r.chunk_id for r in view.records] == [r.chunk_id for r in ref.records]
    assert all(view.records[i] == ref.records[i] for i in range(len(ref.records)))
    assert np.array_equal(view.vectors.take(np.arange(view.n_chunks)), ref.vectors)
    for row in (0, 5, len(ref.records) - 1):
        assert view.records.find(ref.records[row].chunk_id) == row
    assert view.records.find("docs/d07.md#0") == -1  # removed by the save
    cited = Resolver(view).resolve("docs/z99.md#0")
    assert cited.row == ref.records.find("docs/z99.md#0") and "quokka" in cited.record.text
    assert cited.start_line == 1  # found in the file as saved


def test_a_reader_open_before_the_save_takes_it_on_reload_then_the_publish(layered, tmp_path):
    art, before, _ = layered
    want = ranked(open_reader(art), "quokka otter", "hybrid")
    assert not isinstance(before.data, OverlaidData)
    pinned = before.snapshot()
    assert before.reload() and isinstance(before.data, OverlaidData)
    assert not before.reload()  # nothing new since
    assert not isinstance(pinned.data, OverlaidData)  # a snapshot keeps what it was taken on
    same(ranked(before, "quokka otter", "hybrid"), want)
    layered_snapshot = before.snapshot()
    writer(tmp_path / "docs", art).sync()  # the publish follows
    assert before.reload() and isinstance(before.data, IndexData)
    same(ranked(before, "quokka otter", "hybrid"), want)
    assert isinstance(layered_snapshot.data, OverlaidData)  # still the view it was taken on, whole
    same(ranked(layered_snapshot, "quokka otter", "hybrid"), want)


def test_post_ranking_steps_run_on_the_next_generations_rows(layered):
    art, _, reference = layered
    reader, ref = open_reader(art), open_reader(reference)
    for params in ({"mmr": 0.5}, {"merge": True}, {"min_score": 0.1}):
        got = reader.search("otter quokka river", mode="hybrid", k=6, **params)
        want = ref.search("otter quokka river", mode="hybrid", k=6, **params)
        assert [(h.chunk_id, h.row, h.rows) for h in got] == [(h.chunk_id, h.row, h.rows) for h in want]


@pytest.mark.parametrize("mode", MODES)
def test_query_syntax_searches_the_save_too(layered, mode):
    art, _, reference = layered
    reader, ref = open_reader(art), open_reader(reference)
    for query in ('"otter" path:docs/d0*', "quokka -zebra", "ott* OR stone", 'lang:markdown "the cat"'):
        got, want = reader.search(query, mode=mode, k=8), ref.search(query, mode=mode, k=8)
        same([(h.chunk_id, h.row, h.score) for h in got], [(h.chunk_id, h.row, h.score) for h in want])
        assert got.notes == want.notes and got.expansions == want.expansions


def test_explanations_are_of_the_published_generation(layered):
    art, _, _ = layered
    explained = explain_search(open_reader(art), "otter", "bm25", 5)
    published = open_reader(art).published
    for e in explained.explanations:
        assert published.records[e.hit.row].chunk_id == e.hit.chunk_id


def test_a_damaged_overlay_is_ignored(layered):
    art, _, _ = layered
    reader = open_reader(art)
    where = overlay_path(generation_dir_of(reader.published))
    raw = where.read_bytes()
    where.write_bytes(raw[: len(raw) // 2])
    fresh = open_reader(art)
    assert not isinstance(fresh.data, OverlaidData)
    assert fresh.search("otter", mode="bm25", k=3)
    assert reader.reload() and not isinstance(reader.data, OverlaidData)  # the view it had is dropped
    assert not reader.reload()  # and the damaged file is not read again


def test_fitting_the_fusion_reads_the_generation_as_published(layered):
    """The fit reads each arm's ranking from the search's trace: with a save's overlay beside the index it fits
    the published generation, as a reader opened before the save would."""
    from ragtui.core.eval.datasets import Dataset
    from ragtui.core.eval.fit import fit_fusion

    art, before, _ = layered
    reader = open_reader(art)
    assert isinstance(reader.data, OverlaidData)
    dataset = Dataset("tiny", "native", str(art), None, None,
                      queries={"q1": "otter river", "q2": "the cat sat"},
                      qrels={"q1": {"docs/d01.md": 1.0}, "q2": {"docs/d05.md": 1.0}})
    got = fit_fusion(reader, dataset)
    want = fit_fusion(before, dataset)
    assert got[0] == want[0] and got[2] == want[2]
    assert isinstance(reader.data, OverlaidData)  # the reader itself still searches the save
