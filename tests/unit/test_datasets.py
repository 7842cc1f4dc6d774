"""Dataset loaders: BEIR, the SMART collections (with their traps), and the native JSON format."""

from __future__ import annotations

import json

import pytest

from ragtui.core.errors import UsageError
from ragtui.core.eval.datasets import NATIVE_FORMAT, detect_kind, load_dataset, parse_smart, validate_native_ids
from tests.conftest import shared_data

# -- SMART ---------------------------------------------------------------------------------------

CRAN_DOCS = """.I 1
.T
flow past a plate .
.A
someone
.B
j. ae. 1958
.W
flow past a plate .
the boundary layer grows .
.I 2
.T
heat transfer in slabs .
.A
other
.B
report 7
.W
heat transfer in composite slabs .
  conduction is solved .
.A
this line was cut off by a stray marker
.B
and so was this one .
.I 3
.T
.A
.B
.W
.I 4
.T
shock waves .
.A
.B
.W
shock waves at high mach number .
.W
a second body marker continues the body .
"""

# .I numbers skip (001, 002, 004) as in cran.qry; judgments count queries by position.
CRAN_QRY = ".I 001\r\n.W\r\nboundary layer on a plate .\r\n.I 002\r\n.W\r\nheat conduction in slabs .\r\n.I 004\r\n.W\r\nshock waves .\r\n"
CRAN_REL = "1 1 2\n1 2 -1\n2 2 1\n2 3 4\n2 1 3\n3 4 -1\n"


@pytest.fixture
def cranfield(tmp_path):
    d = tmp_path / "cranfield"
    d.mkdir()
    (d / "cran.all.1400").write_text(CRAN_DOCS)
    (d / "cran.qry").write_bytes(CRAN_QRY.encode())
    (d / "cranqrel").write_text(CRAN_REL)
    return d


def test_cranfield_traps(cranfield):
    ds = load_dataset(cranfield)
    assert ds.kind == "cranfield" and ds.name == "cranfield" and set(ds.docs) == {"1", "2", "3", "4"}
    # Query ids are positions: the third query (.I 004) is "3"; it has only a -1 judgment, so it is skipped.
    assert list(ds.queries) == ["1", "2"]
    assert ds.queries["2"] == "heat conduction in slabs ."
    # -1 is not relevant; gains are 5 - code.
    assert ds.qrels == {"1": {"1": 3.0}, "2": {"2": 4.0, "3": 1.0, "1": 2.0}}
    # Stray .A/.B and a second .W inside the body continue the body; their marker lines are gone.
    assert "this line was cut off by a stray marker\nand so was this one ." in ds.docs["2"]
    assert ".A" not in ds.docs["2"] and "a second body marker continues the body ." in ds.docs["4"]
    # The body repeats the title: the title is not indexed twice.
    assert ds.docs["1"] == "flow past a plate .\nthe boundary layer grows ."
    assert ds.docs["2"].startswith("heat transfer in slabs .\n\nheat transfer in composite")
    assert ds.docs["3"] == ""
    assert any("stray" in n for n in ds.notes) and any("positions" in n for n in ds.notes)
    assert any("empty" in n for n in ds.notes)


def test_cranfield_bad_code(cranfield):
    (cranfield / "cranqrel").write_text("1 1 7\n")
    with pytest.raises(UsageError, match=r"cranqrel:1: relevance code 7"):
        load_dataset(cranfield)
    (cranfield / "cranqrel").write_text("1 1 5\n2 2 1\n")
    ds = load_dataset(cranfield)  # code 5, "of no interest", is not relevant
    assert ds.qrels == {"2": {"2": 4.0}}


def test_cranfield_unknown_ids(cranfield):
    (cranfield / "cranqrel").write_text("9 1 1\n")
    with pytest.raises(UsageError, match="query 9 is not in cran.qry"):
        load_dataset(cranfield)
    (cranfield / "cranqrel").write_text("1 99 1\n")
    with pytest.raises(UsageError, match="document 99 is not in cran.all.1400"):
        load_dataset(cranfield)


def test_cisi_like(tmp_path):
    d = tmp_path / "cisi"
    d.mkdir()
    docs = (
        ".I 1\r\n.T \r\nDewey Decimal\r\n.A\r\nComaromi, J.P.\r\n.A \r\nSecond, A.\r\n.W\r\n   A history of the DDC.\r\n"
        ".X\r\n1\t5\t1\r\n.I 2\r\n.T\r\nLibraries\r\n.A\r\nSlater\r\n.W\r\nUse of libraries.\r\n.X\r\n2\t5\t2\r\n"
    )
    (d / "CISI.ALL").write_bytes(docs.encode())
    qry = ".I 1\r\n.W\r\nWhat is the DDC?\r\n.I 2\r\n.W\r\nNo judgments here.\r\n.I 3\r\n.T\r\nA title\r\n.A\r\nX\r\n.W\r\nlibrary use\r\n.B\r\n(J. 1980)\r\n"
    (d / "CISI.QRY").write_bytes(qry.encode())
    (d / "CISI.REL").write_bytes(b"     1     1\t0\t0.000000\r\n     3     2\t0\t0.000000\r\n     3     1\t0\t0.000000\r\n")
    ds = load_dataset(d)
    assert ds.kind == "cisi"
    assert list(ds.queries) == ["1", "3"]  # query 2 has no judgment: skipped, and said so
    assert any("no judgments" in n for n in ds.notes)
    assert ds.queries["3"] == "A title\nlibrary use"  # title and body; not author or bibliography
    assert ds.qrels == {"1": {"1": 1.0}, "3": {"2": 1.0, "1": 1.0}}
    assert ds.docs["1"] == "Dewey Decimal\n\nA history of the DDC."  # .X cross-references are not text


def test_medline_layout_trec_judgments_and_padding(tmp_path):
    d = tmp_path / "med"
    d.mkdir()
    pad = lambda line: line.ljust(72)  # noqa: E731 - MED.ALL pads every line to 72 columns
    docs = [".I 1", ".W", "correlation between maternal and fetal plasma levels", "of glucose .",
            ".I 2", ".W", "renal failure in children ."]
    (d / "MED.ALL").write_text("\n".join(pad(x) for x in docs) + "\n")
    (d / "MED.QRY").write_text(".I 1\n.W\nglucose in the fetus\n.I 2\n.W\nchildren kidneys\n.I 3\n.W\nnothing\n")
    (d / "MED.REL").write_text("1 0 1 1\n2 0 2 1\n2 0 1 0\n3 0 2 0\n")
    ds = load_dataset(d)
    assert ds.kind == "medline" and detect_kind(d) == "medline"
    assert ds.docs["1"] == "correlation between maternal and fetal plasma levels\nof glucose ."  # no padding
    assert ds.qrels == {"1": {"1": 1.0}, "2": {"2": 1.0}}  # gain 0 is not relevant; query 3 has none
    assert any("TREC" in n for n in ds.notes)
    (d / "MED.REL").write_text("1 0 1 x\n")
    with pytest.raises(UsageError, match=r"MED.REL:1: gain 'x' is not a number"):
        load_dataset(d)


def test_trec_judgments_in_a_smart_folder_and_cisi_columns_are_not_trec(tmp_path):
    d = tmp_path / "adi"
    d.mkdir()
    (d / "ADI.ALL").write_text(".I 1\n.W\nfirst\n.I 2\n.W\nsecond\n")
    (d / "ADI.QRY").write_text(".I 1\n.W\nq one\n")
    (d / "ADI.REL").write_text("1 0 2 2\n")  # TREC: document 2, gain 2
    assert load_dataset(d).qrels == {"1": {"2": 2.0}}
    (d / "ADI.REL").write_text("1   2   0   0.000000   \n1   1   0   0.000000\n")  # ADI's own: doc 2 and 1
    assert load_dataset(d).qrels == {"1": {"2": 1.0, "1": 1.0}}


def test_parse_smart_fields():
    recs, notes = parse_smart(".I 67\n.T\nsame title .\n.A\nJ\n.T\n same title .\n.W\nbody\n", "ADI.ALL")
    assert recs == [("67", {"T": "same title .", "A": "J", "W": "body"})]  # an identical repeat is dropped
    assert notes == []
    recs, _ = parse_smart(".I 1\n.A\nA\n.A\nB\n.W\nx\n", "f")
    assert recs[0][1]["A"] == "A\nB"  # several authors before the body accumulate
    with pytest.raises(UsageError, match="f:1: text before the first .I"):
        parse_smart("hello\n.I 1\n", "f")
    with pytest.raises(UsageError, match="f:2: text before any field marker in record 1"):
        parse_smart(".I 1\nloose\n", "f")


# -- BEIR ----------------------------------------------------------------------------------------


def _beir(tmp_path, qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td2\t0\n"):
    d = tmp_path / "mini"
    (d / "qrels").mkdir(parents=True)
    rows = [{"_id": "d1", "title": "Alpha", "text": "alpha text"}, {"_id": "d2", "title": "", "text": "beta"}]
    (d / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    qs = [{"_id": "q1", "text": "alpha?"}, {"_id": "q2", "text": "beta?"}, {"_id": "q3", "text": "none"}]
    (d / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qs))
    (d / "qrels" / "train.tsv").write_text(qrels)
    return d


def test_beir(tmp_path):
    ds = load_dataset(_beir(tmp_path), split="train")
    assert ds.kind == "beir" and ds.split == "train"
    assert ds.docs == {"d1": "Alpha\n\nalpha text", "d2": "beta"}
    assert ds.queries == {"q1": "alpha?"}  # q2 judged but not relevant, q3 not judged
    assert ds.qrels == {"q1": {"d1": 1.0, "d2": 2.0}}
    assert len(ds.notes) == 2


@pytest.mark.parametrize(
    "qrels",
    ["q1 0 d1 1\nq1 0 d2 2\nq2 0 d2 0\n", "q1\t0\td1\t1\nq1\tQ0\td2\t2\nq2\t0\td2\t0\n",
     "query-id\titer\tcorpus-id\tscore\nq1 0 d1\t1\nq1 0 d2\t2\n"],
    ids=["spaces", "tabs", "header-and-mixed"],
)
def test_beir_reads_trec_four_column_qrels(tmp_path, qrels):
    ds = load_dataset(_beir(tmp_path, qrels), split="train")
    assert ds.qrels == {"q1": {"d1": 1.0, "d2": 2.0}}


def test_beir_errors(tmp_path):
    d = _beir(tmp_path)
    with pytest.raises(UsageError, match=r"test.tsv: missing; splits here: train"):
        load_dataset(d, split="test")
    (d / "qrels" / "train.tsv").write_text("q9\td1\t1\n")
    with pytest.raises(UsageError, match="'q9' is not in queries.jsonl"):
        load_dataset(d, split="train")
    (d / "qrels" / "train.tsv").write_text("q1\td1\n")
    with pytest.raises(UsageError, match="train.tsv:1: expected"):
        load_dataset(d, split="train")
    (d / "corpus.jsonl").write_text('{"_id": "d1"}\n{"_id": "d1"}\n')
    with pytest.raises(UsageError, match="corpus.jsonl:2: duplicate _id 'd1'"):
        load_dataset(d, split="train")


LONG_INT = "1" * 5000  # json.loads refuses integers past 4,300 digits with a plain ValueError


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"_id": "d1", "text": "x"', r"corpus.jsonl:2: not JSON \(Expecting"),
        ('{"_id": "d1", "n": ' + LONG_INT + "}", r"corpus.jsonl:2: not JSON \(Exceeds the limit \(4300 digits\)"),
        ('{"_id": "d1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", r"corpus.jsonl:2: not JSON \(nested too deeply\)"),
        ('{"_id": "d1", "text": "half a pair \\ud800 here"}', r"corpus.jsonl:2: a string holds an unpaired surrogate"),
        ('{"_id": "\\udfff", "text": "x"}', r"corpus.jsonl:2: a string holds an unpaired surrogate"),
    ],
    ids=["malformed", "5000-digit-int", "nested-100k", "lone-surrogate-text", "lone-surrogate-id"],
)
def test_beir_lines_the_parser_refuses_are_usage_errors(tmp_path, line, message):
    """Every way json.loads can refuse a line is one UsageError naming file and line (not AttributeError,
    RecursionError, or a string that cannot be written as UTF-8 later)."""
    d = _beir(tmp_path)
    (d / "corpus.jsonl").write_text('{"_id": "d0", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        load_dataset(d, split="train")


def test_beir_surrogate_pairs_are_text(tmp_path):
    d = _beir(tmp_path)
    (d / "corpus.jsonl").write_text('{"_id": "d1", "text": "smile \\ud83d\\ude00"}\n{"_id": "d2"}\n')
    assert load_dataset(d, split="train").docs["d1"] == "smile \U0001F600"


def test_detect_kind(tmp_path):
    with pytest.raises(UsageError, match="no such file or folder"):
        detect_kind(tmp_path / "nope")
    with pytest.raises(UsageError, match="not a dataset folder"):
        detect_kind(tmp_path)


# -- native JSON ---------------------------------------------------------------------------------


def _native(tmp_path, queries, **extra):
    p = tmp_path / "mine.json"
    p.write_text(json.dumps({"format": NATIVE_FORMAT, "queries": queries, **extra}))
    return p


def test_native(tmp_path):
    p = _native(tmp_path, [
        {"id": "a", "text": "rotate logs", "relevant_doc_ids": ["notes/logs.md"]},
        {"id": "b", "text": "backup", "relevant_chunk_ids": {"notes/b.md#0": 2, "notes/b.md#1": 1, "notes/c.md#0": 0}},
    ], name="notes", index="docs")
    ds = load_dataset(p)
    assert ds.kind == "native" and ds.name == "notes" and ds.index == "docs" and ds.docs is None
    assert ds.qrels == {"a": {"notes/logs.md": 1.0}, "b": {"notes/b.md#0": 2.0, "notes/b.md#1": 1.0}}
    assert ds.level("a") == "doc" and ds.level("b") == "chunk"
    validate_native_ids(ds, {"notes/logs.md"}, {"notes/b.md#0", "notes/b.md#1"})
    with pytest.raises(UsageError, match="judges chunk_id 'notes/b.md#1', which the index does not hold"):
        validate_native_ids(ds, {"notes/logs.md"}, {"notes/b.md#0"})
    with pytest.raises(UsageError, match="judges doc_id 'notes/logs.md'"):
        validate_native_ids(ds, set(), {"notes/b.md#0", "notes/b.md#1"})


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        ([], "queries must be a non-empty list"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": ["d"]}] * 2, r"queries\[1\]: duplicate query id 'a'"),
        ([{"id": "", "text": "x", "relevant_doc_ids": ["d"]}], "id must be a non-empty string"),
        ([{"id": "a", "text": " ", "relevant_doc_ids": ["d"]}], "text must be a non-empty string"),
        ([{"id": "a", "text": "x"}], "exactly one of"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": ["d"], "relevant_chunk_ids": ["d#0"]}], "exactly one of"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": ["d", "d"]}], "'d' is listed twice"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": {"d": -1}}], "must be a number >= 0"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": {"d": True}}], "must be a number >= 0"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": {"d": 10**400}}], "must be a number >= 0"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": {"d": "1"}}], "must be a number >= 0"),
        ([{"id": "a", "text": "x\ud800", "relevant_doc_ids": ["d"]}], "unpaired surrogate"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": {"d": 0}}], "no id with a gain > 0"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": "d"}], "expected a list of ids"),
        ([{"id": "a", "text": "x", "relevant_doc_ids": ["d"], "extra": 1}], "unknown key 'extra'"),
    ],
)
def test_native_strict(tmp_path, queries, message):
    with pytest.raises(UsageError, match=message):
        load_dataset(_native(tmp_path, queries))


def test_native_format_required(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"queries": []}')
    with pytest.raises(UsageError, match="format"):
        load_dataset(p)
    p.write_text("{not json")
    with pytest.raises(UsageError, match="not JSON"):
        load_dataset(p)
    p.write_text("[" * 100_000)
    with pytest.raises(UsageError, match=r"not JSON \(nested too deeply\)"):
        load_dataset(p)
    p.write_text('{"format": ' + LONG_INT + "}")
    with pytest.raises(UsageError, match=r"x.json: not JSON \(Exceeds the limit"):
        load_dataset(p)
    with pytest.raises(UsageError, match="unknown key 'foo'"):
        load_dataset(_native(tmp_path, [{"id": "a", "text": "x", "relevant_doc_ids": ["d"]}], foo=1))


# -- the real collections (developers and CI only) ----------------------------------------------


def test_real_cranfield():
    ds = load_dataset(shared_data("eval", "cranfield"))
    assert (len(ds.docs), len(ds.queries)) == (1400, 225)
    # 1837 judgment lines, 225 of them code -1: 1612 relevant.
    assert sum(len(r) for r in ds.qrels.values()) == 1612
    assert set().union(*(set(r.values()) for r in ds.qrels.values())) == {1.0, 2.0, 3.0, 4.0}
    # cran.qry's third record is .I 004 ("heat conduction in composite slabs"); judgments call it 3.
    assert "heat conduction in composite slabs" in ds.queries["3"]
    assert "application to turbulent separations" in ds.docs["240"]  # after a stray .A marker


def test_real_cisi_adi_scifact():
    cisi = load_dataset(shared_data("eval", "cisi"))
    assert (len(cisi.docs), len(cisi.queries)) == (1460, 76)
    adi = load_dataset(shared_data("eval", "adi"))
    assert (len(adi.docs), len(adi.queries), sum(len(r) for r in adi.qrels.values())) == (82, 35, 170)
    sf = load_dataset(shared_data("eval", "scifact"), split="train")
    assert (len(sf.docs), len(sf.queries), sum(len(r) for r in sf.qrels.values())) == (5183, 809, 919)
