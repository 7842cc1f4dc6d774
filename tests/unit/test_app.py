"""The application layer: one place decides the settings, the index, the embedder and the watch agent.

``ragtui watch`` and the TUI's ``--watch`` get the same agent from ``app.build_agent``; the TUI finds its
index with the CLI's rules (``app.resolve_index``), only answering differently when there is none or
several.
"""

from __future__ import annotations

import os

import pytest

from ragtui import app
from ragtui.cli import build_parser, main
from ragtui.config import Settings
from ragtui.core.errors import IndexMissingError, UsageError
from ragtui.core.ingest.sync import sync
from ragtui.core.ingest.walk import WalkRules
from tests.unit.fakes import HashEmbedder


def _folder(tmp_path, name="notes"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "a.md").write_text("# Apples\n\nApples are red.\n")
    return folder


def test_the_same_walk_flags_give_the_same_settings_for_ingest_and_watch(tmp_path):
    folder = _folder(tmp_path)
    flags = [str(folder), "--artifacts", str(tmp_path / "art"), "--exclude", "drafts/", "--include", "*.md",
             "--no-ignore", "--max-bytes", "1000", "--max-tokens", "64", "--overlap", "8"]
    parser = build_parser()
    from ragtui.commands.options import folder_values

    ingest_args, watch_args = parser.parse_args(["ingest", *flags]), parser.parse_args(["watch", *flags])
    ingest = app.folder_settings(ingest_args.folder, "index", **folder_values(ingest_args))
    watch = app.folder_settings(watch_args.folder, "watch", **folder_values(watch_args))
    assert ingest == watch
    assert ingest.index_id == "notes" and (ingest.settings.max_tokens, ingest.settings.overlap) == (64, 8)
    assert ingest.rules == WalkRules(include=("*.md",), exclude=("drafts/",), max_bytes=1000, ignore_files=False)


def test_walk_rules_without_flags_are_the_defaults_and_bad_ones_are_usage_errors():
    assert app.walk_rules() == WalkRules()
    with pytest.raises(UsageError, match="--max-bytes must be at least 1"):
        app.walk_rules(max_bytes=0)
    with pytest.raises(UsageError, match="--exclude"):
        app.walk_rules(exclude=["[unclosed"])


def test_build_agent_reconciles_periodically_with_the_default_walk_rules(tmp_path):
    folder = _folder(tmp_path)
    settings = Settings(artifacts=tmp_path / "art", max_tokens=40, overlap=4)
    agent = app.build_agent(settings, folder, embedder=HashEmbedder())
    assert agent.reconcile_every == app.DEFAULT_RECONCILE_EVERY == 600.0
    assert agent.rules == WalkRules() and agent.index_id == "notes"
    assert (agent.max_tokens, agent.overlap) == (40, 4)
    assert not agent.running  # built, not started: the caller starts it


def test_ragtui_watch_builds_its_agent_in_the_application_layer(tmp_path, monkeypatch, capsys):
    """The command and the TUI share ``build_agent``: what the command passes is what the TUI gets by default."""
    folder = _folder(tmp_path)
    built = []
    real = app.build_agent

    def recording(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(app, "build_agent", recording)
    monkeypatch.setattr(app, "open_embedder", lambda settings: HashEmbedder())
    assert main(["watch", str(folder), "--once", "--artifacts", str(tmp_path / "art")]) == 0
    assert "published notes" in capsys.readouterr().out
    [agent] = built
    assert agent.reconcile_every == 600.0 and agent.rules == app.walk_rules() and agent.index_id == "notes"


def _index(tmp_path, *names):
    for name in names:
        sync(_folder(tmp_path, name), artifacts=tmp_path / "art", embedder=HashEmbedder(), max_tokens=16, overlap=4)
    return Settings(artifacts=tmp_path / "art")


def test_resolve_index_names_what_is_there(tmp_path):
    settings = _index(tmp_path)
    with pytest.raises(app.NoIndex, match=r"no index under .*/rag: build one with `ragtui ingest FOLDER`") as none:
        app.resolve_index(settings)
    assert none.value.exit_code == 2 and none.value.broken == []
    _index(tmp_path, "one")
    assert app.resolve_index(settings) == tmp_path / "art" / "rag" / "one"
    _index(tmp_path, "two")
    with pytest.raises(app.SeveralIndexes, match=r"\(one, two\): choose one with --index") as several:
        app.resolve_index(settings)
    assert several.value.names == ["one", "two"]
    assert app.resolve_index(Settings(artifacts=settings.artifacts, index="two")).name == "two"


def test_a_broken_entry_beside_one_index_is_a_note_and_the_tui_hears_none(tmp_path, capsys):
    from ragtui.tui import backend

    settings = _index(tmp_path, "good")
    os.symlink("nowhere", tmp_path / "art" / "rag" / "bad")
    notes = []
    assert app.resolve_index(settings, note=notes.append).name == "good"
    assert notes and notes[0].endswith("; using good") and "bad is not a usable index" in notes[0]
    assert app.resolve_index(settings).name == "good"
    assert capsys.readouterr().err == f"ragtui: note: {notes[0]}\n"  # the commands' default: one line on stderr
    assert backend.locate_index(settings, None).name == "good"
    assert capsys.readouterr().err == ""


def test_the_tui_turns_no_index_into_its_missing_state(tmp_path):
    from ragtui.tui import backend

    settings = _index(tmp_path)
    with pytest.raises(IndexMissingError, match="yet$"):
        backend.locate_index(settings, None)
    (tmp_path / "art" / "rag").mkdir(parents=True)
    os.symlink("nowhere", tmp_path / "art" / "rag" / "bad")
    with pytest.raises(backend.OnlyBrokenIndexes) as only:
        backend.locate_index(settings, None)
    assert only.value.broken == [("bad", "a link to nothing (its generation is gone)")]
    _index(tmp_path, "one", "two")
    with pytest.raises(backend.SeveralIndexes) as several:
        backend.locate_index(settings, None)
    assert several.value.names == ["one", "two"]


def test_open_index_uses_the_configured_ivf_parameters_and_checks_the_embedder(tmp_path):
    from ragtui.core.errors import ModelMismatchError

    settings = _index(tmp_path, "docs")
    tuned = Settings(artifacts=settings.artifacts, nlist=3, nprobe=2)
    assert app.ivf_params(settings) is None
    path = app.resolve_index(settings)
    retriever = app.open_index(path, tuned)
    assert (retriever.ivf_params.nlist, retriever.ivf_params.nprobe) == (3, 2) and retriever.embedder is None
    with pytest.raises(ModelMismatchError):
        app.open_index(path, settings, embedder=HashEmbedder(dim=8))
    assert app.open_index(path, settings, embedder=HashEmbedder(dim=8), check_embedder=False).embedder is not None
