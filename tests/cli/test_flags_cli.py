"""Flags that no other test exercised: `eval --split` and `search --nprobe`, through the installed command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run as ragtui


def _beir(root: Path) -> Path:
    """A BEIR folder whose two splits judge different queries."""
    ds = root / "ds"
    (ds / "qrels").mkdir(parents=True)
    docs = {"d1": "cats are small mammals", "d2": "dogs fetch sticks", "d3": "birds can fly south",
            "d4": "fish swim in water"}
    (ds / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs.items()), encoding="utf-8")
    queries = {"q1": "small cats", "q2": "fetching dogs", "q3": "flying birds"}
    (ds / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries.items()), encoding="utf-8")
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    (ds / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t1\nq3\td3\t1\n", encoding="utf-8")
    return ds


@pytest.mark.parametrize("split, n_queries", [("test", 1), ("dev", 2)])
def test_eval_split_picks_the_qrels_file(tmp_path, split, n_queries):
    ds = _beir(tmp_path)
    out = tmp_path / "report.json"
    r = ragtui("eval", str(ds), "--split", split, "--modes", "bm25", "--artifacts", str(tmp_path / "art"),
               "--json", str(out))
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["dataset"]["split"] == split
    assert report["dataset"]["n_queries"] == n_queries
    assert report["dataset"]["n_judgments"] == n_queries


def test_eval_split_that_does_not_exist_names_the_ones_that_do(tmp_path):
    r = ragtui("eval", str(_beir(tmp_path)), "--split", "train", "--artifacts", str(tmp_path / "art"))
    assert r.returncode == 2
    line, = r.stderr.strip().splitlines()
    assert "train.tsv: missing" in line and "dev, test" in line and "--split" in line


@pytest.fixture(scope="module")
def ivf_index(tmp_path_factory):
    """An index of 40 small documents, IVF set to 4 lists by the user's own config."""
    base = tmp_path_factory.mktemp("nprobe")
    docs = base / "docs"
    docs.mkdir()
    topics = ["cats purr", "dogs bark", "rivers flow", "stars shine", "bread bakes", "trains run", "snow falls",
              "bees buzz"]
    for i in range(40):
        (docs / f"n{i:02d}.md").write_text(f"{topics[i % 8]} number {i} with {topics[(i * 3) % 8]}\n", encoding="utf-8")
    config = base / "config"
    (config / "ragtui").mkdir(parents=True)
    (config / "ragtui" / "ragtui.toml").write_text("[ivf]\nnlist = 4\n", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(config), "RAGTUI_ARTIFACTS": str(base / "art")}
    r = ragtui("ingest", str(docs), "--quiet", env=env, cwd=base)
    assert r.returncode == 0, r.stderr
    return base, env


def _hits(base: Path, env: dict, *args: str) -> list[dict]:
    r = ragtui("search", "cats purr and bees buzz", "-k", "40", "--json", *args, env=env, cwd=base)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout) if r.stdout.strip() else []


def test_nprobe_all_lists_is_the_exact_answer(ivf_index):
    base, env = ivf_index
    flat = _hits(base, env, "--mode", "flat")
    every = _hits(base, env, "--mode", "ivf", "--nprobe", "4")
    assert [h["chunk_id"] for h in every] == [h["chunk_id"] for h in flat]
    assert [h["score"] for h in every] == pytest.approx([h["score"] for h in flat], abs=1e-6)


def test_nprobe_one_list_searches_a_part_of_the_index(ivf_index):
    base, env = ivf_index
    flat = {h["chunk_id"]: h["score"] for h in _hits(base, env, "--mode", "flat")}
    one = _hits(base, env, "--mode", "ivf", "--nprobe", "1")
    # One of 4 lists: fewer chunks than the 40 searched exactly, each with its exact score.
    assert 0 < len(one) < len(flat)
    for h in one:
        assert h["score"] == pytest.approx(flat[h["chunk_id"]], abs=1e-6)
    two = _hits(base, env, "--mode", "ivf", "--nprobe", "2")
    assert len(one) < len(two) <= len(flat)
    assert {h["chunk_id"] for h in one} <= {h["chunk_id"] for h in two}
