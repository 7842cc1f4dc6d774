"""An export written with --with-sources, in headless Chromium: every result link the page shows opens.

The page's own links (``href`` as the page renders it, resolved against the page's address, as a click
would) are fetched from the same loopback static server: each answers 200 with the document's bytes.
"""

from __future__ import annotations

import urllib.parse
import urllib.request

from ragtui import cli
from ragtui.core.ingest.sync import sync
from tests.helpers.browser import chromium, require_browser, search, serve
from tests.unit.fakes import HashEmbedder

DOCS = {
    "guide.md": "# Guide\n\nHow to rotate log files with logrotate.\n\n## Cron\n\nRotate logs daily from cron.\n",
    "notes/café au lait.md": "# Café\n\nNotes about log files and coffee.\n",
    "notes/100% #done.txt": "rotate the log files when they are done\n",
}


def test_every_link_the_page_shows_opens(tmp_path, capsys):
    require_browser()
    folder = tmp_path / "docs"
    for rel, text in DOCS.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    sync(folder, artifacts=tmp_path / "art", embedder=HashEmbedder(dim=16), max_tokens=64, overlap=8)
    out = tmp_path / "site"
    assert cli.main(["export", str(out), "--artifacts", str(tmp_path / "art"), "--with-sources"]) == 0, \
        capsys.readouterr().err
    with serve(out) as base, chromium() as browser:
        page = browser.new_page()
        page.goto(base)
        page.wait_for_selector("#status[data-ready='1']", state="attached", timeout=60_000)
        hits = search(page, "rotate log files")
        hrefs = [h["href"] for h in hits]
        assert len(hrefs) == 3 and all(hrefs), hits  # one chunk per document, each a link
        opened = set()
        for href in hrefs:
            url = urllib.parse.urljoin(page.url, href)
            with urllib.request.urlopen(url.split("#")[0], timeout=30) as response:
                assert response.status == 200, url
                body = response.read()
            doc = urllib.parse.unquote(urllib.parse.urlsplit(url).path.lstrip("/"))
            assert body == (tmp_path / doc).read_bytes()
            opened.add(doc)
        assert opened == {f"docs/{rel}" for rel in DOCS}
