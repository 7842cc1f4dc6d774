"""The HTTP embedder through the installed command: options of the wrong kind, and a sync with nothing to do."""

from __future__ import annotations

from pathlib import Path

from tests.files import write
from tests.helpers.cli import one_error_line
from tests.helpers.cli import run as ragtui
from tests.helpers.embed_server import EmbedServer


def _scene(tmp_path: Path) -> tuple[Path, dict]:
    project = tmp_path / "project"
    write(project / "docs" / "a.md", "Cats sit on mats. " * 20 + "\n")
    return project, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_http_options_with_the_wordllama_kind_say_which_kind_they_belong_to(tmp_path):
    project, env = _scene(tmp_path)
    config = write(tmp_path / "mine.toml", '[embedder]\nbase_url = "http://127.0.0.1:9"\nmodel = "m"\n')
    art = tmp_path / "art"
    r = ragtui("--config", str(config), "ingest", "docs", "--artifacts", str(art),
               env={**env, "RAGTUI_EMBEDDER": "wordllama"}, cwd=project)
    assert r.returncode == 2 and one_error_line(r.stderr), (r.returncode, r.stderr)
    assert "unexpected keyword" not in r.stderr
    assert 'the wordllama embedder takes no base_url, model' in r.stderr and 'kind = "http"' in r.stderr
    assert not (art / "rag").exists()


def test_an_ingest_with_nothing_to_do_needs_no_server(tmp_path):
    project, env = _scene(tmp_path)
    art = tmp_path / "art"
    with EmbedServer() as srv:
        config = write(tmp_path / "mine.toml", f'[embedder]\nkind = "http"\nbase_url = "{srv.url}"\n'
                                               f'model = "{srv.model}"\ntokenize_style = "native"\nretries = 0\n')
        first = ragtui("--config", str(config), "ingest", "docs", "--artifacts", str(art), env=env, cwd=project)
        assert first.returncode == 0, first.stderr
    again = ragtui("--config", str(config), "ingest", "docs", "--artifacts", str(art), env=env, cwd=project)
    assert again.returncode == 0 and "0 added, 0 changed, 0 removed, 1 unchanged" in again.stdout, again.stderr
    write(project / "docs" / "b.md", "Dogs too.\n")
    down = ragtui("--config", str(config), "ingest", "docs", "--artifacts", str(art), env=env, cwd=project)
    assert down.returncode == 3 and one_error_line(down.stderr) and "cannot connect" in down.stderr, down.stderr
