"""The sym: filter: parsing, matching whole names, and search through the Python API and `ragtui search` over an
index of real source files; non-code documents index exactly as the plain chunker cuts them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragtui.core.code.symbols import chunk_symbols
from ragtui.core.code.syntax import MAX_CODE_CHARS
from ragtui.core.errors import QueryError
from ragtui.core.ingest.chunker import chunk_text
from ragtui.core.ingest.sync import sync
from ragtui.core.search.query import Filter, parse_query
from ragtui.core.search.query_plan import doc_table
from ragtui.core.search.retriever import MODES, Retriever
from ragtui.core.search.symbols import symbol_matches, symbol_table
from tests.helpers.cli import run as ragtui
from tests.helpers.code_grammars import grammars  # noqa: F401  (a fixture)
from tests.unit.fakes import HashEmbedder, WordTokenizer

SAMPLES = Path(__file__).parent / "code_samples"

needs_grammars = pytest.mark.usefixtures("grammars")


def test_sym_is_a_filter_with_a_dotted_value():
    parsed = parse_query("rank sym:Retriever.search")
    assert parsed.clauses[1].items == (Filter("sym", "Retriever.search"),)
    assert parsed.describe().splitlines()[-1] == "filter: sym:Retriever.search"
    assert parse_query(parsed.canonical()).describe() == parsed.describe()
    for bad in ("rank sym:.x", "rank sym:a..b", "rank sym:a."):
        with pytest.raises(QueryError, match="sym: takes a symbol"):
            parse_query(bad, strict=True)
        assert parse_query(bad).notes  # lenient (the default): searched as text, with a note
    with pytest.raises(QueryError, match=r"the filters are path:, ext:, lang: and sym:"):
        parse_query("rank sim:x", strict=True)


@pytest.mark.parametrize(("value", "path", "hit"), [
    ("Retriever.search", "Retriever.search", True), ("search", "Retriever.search", True),
    ("Retriever", "Retriever.search", True), ("rag.Retriever", "rag.Retriever.size", True),
    ("Retr", "Retriever.search", False), ("earch", "Retriever.search", False),
    ("retriever", "Retriever", False), ("Retriever.size", "Retriever.search", False),
])
def test_a_value_matches_a_run_of_whole_names(value, path, hit):
    assert symbol_matches(value, path) is hit


@pytest.fixture(scope="module")
def code_index(tmp_path_factory):
    base = tmp_path_factory.mktemp("sym")
    docs = base / "src"
    shutil.copytree(SAMPLES, docs)
    (docs / "notes.md").write_text("# Notes\n\nThe search of the retriever ranks documents.\n", encoding="utf-8")
    art = base / "art"
    report = sync(docs, artifacts=art, embedder=HashEmbedder(dim=8, model="test-model"), max_tokens=40, overlap=4)
    assert report.published
    return docs, art, art / "rag" / "src"


@needs_grammars
@pytest.mark.parametrize("mode", MODES)
def test_sym_finds_the_chunks_of_a_symbol_in_every_mode(code_index, mode):
    _, _, path = code_index
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    hits = retriever.search("documents query sym:Retriever.search", mode=mode, k=50)
    table = symbol_table(retriever.data.records, doc_table(retriever.data.records))
    assert hits, mode
    for hit in hits:
        assert any(symbol_matches("Retriever.search", p) for p in table.symbols[hit.row])
    # Every language's search method is found (names are case-sensitive), and nothing else.
    found = {hit.doc_id.rpartition("/")[2] for hit in hits}
    if mode in ("flat", "ivf"):
        assert found == {"Retriever.java", "retriever.hpp", "retriever.js", "retriever.py", "retriever.rs",
                         "retriever.ts"}  # rag.Retriever.search too; Go's Retriever.Search is another name
    excluded = retriever.search("documents -sym:search", mode="bm25", k=100)
    assert excluded and not any(
        any(symbol_matches("search", p) for p in table.symbols[h.row]) for h in excluded)
    assert "src/notes.md" in {h.doc_id for h in excluded}


@needs_grammars
def test_go_and_cpp_methods_are_found_by_their_type(code_index):
    _, _, path = code_index
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    assert {h.doc_id for h in retriever.search("return sym:Retriever.Search", mode="flat", k=50)} == {
        "src/retriever.go"}
    assert {h.doc_id for h in retriever.search("return sym:rag.Retriever.size", mode="flat", k=50)} == {
        "src/retriever.hpp"}
    assert {h.doc_id for h in retriever.search("echo sym:usage OR sym:index_folder", mode="flat", k=50)} == {
        "src/index.sh"}


@needs_grammars
def test_sym_through_ragtui_search(code_index):
    docs, art, _ = code_index
    # The installed command with its own embedder: a fresh index of the same folder.
    cli_art = art.parent / "cli-art"
    done = ragtui("ingest", str(docs), "--artifacts", str(cli_art))
    assert done.returncode == 0, done.stderr
    result = ragtui("search", "documents sym:Retriever.search", "--mode", "bm25", "--artifacts", str(cli_art),
                    "--json", "-k", "50")
    assert result.returncode == 0, result.stderr
    found = {hit["doc_id"] for hit in json.loads(result.stdout)}
    assert found and found <= {f"src/{n}" for n in ("Retriever.java", "retriever.js", "retriever.py",
                                                     "retriever.rs", "retriever.ts", "retriever.hpp")}
    none = ragtui("search", "documents sym:NoSuchThing", "--mode", "bm25", "--artifacts", str(cli_art))
    assert none.returncode == 1 and "Traceback" not in none.stderr
    bad = ragtui("search", "documents sym:a..b", "--artifacts", str(cli_art), "--strict")
    assert bad.returncode == 2 and bad.stderr.startswith("ragtui: error: query column 11: sym: takes a symbol")
    lenient = ragtui("search", "documents sym:a..b", "--artifacts", str(cli_art))  # as text, with a note
    assert lenient.returncode == 0 and "sym: takes a symbol" in lenient.stderr, lenient.stderr


def test_documents_that_are_not_code_are_cut_exactly_as_before(code_index):
    docs, _, path = code_index
    retriever = Retriever.open(path, embedder=HashEmbedder(dim=8, model="test-model"))
    records = retriever.data.records
    rows = [records[i] for i in range(len(records)) if records[i].doc_id == "src/notes.md"]
    text = (docs / "notes.md").read_text(encoding="utf-8")
    assert [r.text for r in rows] == [c.text for c in chunk_text(text, WordTokenizer(), 40, 4)]


def test_without_the_grammars_code_keeps_the_plain_chunker_and_the_sync_says_so_once(tmp_path):
    # A fresh interpreter in which tree_sitter cannot be imported, as without ragtui[code].
    docs = tmp_path / "src"
    shutil.copytree(SAMPLES, docs)
    code = f"""
import json, sys
sys.modules["tree_sitter"] = None  # import tree_sitter raises ImportError, as when it is not installed
from ragtui.core.ingest.chunker import chunk_text
from ragtui.core.code.languages import chunker_identity
from ragtui.core.ingest.sync import sync
from ragtui.core.index.index_format import read_index
from tests.unit.fakes import HashEmbedder, WordTokenizer
report = sync({str(docs)!r}, artifacts={str(tmp_path / 'art')!r}, embedder=HashEmbedder(dim=8, model="m"),
              max_tokens=40, overlap=4)
data = read_index({str(tmp_path / 'art' / 'rag' / 'src')!r})
text = open({str(docs / 'retriever.py')!r}, encoding="utf-8").read()
rows = [data.records[i].text for i in range(data.n_chunks) if data.records[i].doc_id == "src/retriever.py"]
from ragtui.commands.info import _code_documents
print(json.dumps({{"warnings": report.warnings, "identity": chunker_identity(),
                  "plain": rows == [c.text for c in chunk_text(text, WordTokenizer(), 40, 4)],
                  "info": _code_documents(["src/a.py", "src/b.go", "src/c.md"])}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["plain"] and out["identity"] == ""
    assert out["info"] == {"documents": {"go": 1, "python": 1}, "chunker": (
        "plain text for go, python: no grammar installed; pip install 'ragtui[code]' to cut source files at "
        "their definitions")}
    assert len(out["warnings"]) == 1
    assert out["warnings"][0].startswith("source files cut as plain text, no grammar installed for: bash (1), "
                                         "c (1), cpp (1), go (1), java (1), javascript (1), python (1), rust (1), "
                                         "tsx (1), typescript (1); install ragtui[code]")


@needs_grammars
def test_the_symbols_are_kept_in_the_cache_and_a_damaged_entry_is_derived_again(code_index, tmp_path):
    from ragtui.core.index.index_format import read_index
    from ragtui.core.search import symbols as symbols_module

    def _table(data, cache=None):
        return symbols_module.symbol_table(data.records, doc_table(data.records), cache, "src")

    _, _, path = code_index
    fresh = _table(read_index(path))  # no cache
    cache = tmp_path / "cache"
    stored = _table(read_index(path), cache)
    (entry,) = cache.iterdir()
    assert entry.name.startswith("symbols-src-")
    loaded = _table(read_index(path), cache)
    assert fresh.symbols == stored.symbols == loaded.symbols
    assert any(fresh.symbols)
    (entry / "ends.npy").write_bytes(b"\x93NUMPY damaged")
    assert _table(read_index(path), cache).symbols == fresh.symbols


def test_hostile_chunk_texts_are_read_in_bounded_work():
    # A header of 20,000 lines, unclosed strings and brackets, 300 nested blocks: answers, not hangs.
    header = "def f(\n" + "    x: int,\n" * 20_000 + "):\n    pass"
    nested = "".join("    " * i + "if x:\n" for i in range(300)) + "    " * 300 + "pass"
    texts = [header, "'''never closed", "x = (((((", "\"\\", nested, "class A:", "def g(): pass"]
    got = chunk_symbols("a.py", texts)
    assert len(got) == len(texts) and got[0] == ("f",)
    assert len(chunk_symbols("a.js", ["function f() {" * 20_000, "}" * 20_000])) == 2
    # Past MAX_CODE_CHARS a document's chunks are not parsed at all.
    assert chunk_symbols("a.py", ["def f(): pass", "x" * MAX_CODE_CHARS]) == [(), ()]


@needs_grammars
def test_installing_the_grammars_re_chunks_code_once_and_leaves_other_indexes_unpublished(tmp_path):
    # First sync in an interpreter without tree_sitter (the plain install), then here, with the grammars.
    mixed, prose = tmp_path / "mixed", tmp_path / "prose"
    mixed.mkdir()
    prose.mkdir()
    shutil.copy(SAMPLES / "retriever.py", mixed / "retriever.py")
    for folder in (mixed, prose):
        (folder / "notes.md").write_text("# Notes\n\nThe search of the retriever ranks documents.\n", encoding="utf-8")
    art = tmp_path / "art"
    code = f"""
import sys
sys.modules["tree_sitter"] = None
from ragtui.core.ingest.sync import sync
from tests.unit.fakes import HashEmbedder
for folder in ({str(mixed)!r}, {str(prose)!r}):
    assert sync(folder, artifacts={str(art)!r}, embedder=HashEmbedder(dim=8, model="m"), max_tokens=40,
                overlap=4).published
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    prose_bytes = {p.name: p.read_bytes() for p in (art / "rag" / "prose").iterdir()}
    again = {}
    for name, folder in (("mixed", mixed), ("prose", prose)):
        again[name] = sync(folder, artifacts=art, embedder=HashEmbedder(dim=8, model="m"), max_tokens=40, overlap=4)
    assert again["mixed"].published and again["mixed"].warnings == []
    assert again["mixed"].rebuilt == again["prose"].rebuilt == (
        "the code grammars installed changed: every document read again, source files re-chunked "
        "(spec/chunker.md, Code)")
    assert not again["prose"].published
    assert {p.name: p.read_bytes() for p in (art / "rag" / "prose").iterdir()} == prose_bytes
    retriever = Retriever.open(art / "rag" / "mixed", embedder=HashEmbedder(dim=8, model="m"))
    texts = [retriever.data.records[i].text for i in range(retriever.data.n_chunks)
             if retriever.data.records[i].doc_id == "mixed/retriever.py"]
    from ragtui.core.ingest.code_chunks import chunk_code

    source = (mixed / "retriever.py").read_text(encoding="utf-8")
    assert texts == [c.text for c in chunk_code(source, "python", WordTokenizer(), 40, 4)]
    # Nothing changed since: the next sync reads nothing and writes nothing.
    third = sync(mixed, artifacts=art, embedder=HashEmbedder(dim=8, model="m"), max_tokens=40, overlap=4)
    assert not third.published and third.unchanged == 2


@needs_grammars
def test_info_lists_the_source_files_and_how_they_are_cut(code_index, capsys):
    from ragtui import cli

    docs, art, _ = code_index
    cli_art = art.parent / "info-art"
    assert cli.main(["ingest", str(docs), "--artifacts", str(cli_art)]) == 0
    capsys.readouterr()
    assert cli.main(["info", "--artifacts", str(cli_art), "--index", "src", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["code_documents"] == {"bash": 1, "c": 1, "cpp": 1, "go": 1, "java": 1, "javascript": 1,
                                      "python": 1, "rust": 1, "tsx": 1, "typescript": 1}
    assert info["code_chunker"] == "at definitions (tree-sitter)"


@needs_grammars
def test_the_same_source_folder_gives_the_same_index_bytes(code_index, tmp_path):
    docs, art, path = code_index
    again = tmp_path / "again"
    assert sync(docs, artifacts=again, embedder=HashEmbedder(dim=8, model="test-model"), max_tokens=40,
                overlap=4).published
    for name in ("docs.jsonl", "vectors.f32", "bm25.idx"):
        assert (again / "rag" / "src" / name).read_bytes() == (path / name).read_bytes()
