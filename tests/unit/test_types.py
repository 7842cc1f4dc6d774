"""The type check (`make typecheck`) as a test: CI runs only pytest, so a type error fails CI here.

mypy reads its settings from pyproject.toml ([tool.mypy]): the targets, strict mode for
ragtui.core, and the few untyped third-party modules.
"""

import re
import tomllib
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "pyproject.toml"


def _mypy(*args: str) -> tuple[str, int]:
    stdout, stderr, status = api.run(["--config-file", str(CONFIG), "--no-color-output", *args])
    return stdout + stderr, status


def test_configured_targets_type_check(monkeypatch):
    """Every configured target checks clean, and every module in them was checked (not an empty run)."""
    monkeypatch.chdir(ROOT)  # the configured paths are relative to the checkout
    targets = tomllib.loads(CONFIG.read_text(encoding="utf-8"))["tool"]["mypy"]["files"]
    assert targets == ["ragtui"]  # the whole package: the front ends, the app layer and the TUI too
    n_modules = len({p for t in targets for p in ((ROOT / t).rglob("*.py") if (ROOT / t).is_dir() else [ROOT / t])})
    out, status = _mypy()
    errors = [line for line in out.splitlines() if re.match(r"[^ ]+\.py:\d+: error:", line)]
    assert errors == [] and status == 0, out
    assert f"Success: no issues found in {n_modules} source files" in out, out


def _probe(tmp_path: Path, package: str, source: str) -> str:
    """mypy's findings on ``source`` as the module ``ragtui.<package>.probe`` under the project's settings."""
    folder = tmp_path / "ragtui" / package
    folder.mkdir(parents=True)
    (tmp_path / "ragtui" / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / "probe.py").write_text(source)
    out, _ = _mypy("--cache-dir", str(tmp_path / "cache"), str(folder / "probe.py"))
    return out


PROBE = 'def untyped(x):\n    return x\n\n\ndef loose(x: dict) -> None:\n    pass\n\n\ndef body():\n    return 1 + "a"\n'


def test_core_is_checked_strictly(tmp_path):
    """A ragtui.core module must annotate every function and every generic."""
    out = _probe(tmp_path, "core", PROBE)
    assert "[no-untyped-def]" in out and "[type-arg]" in out and "[operator]" in out, out


def test_strict_stays_in_core(tmp_path):
    """Outside core (watch) unannotated functions are allowed, but their bodies are still checked."""
    out = _probe(tmp_path, "watch", PROBE)
    assert "[operator]" in out, out
    assert "[no-untyped-def]" not in out and "[type-arg]" not in out, out


@pytest.mark.parametrize("package", ["tui", "commands", "mcp"])
def test_the_front_ends_have_their_bodies_checked(tmp_path, package):
    """No part of the package is skipped: a front end's unannotated function still has its body checked."""
    out = _probe(tmp_path, package, PROBE)
    assert "[operator]" in out, out


def test_the_request_module_is_strict(tmp_path):
    out = _probe(tmp_path, "request_probe", PROBE)  # a sibling package: not strict, the control
    assert "[no-untyped-def]" not in out, out
    (tmp_path / "strict").mkdir()
    module = tmp_path / "strict" / "ragtui"
    module.mkdir()
    (module / "__init__.py").write_text("")
    (module / "request.py").write_text(PROBE)
    found, _ = _mypy("--cache-dir", str(tmp_path / "cache2"), str(module / "request.py"))
    assert "[no-untyped-def]" in found and "[type-arg]" in found, found


def test_users_of_the_api_get_real_types(monkeypatch, tmp_path):
    """``import ragtui`` gives a type checker the real classes (py.typed, the TYPE_CHECKING block), not Any."""
    monkeypatch.chdir(ROOT)
    user = tmp_path / "user_code.py"
    user.write_text("import ragtui\n\nr = ragtui.Retriever.open('x')\nhits = r.search('q', mode='bm25')\n"
                    "reveal_type(hits)\nn: int = hits[0].chunk_id\n")
    out, status = _mypy("--cache-dir", str(tmp_path / "cache"), str(user))
    assert 'Revealed type is "ragtui.core.search.retriever.Hits"' in out, out
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' in out, out
    assert (ROOT / "ragtui" / "py.typed").is_file()
    package_data = tomllib.loads(CONFIG.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["ragtui"]


def test_the_tui_mixins_are_held_to_the_session_protocol(monkeypatch, tmp_path):
    """A mixin method of the TUI (``self: Session``) that uses something the app does not declare is an error."""
    monkeypatch.chdir(ROOT)
    probe = tmp_path / "mixin_probe.py"
    probe.write_text("from ragtui.tui.session import Session\n\n\nclass Mixin:\n"
                     "    def action_x(self: Session) -> None:\n        self.serach_now()\n        self.search_now()\n")
    out, status = _mypy("--cache-dir", str(tmp_path / "cache"), str(probe))
    assert status == 1 and '"Session" has no attribute "serach_now"' in out and out.count("error:") == 1, out
