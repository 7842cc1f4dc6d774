"""`ragtui eval` in-process: a SMART collection, a native dataset, compare, and one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import Result
from tests.helpers.cli import run as ragtui


def _one_line_error(result: Result, code: int, *needles: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragtui: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


ADI_ALL = """.I 1
.T
library catalog automation
.A
A. WRITER
.W
computers automate the library catalog and circulation records .
.I 2
.T
abstracting services
.A
B. WRITER
.A
C. WRITER
.W
a national plan for science abstracting and indexing services .
.I 3
.T
machine translation
.W
automatic translation of russian technical text by computer .
.I 4
.T
citation indexing
.W
citation indexes link papers that cite each other .
"""
ADI_QRY = ".I 1\r\n.W\r\nhow are library catalogs automated?\r\n.I 2\r\n.W\r\nscience abstracting and indexing\r\n.I 3\r\n.W\r\ntranslation by machine\r\n"
ADI_REL = "1   1   0   0.000000\n2   2   0   0.000000\n2   4   0   0.000000\n3   3   0   0.000000\n"


@pytest.fixture(scope="module")
def adi(tmp_path_factory):
    base = tmp_path_factory.mktemp("evalcli")
    d = base / "adi"
    d.mkdir()
    (d / "ADI.ALL").write_text(ADI_ALL)
    (d / "ADI.QRY").write_bytes(ADI_QRY.encode())
    (d / "ADI.REL").write_text(ADI_REL)
    cache = base / "cache"  # module-scoped: the per-test XDG_CACHE_HOME is not set yet, so name it
    out = base / "k3.json"
    result = ragtui("eval", str(d), "-k", "3", "--cache", str(cache), "--json", str(out),
                    "--nprobe-sweep", "1,2")
    assert result.returncode == 0, result.stderr
    return d, cache, out, result


def test_eval_collection(adi):
    _, art, out, result = adi
    report = json.loads(out.read_text())
    assert report["format"] == "ragtui-eval-report/1" and report["k"] == 3
    assert list(report["modes"]) == ["flat", "ivf", "bm25", "bm25doc", "bm25stem", "hybrid"]
    assert report["dataset"]["n_queries"] == 3 and report["dataset"]["n_docs"] == 4
    prov = report["provenance"]
    assert prov["index_id"] == "eval-adi" and len(prov["index_fingerprint"]["files"]) == 4
    assert prov["embedder"]["kind"] == "wordllama" and prov["chunker"]["max_tokens"] == 256
    assert prov["sync"]["published"] is True
    bm25 = report["modes"]["bm25"]
    assert bm25["per_query"]["3"]["ranked"][0] == "3" and bm25["per_query"]["3"]["ndcg"] == 1.0
    assert set(bm25["latency_ms"]) == {"median", "p95", "mean"}
    assert [r["nprobe"] for r in report["nprobe_sweep"]] == [1, 2]
    for header in ("nDCG@3", "Recall@3", "median ms", "bm25", "hybrid"):
        assert header in result.stdout
    assert (art / "eval" / "eval-adi" / "adi" / "1.txt").read_text().startswith("library catalog automation")


def test_fit_fusion_prints_a_search_table_whose_figures_eval_reproduces(adi, tmp_path):
    import tomllib

    from ragtui.core.search.ranking_options import check_options

    d, cache, _, _ = adi
    result = ragtui("eval", "--fit-fusion", str(d), "--cache", str(cache), "--quiet")
    assert result.returncode == 0, result.stderr
    table = tomllib.loads(result.stdout)["search"]
    assert check_options(table) == table and table["lexical"] in ("bm25doc", "bm25stem")
    assert "fitted for 'wordllama-l2_supercat-256' on adi (3 queries)" in result.stdout
    ndcg = float(result.stdout.split("nDCG@10 ", 1)[1].split(",", 1)[0])
    # The same setting given as flags: `ragtui eval` measures the nDCG@10 the fit printed.
    value = "--rrf-k" if table["fusion"] == "rrf" else "--weight"
    key = "rrf_k" if table["fusion"] == "rrf" else "weight"
    out = tmp_path / "fitted.json"
    result = ragtui("eval", str(d), "-k", "10", "--modes", "hybrid", "--cache", str(cache), "--json", str(out),
                    "--lexical", table["lexical"], "--fusion", table["fusion"], value, str(table[key]))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["modes"]["hybrid"]["metrics"]["ndcg"] == pytest.approx(ndcg, abs=5e-5)


def test_eval_reuses_index_and_compares(adi, tmp_path):
    d, art, first, _ = adi
    second = tmp_path / "again.json"
    result = ragtui("eval", str(d), "-k", "3", "--modes", "bm25,hybrid", "--cache", str(art),
                    "--json", str(second))
    assert result.returncode == 0, result.stderr
    report = json.loads(second.read_text())
    assert report["provenance"]["sync"]["published"] is False  # reused: nothing written
    assert report["provenance"]["index_fingerprint"] == json.loads(first.read_text())["provenance"]["index_fingerprint"]
    result = ragtui("eval", "--compare", str(first), str(second))
    assert result.returncode == 0, result.stderr
    assert "bm25" in result.stdout and "hybrid" in result.stdout and "1.0000" in result.stdout  # same runs: p = 1
    result = ragtui("eval", "--compare", f"{first}:bm25", f"{second}:hybrid", "--json", "-")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert [(r["mode_a"], r["mode_b"]) for r in rows] == [("bm25", "hybrid")]
    # Any mode name a report holds can be named, not only the built-in modes.
    renamed = json.loads(second.read_text())
    renamed["modes"] = {"my variant": renamed["modes"]["hybrid"]}
    third = tmp_path / "renamed.json"
    third.write_text(json.dumps(renamed))
    result = ragtui("eval", "--compare", f"{first}:bm25", f"{third}:my variant", "--json", "-")
    assert result.returncode == 0, result.stderr
    assert [(r["mode_a"], r["mode_b"]) for r in json.loads(result.stdout)["rows"]] == [("bm25", "my variant")]


def test_eval_builds_in_the_cache_folder_not_the_artifacts_root(adi, tmp_path):
    """eval's indexes once went into the user's artifacts root, and `ragtui search` then found several."""
    d = adi[0]
    home, art = tmp_path / "home", tmp_path / "art"
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "tar.md").write_text("Extract a tar archive with tar -xf.\n")
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "XDG_DATA_HOME": str(home / "data"),
           "XDG_STATE_HOME": str(home / "state")}
    assert ragtui("ingest", str(docs), "--artifacts", str(art), env=env).returncode == 0
    result = ragtui("eval", str(d), "-k", "3", "--modes", "bm25", "--artifacts", str(art), env=env)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (art / "rag").iterdir() if not p.name.startswith(".")) == ["notes"]
    assert not (art / "eval").exists()
    assert (home / "cache" / "ragtui" / "rag" / "eval-adi").is_dir()
    assert (home / "cache" / "ragtui" / "eval" / "eval-adi" / "adi" / "1.txt").is_file()
    search = ragtui("search", "tar", "--artifacts", str(art), env=env)
    assert search.returncode == 0 and "notes/tar.md#0" in search.stdout, search.stderr


def test_eval_native_dataset(tmp_path):
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "logs.md").write_text("# Logs\n\nRotate the log files weekly with logrotate.\n")
    (docs / "backup.md").write_text("# Backup\n\nBack up the database every night to object storage.\n")
    art = tmp_path / "art"
    assert ragtui("ingest", str(docs), "--artifacts", str(art)).returncode == 0
    dataset = tmp_path / "mine.json"
    dataset.write_text(json.dumps({"format": "ragtui-eval-dataset/1", "name": "notes", "queries": [
        {"id": "a", "text": "how do I rotate logs", "relevant_doc_ids": ["notes/logs.md"]},
        {"id": "b", "text": "nightly database backup", "relevant_chunk_ids": {"notes/backup.md#0": 2}},
    ]}))
    out = tmp_path / "r.json"
    result = ragtui("eval", str(dataset), "--modes", "bm25,flat", "--artifacts", str(art), "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["provenance"]["index_id"] == "notes"
    assert report["modes"]["bm25"]["per_query"]["a"]["ranked"][0] == "notes/logs.md"
    assert report["modes"]["bm25"]["per_query"]["b"]["ranked"][0] == "notes/backup.md#0"
    assert report["modes"]["bm25"]["metrics"]["mrr"] == 1.0
    # Every judged id must be known to the index.
    dataset.write_text(json.dumps({"format": "ragtui-eval-dataset/1", "queries": [
        {"id": "a", "text": "logs", "relevant_doc_ids": ["notes/missing.md"]}]}))
    _one_line_error(ragtui("eval", str(dataset), "--artifacts", str(art)), 2, "notes/missing.md")


def test_eval_refuses_a_beir_line_json_cannot_convert(tmp_path):
    """A 5,000-digit integer is a ValueError without .msg: it is bad input (exit 2), not an internal error."""
    d = tmp_path / "beir"
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text('{"_id": "d1", "text": "x", "n": ' + "1" * 5000 + "}\n")
    (d / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    _one_line_error(ragtui("eval", str(d), "--artifacts", str(tmp_path / "art")), 2, "corpus.jsonl:1: not JSON")


def test_eval_errors(tmp_path):
    _one_line_error(ragtui("eval", str(tmp_path / "nope")), 2, "no such file or folder")
    _one_line_error(ragtui("eval", str(tmp_path)), 2, "not a dataset folder")
    _one_line_error(ragtui("eval", str(tmp_path), "--modes", "bm25,fast"), 2, "unknown mode 'fast'")
    _one_line_error(ragtui("eval", str(tmp_path), "-k", "0"), 2, "-k must be at least 1")
    _one_line_error(ragtui("eval"), 2, "give a dataset")
    _one_line_error(ragtui("eval", str(tmp_path), "--nprobe-sweep", "1,x"), 2, "--nprobe-sweep")
    _one_line_error(ragtui("eval", "--compare", "a.json", "b.json"), 2, "a.json: no such report")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    _one_line_error(ragtui("eval", "--compare", str(bad), str(bad)), 2, "not a ragtui eval report")
