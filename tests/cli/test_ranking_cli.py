"""Ranking options from the command line and ragtui.toml: fusion, depth, bm25doc, MMR, the floor, merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_flags_cli import _beir, ragtui


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A folder of small documents, one long enough for several chunks, ingested with the default embedder."""
    base = tmp_path_factory.mktemp("ranking")
    docs = base / "docs"
    docs.mkdir()
    topics = ["cats purr", "dogs bark", "rivers flow", "stars shine", "bread bakes", "trains run"]
    for i in range(12):
        (docs / f"n{i:02d}.md").write_text(f"{topics[i % 6]} number {i} with {topics[(i * 5) % 6]}\n", encoding="utf-8")
    (docs / "long.md").write_text("\n\n".join(f"Part {i}: cats purr while the rivers flow and stars shine. " * 6
                                              for i in range(8)), encoding="utf-8")
    config = base / "config"
    (config / "ragtui").mkdir(parents=True)
    env = {"XDG_CONFIG_HOME": str(config), "RAGTUI_ARTIFACTS": str(base / "art")}
    r = ragtui("ingest", str(docs), "--quiet", "--max-tokens", "48", "--overlap", "8", env=env, cwd=base)
    assert r.returncode == 0, r.stderr
    return base, env


def _search(index, *args: str, cwd: Path | None = None):
    base, env = index
    return ragtui("search", "cats purr rivers", "--json", *args, env=env, cwd=cwd or base)


def _hits(index, *args: str, cwd: Path | None = None) -> list[dict]:
    r = _search(index, *args, cwd=cwd)
    assert r.returncode in (0, 1), r.stderr
    hits = json.loads(r.stdout) if r.stdout.strip() else []
    for h in hits:
        h.pop("query_ms", None)  # the one field that changes from run to run
    return hits


def _one_line_error(r, words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    line, = r.stderr.strip().splitlines()
    assert words in line, line


def test_fusion_options_change_the_ranking_and_k_does_not(index):
    weighted = _hits(index, "--mode", "hybrid", "-k", "5")
    rrf = _hits(index, "--mode", "hybrid", "-k", "5", "--fusion", "rrf", "--rrf-k", "10")
    assert len(weighted) == len(rrf) == 5
    assert [h["score"] for h in weighted] != [h["score"] for h in rrf]
    deeper = _hits(index, "--mode", "hybrid", "-k", "12", "--fusion", "rrf", "--rrf-k", "10")
    assert [h["chunk_id"] for h in deeper[:5]] == [h["chunk_id"] for h in rrf]  # the depth is not -k
    lexical = _hits(index, "--mode", "hybrid", "-k", "5", "--weight", "1", "--lexical", "bm25")
    bm25 = _hits(index, "--mode", "bm25", "-k", "5")
    assert [h["chunk_id"] for h in lexical] == [h["chunk_id"] for h in bm25]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--mode", "hybrid", "--weight", "1.5"), "--weight must be from 0 to 1 (got 1.5)"),
        (("--mode", "hybrid", "--fusion", "rfr"), "--fusion must be one of rrf, weighted, zscore (got 'rfr') (did you mean 'rrf'?)"),
        (("--mode", "hybrid", "--depth", "0"), "--depth must be a whole number from 1 to 100000"),
        (("--mode", "hybrid", "--fusion", "rrf", "--weight", "0.3"), "weight applies to weighted fusion, not rrf"),
        (("--mode", "bm25", "--weight", "0.3"), "--weight applies to hybrid search, not bm25"),
        (("--mode", "bm25doc", "--chunk-weight", "-1"), "--chunk-weight must be from 0 to 100"),
        (("--mmr", "1.2",), "--mmr must be from 0 to 1 (got 1.2)"),
        (("--min-score", "nan",), "--min-score must be a number"),
    ],
)
def test_bad_ranking_values_are_exit_2_naming_the_range(index, args, words):
    _one_line_error(_search(index, *args), words)


def test_search_section_of_ragtui_toml(index, tmp_path):
    (tmp_path / "ragtui.toml").write_text("[search]\nfusion = \"rrf\"\nrrf_k = 10\nweight = 0.9\n", encoding="utf-8")
    from_config = _hits(index, "--mode", "hybrid", "-k", "5", cwd=tmp_path)
    from_flags = _hits(index, "--mode", "hybrid", "-k", "5", "--fusion", "rrf", "--rrf-k", "10")
    assert from_config == from_flags  # the config's weight belongs to weighted fusion: not used under rrf
    # A flag overrides the file; the file's rrf_k is then not this run's.
    weighted = _hits(index, "--mode", "hybrid", "-k", "5", "--fusion", "weighted", cwd=tmp_path)
    assert weighted == _hits(index, "--mode", "hybrid", "-k", "5", "--weight", "0.9")
    # bm25 takes none of [search]'s hybrid keys: they are left out, not an error.
    assert _hits(index, "--mode", "bm25", cwd=tmp_path) == _hits(index, "--mode", "bm25")
    (tmp_path / "ragtui.toml").write_text("[search]\nwieght = 0.5\n", encoding="utf-8")
    _one_line_error(_search(index, "--mode", "hybrid", cwd=tmp_path), "unknown key search.wieght (did you mean search.weight?)")


def test_bm25doc_needs_no_embedder_and_mmr_merge_floor_work(index):
    base, env = index
    doc = _hits(index, "--mode", "bm25doc", "-k", "8", "--chunk-weight", "0")
    assert doc and all(h["doc_id"].endswith(".md") for h in doc)
    plain = _hits(index, "--mode", "hybrid", "-k", "6")
    diverse = _hits(index, "--mode", "hybrid", "-k", "6", "--mmr", "0.2")
    assert len(diverse) == 6 and [h["chunk_id"] for h in diverse] != [h["chunk_id"] for h in plain]
    assert len({h["doc_id"] for h in diverse}) >= len({h["doc_id"] for h in plain})
    merged = _hits(index, "--mode", "bm25", "-k", "6", "--merge")
    assert any("merged_rows" in h for h in merged)
    for h in merged:  # the union line range of the chunks merged, in the source as it is
        if "merged_rows" in h:
            assert h["doc_id"] == "docs/long.md" and 1 <= h["lines"][0] < h["lines"][1] <= 15
    assert len({h["chunk_id"] for h in merged}) == len(merged)
    every = _hits(index, "--mode", "hybrid", "-k", "60")
    floor = _hits(index, "--mode", "hybrid", "-k", "60", "--min-score", "0.7")
    # wordllama's hybrid fuses by zscore (fusion_fit): its floor is relative to the best candidate's score.
    top = every[0]["score"]
    assert floor == [h for h in every if h["score"] / top >= 0.7] and 0 < len(floor) < len(every)
    r = _search(index, "--mode", "hybrid", "--min-score", "1.01")  # above any fused score: refused, with the range
    assert r.returncode == 2 and r.stdout == "" and "--min-score 1.01 is outside what hybrid scores" in r.stderr


def test_eval_takes_the_ranking_options(tmp_path):
    out = tmp_path / "report.json"
    ds = _beir(tmp_path)
    r = ragtui("eval", str(ds), "--split", "dev", "--modes", "bm25,bm25doc,hybrid", "--fusion", "rrf",
               "--rrf-k", "20", "--depth", "50", "--chunk-weight", "1", "--artifacts", str(tmp_path / "art"),
               "--json", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    modes = json.loads(out.read_text())["modes"]
    assert modes["hybrid"]["params"]["fusion"] == "rrf" and modes["hybrid"]["params"]["rrf_k"] == 20
    assert modes["hybrid"]["params"]["depth"] == 50 and modes["bm25doc"]["params"]["chunk_weight"] == 1
    assert "fusion" not in modes["bm25"]["params"]
    r = ragtui("eval", str(ds), "--split", "dev", "--weight", "7", "--artifacts", str(tmp_path / "art"))
    _one_line_error(r, "--weight must be from 0 to 1 (got 7)")
