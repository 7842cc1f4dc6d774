"""The version has one definition, pyproject.toml; ``ragtui.__version__`` and ``ragtui --version`` read it."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import ragtui
from ragtui.cli import main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _declared() -> str:
    return tomllib.loads(PYPROJECT.read_text("utf-8"))["project"]["version"]


def test_version_is_the_one_pyproject_declares(capsys):
    assert ragtui.__version__ == _declared()
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ragtui {_declared()}"


def _no_metadata(monkeypatch) -> None:
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)


def test_an_uninstalled_checkout_reads_its_pyproject(monkeypatch):
    _no_metadata(monkeypatch)
    assert ragtui._read_version() == _declared()


@pytest.mark.parametrize(
    ("pyproject", "expected"),
    [
        ('[project]\nname = "ragtui"\nversion = "9.8.7"\n', "9.8.7"),
        (None, "0+unknown"),
        ('[project]\nname = "other"\nversion = "1.0"\n', "0+unknown"),
        ("[project\nname = ", "0+unknown"),
        ('[project]\nname = "ragtui"\n', "0+unknown"),
        (b"\xff\xfe", "0+unknown"),
    ],
    ids=["ragtui", "absent", "another-project", "not-toml", "no-version", "not-utf8"],
)
def test_the_fallback_trusts_only_a_ragtui_pyproject_beside_the_package(monkeypatch, tmp_path, pyproject, expected):
    _no_metadata(monkeypatch)
    package = tmp_path / "ragtui"
    package.mkdir()
    if isinstance(pyproject, bytes):
        (tmp_path / "pyproject.toml").write_bytes(pyproject)
    elif pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    monkeypatch.setattr(ragtui, "__file__", str(package / "__init__.py"))
    assert ragtui._read_version() == expected
