"""Where indexes live and which one is opened: the root's decision, the clear choice among several."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragtui import app
from ragtui.config import Settings, default_artifacts, load_settings, user_cache_root, user_state_dir
from ragtui.core.ingest.sync import sync
from tests.unit.fakes import HashEmbedder


def test_the_contract_root_when_it_exists_and_is_writable(tmp_path):
    contract = tmp_path / "artifacts"
    contract.mkdir()
    root, why = default_artifacts({"HOME": str(tmp_path / "home")}, contract=contract)
    assert root == contract and why == f"default: {contract} exists and is writable"


def test_the_user_data_folder_when_the_contract_root_is_absent(tmp_path):
    contract = tmp_path / "artifacts"
    root, why = default_artifacts({"HOME": str(tmp_path / "home")}, contract=contract)
    assert root == tmp_path / "home" / ".local" / "share" / "ragtui"
    assert "does not exist" in why and "$XDG_DATA_HOME/ragtui" in why
    assert not contract.exists()  # deciding never creates it
    root, _ = default_artifacts({"HOME": "/h", "XDG_DATA_HOME": str(tmp_path / "data")}, contract=contract)
    assert root == tmp_path / "data" / "ragtui"
    root, _ = default_artifacts({"HOME": "/h", "XDG_DATA_HOME": "relative/data"}, contract=contract)
    assert root == Path("/h/.local/share/ragtui")  # a relative XDG value is ignored, as the spec says


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: the subprocess test runs as nobody instead")
def test_the_user_data_folder_when_the_contract_root_is_not_writable(tmp_path):
    contract = tmp_path / "artifacts"
    contract.mkdir(mode=0o555)
    root, why = default_artifacts({"HOME": str(tmp_path)}, contract=contract)
    assert root == tmp_path / ".local" / "share" / "ragtui" and "not a writable folder" in why


def test_a_file_named_like_the_contract_root_is_not_a_root(tmp_path):
    contract = tmp_path / "artifacts"
    contract.write_text("not a folder")
    root, why = default_artifacts({"HOME": str(tmp_path)}, contract=contract)
    assert root != contract and "not a writable folder" in why


def test_what_chose_the_root_is_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings({})
    assert s.artifacts_from.startswith("default: ")
    assert load_settings({"RAGTUI_ARTIFACTS": str(tmp_path / "env")}).artifacts_from == "RAGTUI_ARTIFACTS"
    assert s.with_flags(artifacts=str(tmp_path / "flag")).artifacts_from == "--artifacts"
    (tmp_path / "ragtui.toml").write_text(f'artifacts = "{tmp_path / "conf"}"\n')
    s = load_settings({}, config=tmp_path / "ragtui.toml")  # a file named with --config is trusted
    assert s.artifacts == tmp_path / "conf" and s.artifacts_from == f"artifacts in {tmp_path / 'ragtui.toml'}"
    assert "--artifacts DIR or RAGTUI_ARTIFACTS" in app.root_hint(s)


def test_cache_and_state_folders_follow_xdg(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s")}
    assert user_cache_root(env) == tmp_path / "c" / "ragtui" and user_state_dir(env) == tmp_path / "s" / "ragtui"
    assert user_cache_root({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "ragtui"


@pytest.fixture
def three(tmp_path):
    """Three indexes: a, its subfolder a/inner (as "inner"), and b."""
    art = tmp_path / "art"
    a = tmp_path / "a"
    (a / "inner").mkdir(parents=True)
    (a / "x.md").write_text("alpha\n")
    (a / "inner" / "y.md").write_text("inner\n")
    b = tmp_path / "b"
    b.mkdir()
    (b / "z.md").write_text("beta\n")
    for folder in (a, a / "inner", b):
        sync(folder, artifacts=art, embedder=HashEmbedder(), max_tokens=32, overlap=4)
    return Settings(artifacts=art), a, b


def test_several_indexes_pick_the_one_whose_folder_holds_the_cwd(three):
    settings, a, b = three
    notes = []
    assert app.resolve_index(settings, cwd=b, note=notes.append).name == "b"
    assert "its folder holds the current directory" in notes[0] and "--index ID" in notes[0]
    assert app.resolve_index(settings, cwd=a / "inner", note=None).name == "inner"  # the innermost folder
    assert app.resolve_index(settings, cwd=a, note=None).name == "a"


def test_several_indexes_else_the_one_used_last_else_ask(three, tmp_path):
    settings, _a, _b = three
    with pytest.raises(app.SeveralIndexes) as several:
        app.resolve_index(settings, cwd=tmp_path, note=None)
    assert several.value.names == ["a", "b", "inner"]
    app.remember_index(settings, "b")
    assert app.resolve_index(settings, cwd=tmp_path, note=None).name == "b"
    app.remember_index(settings, "gone")  # remembered but since deleted: ask again
    with pytest.raises(app.SeveralIndexes):
        app.resolve_index(settings, cwd=tmp_path, note=None)


def test_the_index_used_last_is_remembered_per_root_atomically(tmp_path):
    one, two = Settings(artifacts=tmp_path / "one"), Settings(artifacts=tmp_path / "two")
    app.remember_index(one, "docs")
    app.remember_index(two, "notes")
    assert (app.remembered_index(one), app.remembered_index(two)) == ("docs", "notes")
    state = user_state_dir()
    assert [p.name for p in state.iterdir()] == ["last-index.json"]  # no temporary file left behind
    assert json.loads((state / "last-index.json").read_text())["last"][str(tmp_path / "one")] == "docs"


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"last": 3}', b'{"last": {"/x": 5}}', b"\xff\xfe",
                                     b'{"last": {}}' + b" " * 70_000])
def test_a_damaged_memory_of_the_last_index_is_ignored(tmp_path, content):
    state = user_state_dir()
    state.mkdir(parents=True)
    (state / "last-index.json").write_bytes(content)
    settings = Settings(artifacts=tmp_path / "art")
    assert app.remembered_index(settings) is None
    app.remember_index(settings, "docs")  # and is replaced by a good one
    assert app.remembered_index(settings) == "docs"


def test_an_unwritable_state_folder_only_costs_the_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))  # a file where the folder should be
    app.remember_index(Settings(artifacts=tmp_path), "docs")
    assert app.remembered_index(Settings(artifacts=tmp_path)) is None


def test_a_named_index_that_does_not_exist_lists_those_that_do(three):
    settings, _a, _b = three
    from dataclasses import replace

    with pytest.raises(app.NoIndex) as none:
        app.resolve_index(replace(settings, index="nosuch"))
    assert none.value.names == ["a", "b", "inner"] and "the indexes there: a, b, inner" in str(none.value)
    assert "RAGTUI_ARTIFACTS" in str(none.value)


def test_a_bare_settings_takes_the_default_root_too(tmp_path, monkeypatch):
    """Settings() built by code (not load_settings) must not point at an /artifacts it would create."""
    expected = default_artifacts()
    s = Settings()
    assert (s.artifacts, s.artifacts_from) == expected
    assert Settings(artifacts=tmp_path).artifacts_from == "given"
