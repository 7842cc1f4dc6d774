"""Where indexes live, `ragtui info` about the root, picking among several indexes, and `ragtui rm`.

ragtui in-process, with HOME and the XDG folders pointed at temporary folders; the installed command as a
process where the process is the contract (another user, a real terminal).
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ragtui.core.ingest.publish import IndexLock
from tests.helpers.cli import Result, ragtui_exe, run_process
from tests.helpers.cli import run as ragtui


def _home_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_STATE_HOME": str(home / "state"),
            "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config")}


def _one_error(result: Result, code: int, *needles: str) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragtui: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


NOBODY = 65534


def as_nobody(*args: str, env: dict[str, str], cwd: Path | None = None) -> Result:
    """The installed command run by the user nobody (the process's own user is the contract)."""
    return run_process(*args, env=env, cwd=cwd, prefix=["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                                        "--clear-groups"])
NO_CONTRACT = pytest.mark.skipif(os.path.exists("/artifacts"), reason="/artifacts exists on this machine")


@NO_CONTRACT
def test_without_artifacts_the_quick_start_uses_the_user_data_folder(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "tar.md").write_text("Extract a tar archive with tar -xf.\n")
    env = _home_env(home)
    missing = ragtui("info", env=env, cwd=tmp_path)
    _one_error(missing, 2, "no index under", str(home / "data" / "ragtui"), "--artifacts", "RAGTUI_ARTIFACTS")
    assert ragtui("ingest", "docs", env=env, cwd=tmp_path).returncode == 0
    assert (home / "data" / "ragtui" / "rag" / "docs").is_dir() and not os.path.exists("/artifacts")
    hit = ragtui("search", "tar", env=env, cwd=tmp_path)
    assert hit.returncode == 0 and "docs/tar.md#0" in hit.stdout, hit.stderr
    info = ragtui("info", "--json", env=env, cwd=tmp_path)
    meta = json.loads(info.stdout)
    assert meta["artifacts"] == str(home / "data" / "ragtui")
    assert meta["artifacts_from"] == "default: /artifacts does not exist, so the user data folder $XDG_DATA_HOME/ragtui"
    text = ragtui("info", env=env, cwd=tmp_path).stdout
    assert "artifacts_from: default: /artifacts does not exist" in text


def test_info_says_which_root_and_why(tmp_path):
    home, art = tmp_path / "home", tmp_path / "art"
    docs = tmp_path / "a"
    docs.mkdir()
    (docs / "x.md").write_text("alpha\n")
    env = _home_env(home)
    for name in ("a", "b"):
        assert ragtui("ingest", str(docs), "--index", name, "--artifacts", str(art), env=env).returncode == 0
    listing = ragtui("info", "--artifacts", str(art), env=env, cwd=tmp_path)
    assert listing.returncode == 0 and listing.stdout.split() == ["a", "b"]
    assert f"{art}: artifacts root chosen by --artifacts; --artifacts DIR or RAGTUI_ARTIFACTS" in listing.stderr
    as_json = json.loads(ragtui("info", "--json", env={**env, "RAGTUI_ARTIFACTS": str(art)}, cwd=tmp_path).stdout)
    assert as_json == {"artifacts": str(art), "artifacts_from": "RAGTUI_ARTIFACTS", "indexes": ["a", "b"], "broken": []}


def test_a_root_that_cannot_be_created_names_the_flags(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    docs = tmp_path / "docs"
    docs.mkdir()
    result = ragtui("ingest", str(docs), "--artifacts", str(blocker / "art"), env=_home_env(tmp_path / "home"))
    _one_error(result, 3, f"cannot write the indexes under {blocker}/art/rag", "--artifacts DIR or RAGTUI_ARTIFACTS")


def _nobody_may_write_the_contract_root() -> bool:
    try:
        st = os.stat("/artifacts")
    except OSError:
        return False
    return st.st_uid == NOBODY or bool(st.st_mode & 0o002)


@pytest.mark.skipif(_nobody_may_write_the_contract_root(), reason="nobody may write /artifacts on this machine")
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to become nobody")
def test_an_unprivileged_user_without_artifacts_ingests_and_searches():
    """The report's first hour: as a non-root user the first ingest failed on /artifacts/rag/.locks."""
    base = Path(tempfile.mkdtemp(prefix="ragtui-roots-"))  # under /tmp itself: nobody must reach it
    try:
        base.chmod(0o755)
        home, docs = base / "home", base / "home" / "notes"
        docs.mkdir(parents=True)
        (docs / "tar.md").write_text("Extract a tar archive with tar -xf.\n")
        for path in (home, docs, docs / "tar.md"):
            os.chown(path, NOBODY, NOBODY)
        env = _home_env(home)
        probe = as_nobody("--version", env=env)
        if probe.returncode != 0:
            pytest.skip(f"the command does not run as nobody here: {probe.stderr.strip()[-200:]}")
        ingest = as_nobody("ingest", "notes", env=env, cwd=home)
        assert ingest.returncode == 0, ingest.stderr
        search = as_nobody("search", "tar", env=env, cwd=home)
        assert search.returncode == 0 and "notes/tar.md#0" in search.stdout, search.stderr
        assert (home / "data" / "ragtui" / "rag" / "notes").is_dir() and not os.path.lexists("/artifacts/rag/notes")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def two_indexes(tmp_path):
    art, env = tmp_path / "art", _home_env(tmp_path / "home")
    for name, text in (("alpha", "tar archives and gzip\n"), ("beta", "tar balls of wool\n")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.md").write_text(text)
        assert ragtui("ingest", str(folder), "--artifacts", str(art), env=env).returncode == 0
    return tmp_path, art, env


def test_several_indexes_the_cwd_then_the_last_used(two_indexes):
    base, art, env = two_indexes
    inside = ragtui("search", "tar", "--artifacts", str(art), env=env, cwd=base / "alpha")
    assert inside.returncode == 0 and "alpha/alpha.md#0" in inside.stdout, inside.stderr
    assert "using index alpha (its folder holds the current directory" in inside.stderr
    # Outside both folders: beta was ingested last, then alpha was searched last.
    last = ragtui("search", "tar", "--artifacts", str(art), env=env, cwd=base)
    assert last.returncode == 0 and "alpha/alpha.md#0" in last.stdout and "(used last;" in last.stderr
    (base / "home" / "state" / "ragtui" / "last-index.json").unlink()
    _one_error(ragtui("search", "tar", "--artifacts", str(art), env=env, cwd=base), 2,
               "several indexes", "alpha, beta", "--index")


def test_an_unknown_index_lists_the_indexes_that_exist(two_indexes):
    base, art, env = two_indexes
    for command in (("search", "tar"), ("info",), ("inspect", "x#0")):
        _one_error(ragtui(*command, "--index", "nosuch", "--artifacts", str(art), env=env, cwd=base), 2,
                   "no index 'nosuch'", "the indexes there: alpha, beta")


def test_rm_deletes_an_index_its_state_and_cache(two_indexes):
    base, art, env = two_indexes
    (base / "alpha-2").mkdir()
    (base / "alpha-2" / "c.md").write_text("tar again\n")
    assert ragtui("ingest", str(base / "alpha-2"), "--artifacts", str(art), env=env).returncode == 0
    for name in ("alpha", "alpha-2"):  # fill the caches of both: the one whose name extends alpha's stays
        assert ragtui("search", "tar", "--mode", "ivf", "--index", name, "--artifacts", str(art), env=env).returncode == 0
    rag = art / "rag"

    def cached() -> list[str]:  # the entries' <kind>-<name>, their keys cut off
        # Whether a writer recorded a verified entry depends on how long its flushes took (the racy rule):
        # those are checked on their own below.
        # The build locks (.build-lexical-<name>.lock) stay, as the writer lock does: checked below; so are the
        # notes that a reader searched an index that way (.used-<kind>-<name>).
        return sorted(re.sub(r"-(v\d+[a-z]*-)?[0-9a-f]{32,40}$", "", p.name) for p in (rag / ".cache").iterdir()
                      if not p.name.startswith(("verified-", ".build-", ".used-")))

    def used() -> list[str]:
        return sorted(p.name for p in (rag / ".cache").iterdir() if p.name.startswith(".used-"))

    def verified_of(name: str) -> list[str]:
        return [p.name for p in (rag / ".cache").iterdir() if re.fullmatch(rf"verified-{name}-[0-9a-f]{{40}}", p.name)]

    # An ingest makes every derived entry, the stemmed arm and the IVF lists included.
    assert cached() == ["bm25-alpha", "bm25-alpha-2", "bm25-beta", "doclex-alpha", "doclex-alpha-2", "doclex-beta",
                        "ivf-alpha", "ivf-alpha-2", "ivf-beta", "ivfcal-alpha", "ivfcal-alpha-2", "ivfcal-beta",
                        "stem-alpha", "stem-alpha-2", "stem-beta"]
    assert used() == [".used-ivf-alpha", ".used-ivf-alpha-2"]
    kept = verified_of("alpha-2")
    result = ragtui("rm", "alpha", "--yes", "--artifacts", str(art), env=env)
    assert result.returncode == 0, result.stderr
    assert "deleted index alpha" in result.stdout and "writer state" in result.stdout
    assert not os.path.lexists(rag / "alpha") and not (rag / ".gen" / "alpha").exists()
    assert not (rag / ".state" / "alpha").exists()
    assert cached() == ["bm25-alpha-2", "bm25-beta", "doclex-alpha-2", "doclex-beta", "ivf-alpha-2", "ivf-beta",
                        "ivfcal-alpha-2", "ivfcal-beta", "stem-alpha-2", "stem-beta"]
    assert used() == [".used-ivf-alpha-2"]
    assert verified_of("alpha") == [] and verified_of("alpha-2") == kept
    # The lock file stays, empty, so that two processes never lock different files under one name.
    assert (rag / ".cache" / ".build-lexical-alpha.lock").is_file()
    assert (base / "alpha" / "alpha.md").is_file()  # the documents are not the index's to delete
    info = ragtui("info", "--artifacts", str(art), env=env)
    assert info.stdout.split() == ["alpha-2", "beta"]


def test_rm_refuses_what_is_not_an_index(two_indexes):
    base, art, env = two_indexes
    _one_error(ragtui("rm", "nosuch", "--yes", "--artifacts", str(art), env=env), 2,
               "no index 'nosuch'", "alpha, beta")
    _one_error(ragtui("rm", "../alpha", "--yes", "--artifacts", str(art), env=env), 2, "invalid index id")
    (art / "rag" / "notes.txt").write_text("mine\n")
    _one_error(ragtui("rm", "notes.txt", "--yes", "--artifacts", str(art), env=env), 2, "is not an index")
    assert (art / "rag" / "notes.txt").read_text() == "mine\n"


def test_rm_never_follows_a_link_out_of_the_root(two_indexes):
    base, art, env = two_indexes
    outside = base / "precious"
    outside.mkdir()
    (outside / "meta.json").write_text("{}")
    (outside / "keep.md").write_text("keep me\n")
    (art / "rag" / "evil").symlink_to(outside)
    result = ragtui("rm", "evil", "--yes", "--artifacts", str(art), env=env)
    assert result.returncode == 0, result.stderr
    assert not os.path.lexists(art / "rag" / "evil")
    assert sorted(p.name for p in outside.iterdir()) == ["keep.md", "meta.json"]


def test_rm_without_a_terminal_needs_yes(two_indexes):
    base, art, env = two_indexes
    _one_error(ragtui("rm", "alpha", "--artifacts", str(art), env=env), 2, "pass --yes")
    assert (art / "rag" / "alpha").is_dir()


def test_rm_asks_on_a_terminal(two_indexes):
    base, art, env = two_indexes
    cmd = ragtui_exe()
    for answer, code in ((b"n\n", 1), (b"y\n", 0)):
        master, slave = pty.openpty()
        proc = subprocess.Popen([*cmd, "rm", "alpha", "--artifacts", str(art)], stdin=slave, stdout=slave,
                                stderr=slave, env={**os.environ, **env})
        os.close(slave)
        seen = b""
        while b"[y/N]" not in seen:
            chunk = os.read(master, 4096)
            assert chunk, seen
            seen += chunk
        assert f"built from {base / 'alpha'}".encode() in seen
        os.write(master, answer)
        assert proc.wait(timeout=120) == code
        os.close(master)
        assert (art / "rag" / "alpha").is_dir() == (code == 1)


def test_rm_waits_for_no_writer(two_indexes):
    base, art, env = two_indexes
    with IndexLock(art, "alpha"):
        _one_error(ragtui("rm", "alpha", "--yes", "--artifacts", str(art), env=env), 3,
                   "being written by another process")
    assert (art / "rag" / "alpha").is_dir()
