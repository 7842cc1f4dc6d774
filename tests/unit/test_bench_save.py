"""The save benchmark on a small index: every save is timed and measured, and the file is put back."""

import importlib.util
import json
from pathlib import Path

from ragtui.core.embedders import make_embedder
from ragtui.core.ingest.sync import sync
from tests.files import write

ROOT = Path(__file__).resolve().parents[2]


def test_each_save_is_reported_and_the_file_is_put_back(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_save_under_test", ROOT / "bench" / "bench_save.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder, art = tmp_path / "corpus", tmp_path / "art"
    for i in range(5):
        write(folder / f"f{i}.md", f"document {i} about otters and rivers\n\n" * 5)
    original = (folder / "f2.md").read_bytes()
    sync(folder, artifacts=art, index_id="corpus", embedder=make_embedder("wordllama"))  # as the bench opens it
    out = tmp_path / "saves.json"
    assert bench.main([str(folder), str(art), "f2.md", "--saves", "3", "--json", str(out)]) == 0
    saves = json.loads(out.read_text())["saves"]
    assert len(saves) == 3
    for save in saves:
        assert save["wall_ms"] >= 0 and "encode" in save["stages_ms"] and "splice" in save["stages_ms"]
        assert save["after_derive_mib"]["VmHWM"] > 0 and min(save["peak_anon_mib"].values()) > 0
        assert save["derive_ms"] >= 0
    assert (folder / "f2.md").read_bytes() == original
