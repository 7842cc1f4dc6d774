"""The export's index.html in real headless Chromium: type a query, read the results.

The page is served by a loopback http.server from a real export of real
documents (a slice of the Python documentation, reStructuredText, plus
hostile files); its top 10 must be the strict Python reader's top 10 for
every query, and no document text may become markup.
"""

from __future__ import annotations

import json
import shutil

import pytest

from ragtui.core.export.reader import read_export
from ragtui.core.export.writer import export_files, export_to
from ragtui.core.index.index_format import read_index
from ragtui.core.ingest.sync import sync
from tests.conftest import shared_data
from tests.helpers.browser import chromium, require_browser, search, serve
from tests.unit.fakes import HashEmbedder

QUERIES = [
    "list comprehension",
    "dictionary keys values",
    "exception handling try except",
    "class inheritance",
    "the",
    "string formatting f-strings",
    "virtual environment venv pip",
    "unicode encoding decode utf-8",
    "decorator function wraps",
    "generator yield",
    "python python python interpreter",
    "Σίσυφος İstanbul",
    "istanbul οδοσ",
    "ΟΔΟΣ ISTANBUL café",
    "zzzzz-no-such-term",
    "Tutorial",
    "lambda sorted key",
]

HOSTILE = (
    "# <img src=x onerror=\"document.title='pwned'\"> heading\n\n"
    "Body with <script>document.title='pwned'</script> and <b>bold</b> text about hostile markup.\n"
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    require_browser()
    base = tmp_path_factory.mktemp("page")
    folder = base / "pydocs"
    shutil.copytree(shared_data("corpora", "python-docs", "tutorial"), folder / "tutorial")
    shutil.copytree(shared_data("corpora", "python-docs", "faq"), folder / "faq")
    (folder / "hostile.md").write_text(HOSTILE, encoding="utf-8")
    # The analyzer's two traps (index-format.md): İ lowercases to i, every Σ to σ.
    (folder / "unicode.md").write_text("# İSTANBUL\n\nΟΔΟΣ and Straße, café, naïve, 日本語テキスト.\n", encoding="utf-8")
    sync(folder, artifacts=base / "art", embedder=HashEmbedder(dim=16), max_tokens=128, overlap=16)
    data = read_index(base / "art" / "rag" / "pydocs", full=True)
    out = export_to(base / "site", export_files(data, generated_at="2026-01-01T00:00:00Z"))
    return out


@pytest.fixture(scope="module")
def browser(exported):
    with chromium() as b:  # one Playwright session per module: the sync API allows only one at a time
        yield b


@pytest.fixture(scope="module")
def page(exported, browser):
    with serve(exported) as url:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector("#status[data-ready='1']", state="attached", timeout=60_000)
        yield page, errors


def test_the_page_ranks_as_the_python_reader(page, exported):
    page, errors = page
    reader = read_export(exported)
    compared = 0
    for query in QUERIES:
        shown = search(page, query)
        expected = reader.search(query, 10)
        got = [(h["chunk"], h["score"]) for h in shown]
        want = [(h.chunk, h.score) for h in expected]
        assert [c for c, _ in got] == [c for c, _ in want], f"{query!r}: page {got} vs reader {want}"
        for (_, a), (_, b) in zip(got, want):
            assert abs(a - b) <= 1e-9 * max(1.0, abs(b)), f"{query!r}: score {a} vs {b}"
        compared += len(want)
    assert compared >= 100  # most queries have a full top 10
    assert errors == []
    assert [h["id"] for h in search(page, "istanbul οδοσ")][:1] == ["pydocs/unicode.md#0"]


def test_results_show_title_heading_link_and_marks(page):
    page, _ = page
    hits = search(page, "list comprehension")
    assert hits
    first = hits[0]
    assert first["title"] and first["href"].startswith("pydocs/tutorial/") and "#L" in first["href"]
    assert any(m.lower() in ("list", "comprehension", "comprehensions") or m.lower().startswith("list")
               for h in hits for m in h["marks"])
    # A reStructuredText heading path is shown for the tutorial's chunks.
    assert any(h["heading"] for h in hits)


def test_document_text_never_becomes_markup(page):
    page, errors = page
    hits = search(page, "hostile markup")
    assert hits and hits[0]["id"].endswith("hostile.md#0")
    hit = hits[0]
    assert "<script>" in hit["snippet"] and "<b>bold</b>" in hit["snippet"]
    assert set(hit["elements"]) <= {"div", "a", "p", "mark"}
    assert "<img" in hit["title"]  # the title is the first heading, shown as text
    assert page.title() != "pwned" and errors == []


def test_a_hostile_url_is_not_a_link(exported, browser, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(exported, site)
    corpus = site / "search" / "pydocs" / "corpus.json"
    obj = json.loads(corpus.read_text(encoding="utf-8"))
    obj["chunks"]["url"] = ["javascript:document.title='pwned'"] * len(obj["chunks"]["url"])
    corpus.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    with serve(site) as url:
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("#status[data-ready='1']", state="attached", timeout=60_000)
        hits = search(page, "list comprehension")
        assert hits and all(h["href"] is None for h in hits)


def test_only_the_shown_results_content_shards_are_fetched(exported, browser):
    with serve(exported) as url:
        page = browser.new_page()
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url[len(url):]))
        page.goto(url)
        page.wait_for_selector("#status[data-ready='1']", state="attached", timeout=60_000)
        assert not [f for f in fetched if "/content/" in f or "/lexical/postings-" in f]
        hits = search(page, "list comprehension")
    reader = read_export(exported)
    corpus = next(iter(reader.corpora.values()))
    needed = {corpus.content_at[h["chunk"]][0] for h in hits}
    content = {f for f in fetched if "/content/" in f}
    assert content == {f"search/pydocs/content/content-{s:03d}.json" for s in needed}
    assert len(corpus.contents) > len(needed)  # the corpus has more shards than were fetched
