"""ragtui.toml: the schema (typos and wrong types are errors), layering, and which files may set network keys."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest

from ragtui.config import SCHEMA, TRUSTED_ONLY, load_settings, user_config_path
from ragtui.core.errors import UsageError


@pytest.fixture()
def dirs(tmp_path, monkeypatch):
    """(user config path, project folder = the current directory)."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    user = user_config_path()
    user.parent.mkdir(parents=True)
    return user, project


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- the schema ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, words",
    [
        ("[chunker]\nmax_token = 64\n", "unknown key chunker.max_token (did you mean chunker.max_tokens?)"),
        ("[ivf]\nprobe = 4\n", "unknown key ivf.probe (did you mean ivf.nprobe?)"),
        ("[embedder]\nbase_ur = 'http://x'\n", "unknown key embedder.base_ur (did you mean embedder.base_url?)"),
        ("artifact = '/tmp/a'\n", "unknown key artifact (did you mean artifacts?)"),
        ("max_tokens = 64\n", "unknown key max_tokens (did you mean chunker.max_tokens?)"),
        ("[chunker]\nnprobe = 4\n", "unknown key chunker.nprobe (did you mean ivf.nprobe?)"),
        ("[chunker]\nzzz = 1\n", "unknown key chunker.zzz (keys of [chunker]: max_tokens, overlap)"),
        ("[chunkr]\nmax_tokens = 64\n", "unknown key chunkr (did you mean chunker?)"),
        ("[chunker]\nmax_tokens = '64'\n", 'chunker.max_tokens must be a whole number (got "64")'),
        ("[chunker]\nmax_tokens = 64.5\n", "chunker.max_tokens must be a whole number (got 64.5)"),
        ("[ivf]\nnprobe = true\n", "ivf.nprobe must be a whole number (got true)"),
        ("[embedder]\ntimeout = '5'\n", 'embedder.timeout must be a number (got "5")'),
        ("[embedder]\nmodel = 3\n", "embedder.model must be a string (got 3)"),
        ("[embedder]\nadaptive = 'no'\n", 'embedder.adaptive must be true or false (got "no")'),
        ("index = ['a']\n", 'index must be a string (got ["a"])'),
        ("chunker = 3\n", "chunker must be a table"),
        ("[chunker]\nmax_tokens = 0\n", "chunker.max_tokens must be ≥ 1 (got 0)"),
        ("[search]\nwieght = 0.5\n", "unknown key search.wieght (did you mean search.weight?)"),
        ("[search]\nrrfk = 10\n", "unknown key search.rrfk (did you mean search.rrf_k?)"),
        ("[search]\nweight = 1.5\n", "search.weight must be from 0 to 1 (got 1.5)"),
        ("[search]\nfusion = 'rfr'\n", "search.fusion must be one of rrf, weighted, zscore (got 'rfr') (did you mean 'rrf'?)"),
        ("[search]\ndepth = 0\n", "search.depth must be a whole number from 1 to 100000 (got 0)"),
        ("[search]\nmmr = 2\n", "search.mmr must be from 0 to 1 (got 2)"),
        ("[search]\nmerge = 1\n", "search.merge must be true or false (got 1)"),
        ("[search]\nlexical = 'bm52'\n", "search.lexical must be one of bm25doc, bm25, bm25stem"),
    ],
)
def test_typos_and_wrong_types_name_the_file_the_key_and_the_nearest_key(dirs, text, words):
    _user, project = dirs
    put(project / "ragtui.toml", text)
    with pytest.raises(UsageError) as e:
        load_settings({})
    assert str(e.value).startswith(f"{project / 'ragtui.toml'}: ") and words in str(e.value)


def test_the_users_config_is_checked_the_same_way(dirs):
    user, _project = dirs
    put(user, "[chunker]\nmax_token = 64\n")
    with pytest.raises(UsageError, match=f"^{user}: unknown key chunker.max_token .did you mean chunker.max_tokens"):
        load_settings({})


def test_every_valid_key_is_accepted(dirs):
    user, _project = dirs
    values = {"a string": '"x"', "a whole number": "2", "a number": "1.5", "a list of strings": "[]",
              "true or false": "true"}
    # [search] values are checked against their ranges at load: valid ones.
    search = {"fusion": '"rrf"', "lexical": '"bm25"', "weight": "0.5", "mmr": "0.5", "chunk_weight": "1.5"}
    lines = [f"{k} = {values[v]}" for k, v in SCHEMA.items() if not isinstance(v, dict)]
    for table, keys in SCHEMA.items():
        if isinstance(keys, dict):
            lines.append(f"[{table}]")
            lines += [f"{k} = {search.get(k) if table == 'search' and k in search else values[v]}"
                      for k, v in keys.items()]
    put(user, "\n".join(lines) + "\n")
    s = load_settings({})
    assert s.max_tokens == 2 and s.nprobe == 2 and s.embedder["timeout"] == 1.5
    assert s.search["fusion"] == "rrf" and s.search["depth"] == 2 and s.search["merge"] is True


def test_the_embedder_keys_are_exactly_the_embedders_options():
    from ragtui.core.embedders.http import HTTPEmbedder
    from ragtui.core.embedders.onnx import OnnxEmbedder
    from ragtui.core.embedders.wordllama import WordLlamaEmbedder

    params = set()
    for cls in (HTTPEmbedder, OnnxEmbedder, WordLlamaEmbedder):
        params |= set(inspect.signature(cls.__init__).parameters) - {"self"}
    not_settable = {"transport", "sleep", "clock", "random", "monotonic", "tokenizer"}  # objects, for tests and callers
    assert set(SCHEMA["embedder"]) == (params - not_settable) | {"kind"}
    assert TRUSTED_ONLY - {"artifacts"} <= set(SCHEMA["embedder"])


# -- layers ----------------------------------------------------------------------------------


def test_user_then_project_then_environment(dirs):
    user, project = dirs
    put(user, "artifacts = '/u'\n[chunker]\nmax_tokens = 100\noverlap = 10\n"
              "[embedder]\nkind = 'http'\nbase_url = 'http://mine'\nmodel = 'a'\n")
    put(project / "ragtui.toml", "index = 'p'\n[chunker]\nmax_tokens = 64\n[embedder]\nmodel = 'b'\n")
    s = load_settings({"RAGTUI_ARTIFACTS": "/env"})
    assert (s.artifacts, s.index, s.max_tokens, s.overlap) == (Path("/env"), "p", 64, 10)
    assert s.embedder == {"kind": "http", "base_url": "http://mine", "model": "b"}
    assert s.config_file == project / "ragtui.toml"


def test_another_embedder_kind_starts_its_table_afresh(dirs):
    user, project = dirs
    put(user, "[embedder]\nkind = 'http'\nbase_url = 'http://mine'\nmodel = 'a'\nretries = 0\n")
    put(project / "ragtui.toml", "[embedder]\nkind = 'wordllama'\n")
    assert load_settings({}).embedder == {"kind": "wordllama"}
    (project / "ragtui.toml").unlink()
    assert load_settings({"RAGTUI_EMBEDDER": "wordllama"}).embedder == {"kind": "wordllama"}
    assert load_settings({"RAGTUI_EMBEDDER": "http"}).embedder["base_url"] == "http://mine"


def test_run_from_the_users_config_folder_reads_it_once_as_the_users(dirs, monkeypatch):
    user, _project = dirs
    put(user, "[embedder]\nkind = 'http'\nbase_url = 'http://mine'\nmodel = 'a'\n")
    monkeypatch.chdir(user.parent)
    assert load_settings({}).embedder["base_url"] == "http://mine"


# -- trust -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key, value", [("base_url", "'http://evil'"), ("api_key_env", "'GITHUB_TOKEN'"),
                                        ("tokenizer_file", "'/etc/passwd'")])
def test_a_project_file_may_not_set_network_keys(dirs, key, value):
    user, project = dirs
    path = put(project / "ragtui.toml", f"[embedder]\nkind = 'http'\n{key} = {value}\n")
    with pytest.raises(UsageError) as e:
        load_settings({})
    message = str(e.value)
    assert f"sets embedder.{key}" in message and f"--config {path}" in message
    assert f'trusted_configs = ["{path}"]' in message and str(user) in message


def test_a_project_file_may_not_choose_where_indexes_are_written(dirs, tmp_path):
    """An index holds the text of what is ingested: a cloned repository's file may not pick the folder."""
    user, project = dirs
    path = put(project / "ragtui.toml", f"artifacts = {json.dumps(str(project / 'leak'))}\n")
    with pytest.raises(UsageError, match="sets artifacts: a ragtui.toml found in the current directory"):
        load_settings({})
    assert not (project / "leak").exists()
    assert load_settings({}, config=path).artifacts == project / "leak"
    put(user, f"trusted_configs = [{json.dumps(str(path))}]\n")
    assert load_settings({}).artifacts_from == f"artifacts in {path}"


def test_a_future_section_is_covered_by_key_name(dirs):
    _user, project = dirs
    put(project / "ragtui.toml", "[llm]\nbase_url = 'http://evil'\napi_key_env = 'X'\n")
    with pytest.raises(UsageError, match="sets llm.base_url, llm.api_key_env"):
        load_settings({})


def test_trust_by_the_users_list_or_by_the_flag(dirs, tmp_path):
    user, project = dirs
    path = put(project / "ragtui.toml", "[embedder]\nkind = 'http'\nbase_url = 'http://p'\nmodel = 'm'\n")
    assert load_settings({}, config=path).embedder["base_url"] == "http://p"
    link = tmp_path / "link.toml"
    link.symlink_to(path)  # the list holds real paths: a link to a trusted file is that file
    put(user, f"trusted_configs = [{json.dumps(str(link))}]\n")
    assert load_settings({}).embedder["base_url"] == "http://p"
    put(user, f"trusted_configs = [{json.dumps(str(tmp_path / 'other.toml'))}]\n")
    with pytest.raises(UsageError, match="sets embedder.base_url"):
        load_settings({})


def test_the_flag_replaces_the_project_file(dirs, tmp_path):
    _user, project = dirs
    put(project / "ragtui.toml", "[embedder]\nbase_url = 'http://evil'\n")
    chosen = put(tmp_path / "chosen.toml", "[chunker]\nmax_tokens = 77\n")
    s = load_settings({}, config=chosen)
    assert s.max_tokens == 77 and "base_url" not in s.embedder
    with pytest.raises(UsageError, match="--config .*nope.toml: no such file"):
        load_settings({}, config=tmp_path / "nope.toml")


def test_trusted_configs_is_read_only_from_the_users_config(dirs, tmp_path):
    user, project = dirs
    path = project / "ragtui.toml"
    put(path, f"trusted_configs = [{json.dumps(str(path))}]\n[embedder]\nbase_url = 'http://evil'\n")
    with pytest.raises(UsageError, match="read only from the user's config"):
        load_settings({})
    with pytest.raises(UsageError, match="read only from the user's config"):
        load_settings({}, config=path)
    put(user, "trusted_configs = ['relative/ragtui.toml']\n")
    with pytest.raises(UsageError, match="must be absolute paths"):
        load_settings({})


def test_the_environment_and_the_users_config_may_set_network_keys(dirs):
    user, _project = dirs
    put(user, "[embedder]\nkind = 'http'\nbase_url = 'http://mine'\napi_key_env = 'K'\nmodel = 'm'\n")
    s = load_settings({"RAGTUI_EMBED_URL": "http://env"})
    assert s.embedder["base_url"] == "http://env" and s.embedder["api_key_env"] == "K"
    assert os.environ.get("XDG_CONFIG_HOME")  # the isolation fixture's, not the person's
