"""The detokenized vocabulary kept between runs (core.embedders.vocab_cache), against a real loopback server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragtui.core.embedders.http import HTTPEmbedder
from ragtui.core.embedders.vocab_cache import MAX_FILE_BYTES, SAMPLE, default_cache_dir
from ragtui.core.embedders.wordllama import WordLlamaEmbedder
from tests.helpers.embed_server import EmbedServer

DETOK = "/extras/detokenize"
TEXT = "The quick brown fox jumps over the lazy dog near the riverbank at dawn, naïve café 😀."


@pytest.fixture(scope="module")
def local() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def tokenizer(server, local):
    return HTTPEmbedder(server.url, local.model, dim=local.dim, tokenize_style="llama-cpp-python").tokenizer


def decoded(server) -> int:
    return len(server.seen_bodies(DETOK))


def run(server, local, text=TEXT):
    tok = tokenizer(server, local)
    before = decoded(server)
    spans = tok.spans(text)
    del tok  # the pieces decoded last are written when the tokenizer goes
    return spans, decoded(server) - before


def files() -> list[Path]:
    folder = default_cache_dir()
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_the_next_run_asks_only_to_check_a_sample(local):
    with EmbedServer(local) as server:
        spans, first = run(server, local)
        assert first > 10  # one request per distinct token
        again, second = run(server, local)
        assert again == spans and second == SAMPLE  # the sample checked, nothing else asked
    [path] = files()
    assert path.parent == Path(os.environ["XDG_CACHE_HOME"]) / "ragtui" / "vocab" and path.suffix == ".json"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_another_model_identity_gets_its_own_cache(local):
    with EmbedServer(local) as server:
        run(server, local)
        server.model_meta = {"n_vocab": 32000, "n_params": 7}  # the same name, another model behind it
        _, asked = run(server, local)
        assert asked > SAMPLE
    assert len(files()) == 2


def test_pieces_the_server_decodes_differently_drop_the_cache(local):
    with EmbedServer(local) as server:
        spans, first = run(server, local)
        [path] = files()
        entry = json.loads(path.read_text(encoding="utf-8"))
        entry["pieces"] = [[i, (t + "x") if t else t] for i, t in entry["pieces"]]  # every piece wrong
        path.write_text(json.dumps(entry), encoding="utf-8")
        again, asked = run(server, local)
        assert again == spans and asked >= first  # decoded afresh, spans right
        _, third = run(server, local)
        assert third == SAMPLE  # and cached again, correctly


@pytest.mark.parametrize("hostile", ["fifo", "directory", "oversized", "not json", "bad entries", "dev-zero"])
def test_a_hostile_cache_file_is_a_miss_never_a_hang(local, hostile):
    with EmbedServer(local) as server:
        spans, first = run(server, local)
        [path] = files()
        path.unlink()
        if hostile == "fifo":
            os.mkfifo(path)
        elif hostile == "directory":
            path.mkdir()
        elif hostile == "oversized":
            with open(path, "wb") as f:
                f.truncate(MAX_FILE_BYTES + 1)
        elif hostile == "dev-zero":
            path.symlink_to("/dev/zero")
        elif hostile == "not json":
            path.write_bytes(b"\xff{not json")
        else:
            path.write_text(json.dumps({"format": 1, "key": path.stem, "pieces": [["1", 2], [-1, "x"]]}))
        again, asked = run(server, local)
        assert again == spans and asked == first
