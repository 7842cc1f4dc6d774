"""The user guide agrees with the code: every settings key documented, every sample config loadable."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ragtui.config import SCHEMA, load_settings, user_config_path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_PAGE = ROOT / "docs" / "settings.md"
EXAMPLE = ROOT / "examples" / "ragtui.toml"


def schema_keys() -> set[str]:
    """Every key a ragtui.toml may hold, dotted (``search.fusion``; top-level keys bare)."""
    keys = set()
    for name, kind in SCHEMA.items():
        if isinstance(kind, dict):
            keys.update(f"{name}.{key}" for key in kind)
        else:
            keys.add(name)
    return keys


def page_keys(text: str) -> set[str]:
    """The keys docs/settings.md documents: the first cell of each table row, under its section's table name."""
    keys, table = set(), None
    for line in text.splitlines():
        heading = re.match(r"^## (?:`\[(\w+)\]`|Top level)\s*$", line)
        if heading:
            table = heading.group(1) or ""
            continue
        if line.startswith("## "):
            table = None
        row = re.match(r"^\| `(\w+)` \|", line)
        if row and table is not None:
            keys.add(f"{table}.{row.group(1)}" if table else row.group(1))
    return keys


def test_the_settings_page_documents_every_key_and_no_other():
    documented = page_keys(SETTINGS_PAGE.read_text(encoding="utf-8"))
    assert schema_keys() - documented == set(), "keys of ragtui/config.py's SCHEMA missing from docs/settings.md"
    assert documented - schema_keys() == set(), "docs/settings.md names keys that ragtui/config.py does not accept"


def test_the_page_reader_sees_a_missing_and_an_invented_key():
    page = SETTINGS_PAGE.read_text(encoding="utf-8")
    without = page.replace("| `overlap` |", "| overlap |")
    assert "chunker.overlap" not in page_keys(without)
    invented = page.replace("| `overlap` |", "| `overlap` | x |\n| `overlapp` |")
    assert "chunker.overlapp" in page_keys(invented) - schema_keys()


def test_the_example_config_loads_and_names_every_key(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    settings = load_settings({}, config=EXAMPLE)
    assert settings.embedder["kind"] == "wordllama"
    # Hybrid's fusion and weight have no fixed default (fitted to the index's embedder): commented out.
    assert "fusion" not in settings.search and "weight" not in settings.search and settings.search["depth"] == 100
    text = EXAMPLE.read_text(encoding="utf-8")
    named = set()
    table = ""
    for line in text.splitlines():
        line = line.lstrip("# ").rstrip()
        header = re.match(r"^\[(\w+)\]", line)
        if header:
            table = header.group(1)
            continue
        key = re.match(r"^(\w+) = ", line)
        if key:
            named.add(f"{table}.{key.group(1)}" if table and f"{table}.{key.group(1)}" in schema_keys()
                      else key.group(1))
    assert schema_keys() - named == set(), "keys missing from examples/ragtui.toml (set or commented)"


def test_the_example_with_every_comment_removed_is_still_a_valid_config(monkeypatch, tmp_path):
    """Uncommenting every line of the sample gives a file the schema accepts, as the user's own config."""
    lines = []
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        bare = line.lstrip("# ")
        if re.match(r"^(\[\w+\]|\w+ = )", bare):
            lines.append(bare)
    full = user_config_path()  # trusted_configs is read only from the user's config
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text("\n".join(lines) + "\n", encoding="utf-8")
    doc = tomllib.loads(full.read_text(encoding="utf-8"))
    assert doc["llm"]["context_tokens"] == 2000 and doc["embedder"]["tokenize_style"] == "llama.cpp"
    monkeypatch.chdir(tmp_path)
    settings = load_settings({})
    assert settings.llm["model"] == "smol-135m" and settings.embedder["base_url"] == "http://127.0.0.1:8080"


def toml_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)):
            blocks.append((f"{page.name}:{i}", block))
    return blocks


@pytest.mark.parametrize(("where", "block"), toml_blocks(), ids=[w for w, _ in toml_blocks()])
def test_every_config_snippet_in_the_guide_is_accepted(where, block, monkeypatch, tmp_path):
    path = tmp_path / "ragtui.toml"
    path.write_text(block, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    load_settings({}, config=path)  # raises UsageError naming the key on any unknown key or wrong type


def test_the_guide_has_toml_snippets_for_every_server():
    names = {where.split(":")[0] for where, _ in toml_blocks()}
    assert {"embedders.md", "pack-ask.md"} <= names
    servers = [b for w, b in toml_blocks() if w.startswith("embedders.md")]
    styles = {m for b in servers for m in re.findall(r'tokenize_style = "([^"]+)"', b)}
    assert styles == {"llama.cpp", "llama-cpp-python", "none", "vllm", "tei"}
