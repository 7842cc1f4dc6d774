"""ragtui.toml through the installed command: a typo stops the command before it does anything; --config."""

from __future__ import annotations

from pathlib import Path

from tests.files import write
from tests.helpers.cli import one_error_line
from tests.helpers.cli import run as ragtui


def _scene(tmp_path: Path) -> tuple[Path, dict]:
    project = tmp_path / "project"
    write(project / "docs" / "a.md", "Cats sit on mats. " * 200 + "\n")
    return project, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_a_typo_in_the_chunker_table_stops_ingest_and_names_the_key(tmp_path):
    project, env = _scene(tmp_path)
    write(project / "ragtui.toml", "[chunker]\nmax_token = 64\n")
    art = tmp_path / "art"
    r = ragtui("ingest", "docs", "--artifacts", str(art), env=env, cwd=project)
    assert r.returncode == 2 and one_error_line(r.stderr), (r.returncode, r.stderr)
    assert f"{project / 'ragtui.toml'}: unknown key chunker.max_token (did you mean chunker.max_tokens?)" in r.stderr
    assert not (art / "rag").exists()  # nothing was indexed with the default 256


def test_config_flag_before_or_after_the_command(tmp_path):
    project, env = _scene(tmp_path)
    chosen = write(tmp_path / "chosen.toml", "[chunker]\nmax_tokens = 64\noverlap = 8\n")
    write(project / "ragtui.toml", "[chunker]\nmax_tokens = 500\n")  # replaced by --config, not merged
    art = tmp_path / "art"
    r = ragtui("--config", str(chosen), "ingest", "docs", "--json", "--artifacts", str(art), env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    info = ragtui("info", "--artifacts", str(art), "--config", str(chosen), env=env, cwd=project)
    assert info.returncode == 0 and "'max_tokens': 64" in info.stdout, info.stdout + info.stderr
    missing = ragtui("info", "--config", str(tmp_path / "nope.toml"), env=env, cwd=project)
    assert missing.returncode == 2 and "no such file" in missing.stderr and one_error_line(missing.stderr)
