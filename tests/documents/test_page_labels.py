"""Packs label PDF snippets by page and line within the page; an answer citing them that way is checked."""

from ragtui.core.answer.check import check_answer
from ragtui.core.answer.pack import pack
from ragtui.core.citations import Resolver, parse_labels
from ragtui.core.embedders.wordllama import WordLlamaEmbedder
from ragtui.core.ingest.publish import index_dir
from ragtui.core.ingest.sync import sync
from ragtui.core.search.retriever import Hit, Retriever
from tests.documents.producers import fpdf_pages


def test_parse_page_labels():
    labels = parse_labels("see [papers/a.pdf p.12 L3-9] and [papers/a.pdf p.2 L40–p.3 L2; notes/b.md:L4]")
    assert [(x.doc_id, x.page, x.start_line, x.page_end, x.end_line) for x in labels] == [
        ("papers/a.pdf", 12, 3, 12, 9), ("papers/a.pdf", 2, 40, 3, 2), ("notes/b.md", None, 4, None, 4)]


def test_pack_labels_and_checks_page_citations(tmp_path):
    emb = WordLlamaEmbedder()
    docs = tmp_path / "docs"
    docs.mkdir()
    fpdf_pages(docs / "birds.pdf", [["Owls hunt at night.", "They have silent feathers."],
                                    ["Herons wade in shallow water.", "They eat fish and frogs."]])
    sync(docs, artifacts=tmp_path / "art", embedder=emb)
    data = Retriever.open(index_dir(tmp_path / "art", "docs")).data
    row = data.records.find("docs/birds.pdf#0")
    hits = [Hit(1, 1.0, "docs/birds.pdf#0", "docs/birds.pdf", row, data.records[row].text)]
    packed = pack("herons", hits, data, emb.tokenizer, 500, mode="bm25", resolver=Resolver(data))
    [snippet] = packed.snippets
    assert snippet.label == "docs/birds.pdf p.1 L1-p.2 L2"
    assert snippet.to_json("bm25")["page"] == 1 and snippet.to_json("bm25")["page_end"] == 2
    got = {c.label: c.verdict for c in check_answer(
        "Herons wade [docs/birds.pdf p.2 L1-2]. Owls [docs/birds.pdf p.1 L1]. Nonsense [docs/birds.pdf p.9 L1].",
        packed, data)}
    assert got == {"docs/birds.pdf p.2 L1-2": "verified", "docs/birds.pdf p.1 L1": "verified",
                   "docs/birds.pdf p.9 L1": "unresolvable"}


def test_mcp_hits_and_get_carry_the_page(tmp_path):
    from ragtui.config import Settings
    from ragtui.mcp.tools import Toolbox

    docs = tmp_path / "docs"
    docs.mkdir()
    fpdf_pages(docs / "birds.pdf", [["Owls hunt at night."], ["Herons wade in shallow water."]])
    (docs / "notes.md").write_text("herons and owls\n")
    sync(docs, artifacts=tmp_path / "art", embedder=WordLlamaEmbedder())
    box = Toolbox(Settings(artifacts=tmp_path / "art", index="docs"))
    results = box.call("search", {"query": "herons", "mode": "bm25"})["results"]
    pdf = next(r for r in results if r["doc_id"] == "docs/birds.pdf")
    assert (pdf["page"], pdf["page_end"], pdf["place"]) == (1, 2, "p.1 L1–p.2 L1")
    assert "page" not in next(r for r in results if r["doc_id"] == "docs/notes.md")
    got = box.call("get", {"ref": "docs/birds.pdf p.2 L1"})
    assert got["text"] == "Herons wade in shallow water."
    assert box.call("get", {"ref": "docs/birds.pdf#0"})["page_end"] == 2
