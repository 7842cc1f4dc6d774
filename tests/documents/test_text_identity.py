"""Text kinds are read exactly as before document readers existed: the four files of an index of a
text corpus are the same bytes (meta.json but for its creation time) as those the plain text reader
always wrote, pinned here from that reader's output."""

import hashlib
import json
import shutil
import sys
from pathlib import Path

from tests.conftest import shared_data

# SHA-256 of meta.json (without created_at), docs.jsonl, vectors.f32, bm25.idx of the corpus below,
# as written by ragtui before the document readers (the plain text reader's output).
PINNED = {
    "meta.json": "f70dc1fe74d3d2d7775574e34aff8779980516639fad5cc13d6abf0e33317750",
    "docs.jsonl": "b60621dc56d17cebd5b689232290a601c2b3add2bf8a5655a4aa5a250ba56933",
    "vectors.f32": "afda8bf18e685059ec34e7db182c6431e70534f3a8e20fdba12e84c1ac7cee69",
    "bm25.idx": "c3325cbadce3a1c1306d4e0cd781e6eb242a7a0cbf9705f1c52c9fcff183b7a7",
}

EXTRA = {
    "notes.txt": "Plain notes.\r\nWith CRLF line ends.\r\n\r\nAnd a second paragraph.\r\n",
    "page.md": "\ufeff# Title\n\nA Markdown page with a BOM.\n\n## Section\n\nText\fafter a form feed.\n",
    "guide.rst": "Guide\n=====\n\nreStructuredText body.\n\nPart\n----\n\nMore text.\n",
    "manual.adoc": "= Manual\n\n== Install\n\nRun the installer.\n",
    "fake.html.txt": "<html><body><p>Markup in a text file stays text.</p></body></html>\n",
    "README": "A readme without an extension.\n",
}


def build(folder: Path, art: Path) -> dict[str, str]:
    from ragtui import cli

    faq = shared_data("corpora", "python-docs", "faq")
    shutil.copytree(faq, folder)
    for name, text in EXTRA.items():
        (folder / name).write_bytes(text.encode("utf-8"))
    code = cli.main(["ingest", str(folder), "--artifacts", str(art)])
    assert code == 0
    index = art / "rag" / folder.name
    meta = json.loads((index / "meta.json").read_bytes())
    meta.pop("created_at")
    digests = {"meta.json": hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()}
    for name in ("docs.jsonl", "vectors.f32", "bm25.idx"):
        digests[name] = hashlib.sha256((index / name).read_bytes()).hexdigest()
    return digests


def test_a_text_corpus_gives_the_same_four_files(tmp_path, capsys):
    digests = build(tmp_path / "corpus", tmp_path / "art")
    assert digests == PINNED


if __name__ == "__main__":  # prints the digests of this checkout's output (how PINNED was made)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(build(Path(d) / "corpus", Path(d) / "art"), indent=4))
    sys.exit(0)
