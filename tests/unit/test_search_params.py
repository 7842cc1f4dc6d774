"""Search parameters: a misspelt or misplaced one is an error naming the valid one, checked before any work."""

from __future__ import annotations

import numpy as np
import pytest

from ragtui.core.errors import UsageError
from ragtui.core.search import fusion
from ragtui.core.search.retriever import MODES, PARAMS, Retriever, check_search
from tests.unit.fakes import HashEmbedder
from tests.unit.indexgen import build

DOCS = {
    "a.md": ["cats purr and sleep", "cats chase mice"],
    "b.md": ["dogs fetch sticks", "dogs guard the house"],
    "c.md": ["birds sing at dawn"],
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    art = tmp_path_factory.mktemp("params") / "art"
    path, _, _ = build(art, "docs", DOCS)
    return Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))


def _refused(retriever, match: str, *args, **kwargs) -> None:
    embedded = len(retriever.embedder.embedded)
    with pytest.raises(UsageError, match=match):
        retriever.search(*args, **kwargs)
    assert len(retriever.embedder.embedded) == embedded, "the query was embedded before the parameters were checked"


@pytest.mark.parametrize(
    ("mode", "params", "match"),
    [
        ("hybrid", {"wieght": 0.9}, r"unknown search parameter 'wieght' \(did you mean 'weight'\?\): hybrid search takes"),
        ("hybrid", {"fuson": "rrf"}, r"'fuson' \(did you mean 'fusion'\?\)"),
        ("ivf", {"n_probe": 4}, r"unknown search parameter 'n_probe' \(did you mean 'nprobe'\?\): ivf search takes nprobe"),
        ("flat", {"top": 3}, r"unknown search parameter 'top': flat search takes no parameters"),
        ("hybrid", {"wieght": None}, r"'wieght' \(did you mean 'weight'\?\)"),  # unknown even when None
        ("bm25", {"nprobe": 4}, r"nprobe applies to ivf search, not bm25"),
        ("flat", {"weight": 0.5}, r"weight applies to hybrid search, not flat"),
        ("hybrid", {"fusion": "rrf", "weight": 0.5}, r"weight applies to weighted fusion, not rrf"),
        ("hybrid", {"fusion": "weighted", "rrf_k": 10}, r"rrf_k applies to rrf fusion, not weighted"),
        ("hybrid", {"rrf_k": 10}, r"rrf_k applies to rrf fusion, not weighted"),  # weighted is the default
        ("hybrid", {"fusion": "rfr"}, r"unknown fusion 'rfr' \(did you mean 'rrf'\?\)"),
        ("hybrid", {"weight": "heavy"}, r"fusion weight must be a number"),
        ("hybrid", {"weight": 1.5}, r"fusion weight must be from 0 to 1"),
        ("hybrid", {"fusion": "rrf", "rrf_k": float("nan")}, r"rrf_k must be a finite number"),
        ("hybrid", {"depth": 0}, r"depth must be a whole number of at least 1"),
        ("hybrid", {"depth": 2.5}, r"depth must be a whole number of at least 1"),
        ("ivf", {"nprobe": "3"}, r"nprobe must be a whole number of at least 1"),
        ("hybrid", {"fusion": "rrf", "rrf_k": -1}, r"rrf_k must be from 0 to 1000000"),
        ("hybrid", {"lexical": "bm52"}, r"unknown lexical ranking 'bm52' \(did you mean 'bm25'\?\)"),
        ("hybrid", {"lexical": "bm25", "chunk_weight": 1.0}, r"chunk_weight applies to the bm25doc lexical"),
        ("bm25doc", {"chunk_weight": -1}, r"chunk_weight must be from 0 to 100"),
        ("bm25doc", {"chunk_weight": "x"}, r"chunk_weight must be a number from 0 to 100"),
        ("bm25", {"chunk_weight": 1}, r"chunk_weight applies to bm25doc search, not bm25"),
    ],
)
def test_bad_parameters_are_refused_before_any_work(retriever, mode, params, match):
    _refused(retriever, match, "cats", mode=mode, k=3, **params)
    with pytest.raises(UsageError, match=match):
        check_search(mode, params)


def test_unknown_mode_names_the_nearest(retriever):
    _refused(retriever, r"unknown mode 'hybird' \(did you mean 'hybrid'\?\): choose one of flat, ivf, bm25, bm25doc, bm25stem, hybrid",
             "cats", mode="hybird")
    with pytest.raises(UsageError, match=r"unknown mode 'vector': choose one of"):
        check_search("vector")


def test_fuse_refuses_weight_for_rrf():
    lexical = (np.array([0, 1], dtype=np.int64), np.array([2.0, 1.0]))
    vector = (np.array([1, 2], dtype=np.int64), np.array([0.9, 0.5]))
    with pytest.raises(UsageError, match="weight applies to weighted fusion, not rrf"):
        fusion.fuse(lexical, vector, 3, method="rrf", weight=0.2)
    with pytest.raises(UsageError, match="rrf_k applies to rrf fusion, not weighted"):
        fusion.fuse(lexical, vector, 3, method="weighted", rrf_k=5)
    # The defaults still apply when the parameter is left out.
    rows, scores = fusion.fuse(lexical, vector, 3, method="rrf")
    assert rows.tolist() == [1, 0, 2] and scores[0] == pytest.approx(1 / 62 + 1 / 61)
    rows, scores = fusion.fuse(lexical, vector, 3)  # weighted, weight 0.6: min-max normalised lists
    assert rows.tolist() == [0, 1, 2] and scores.tolist() == pytest.approx([0.6, 0.4, 0.0])


def test_valid_parameters_still_work(retriever):
    for mode in MODES:
        assert retriever.search("cats mice", mode=mode, k=2), mode
    # None means "not given", for a parameter of this mode or of another.
    assert retriever.search("cats", mode="bm25", k=2, nprobe=None, weight=None)
    assert retriever.search("cats", mode="ivf", k=2, nprobe=np.int64(2))
    rrf = retriever.search("cats mice", mode="hybrid", k=5, fusion="rrf", rrf_k=0, depth=np.int64(5))
    weighted = retriever.search("cats mice", mode="hybrid", k=5, fusion="weighted", weight=1.0, lexical="bm25")
    bm25 = retriever.search("cats mice", mode="bm25", k=5)
    assert rrf and [h.row for h in weighted[: len(bm25)]] == [h.row for h in bm25]
    # Weight 1 over the default lexical side ranks as bm25doc does.
    doc = retriever.search("cats mice", mode="hybrid", k=5, weight=1.0)
    bm25doc = retriever.search("cats mice", mode="bm25doc", k=5)
    assert [h.row for h in doc[: len(bm25doc)]] == [h.row for h in bm25doc]


def test_every_parameter_has_one_mode():
    # chunk_weight is the one shared name: hybrid's lexical side is bm25doc or bm25stem, with the same knob.
    names = [n for params in PARAMS.values() for n in params if n != "chunk_weight"]
    assert len(names) == len(set(names)) and set(PARAMS) == set(MODES)
    assert [m for m, params in PARAMS.items() if "chunk_weight" in params] == ["bm25doc", "bm25stem", "hybrid"]
