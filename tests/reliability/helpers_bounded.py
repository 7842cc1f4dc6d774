"""Every file ragtui reads outside the index, replaced by a FIFO, a folder, a link to /dev/zero and an oversized file.

Each case runs the command that reads the file, as a process (a FIFO that is
opened blocks the open, a link to /dev/zero read whole never ends): it must end
(a case that runs past ``HANG_SECONDS`` is a failure, never a pass), with

* exit 2 and one ``ragtui: error:`` line naming the file and what it is, for a
  file the user gave or put there (ragtui.toml: the user's, the folder's,
  ``--config``; an evaluation collection's files; a report; a previous
  export's manifest.json, which then is not a previous export);
* exit 0 for state ragtui keeps and rebuilds (``last-index.json``, read by
  ``search`` and ``ingest``; the TUI's query history, which is ignored with a
  note and replaced by the next query saved).

An oversized file is sparse: the size bound is checked from ``fstat`` before
anything is read, so a case costs no disk and no memory.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ragtui.commands.eval import MAX_REPORT_BYTES
from ragtui.config import MAX_CONFIG_BYTES
from ragtui.core.eval.datasets import MAX_DATASET_FILE_BYTES
from ragtui.tui.history import MAX_HISTORY_BYTES
from tests.reliability.cases import Case
from tests.reliability.helpers import REPO_ROOT

KINDS = ("FIFO", "folder", "/dev/zero link", "oversized")
WORDS = {"FIFO": "is a FIFO", "folder": "is a directory", "/dev/zero link": "character device", "oversized": "over the"}
HANG_SECONDS = 120.0
"""A case still running after this long hangs (it fails); a passing case takes about a second."""


def _make(path: Path, kind: str, limit: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "/dev/zero link":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as f:
            f.truncate(limit + 1)


def _env(case: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    env.update(HOME=str(case / "home"), XDG_CONFIG_HOME=str(case / "config"), XDG_STATE_HOME=str(case / "state"),
               XDG_CACHE_HOME=str(case / "cache"), PYTHONPATH=str(REPO_ROOT))
    return env


def _run(argv: list[str], case: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragtui", *argv], env=_env(case), cwd=cwd or case, text=True,
                          capture_output=True, timeout=HANG_SECONDS, stdin=subprocess.DEVNULL)


def _refused(r: subprocess.CompletedProcess[str], name: str, kind: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, f"exit {r.returncode}: {r.stderr[-400:]}"
    assert len(lines) == 1 and lines[0].startswith("ragtui: error:"), f"stderr: {r.stderr[-400:]}"
    assert name in lines[0] and WORDS[kind] in lines[0], f"does not name the file and what it is: {lines[0]}"


def _fine(r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 0 and "Traceback" not in r.stderr, f"exit {r.returncode}: {r.stderr[-400:]}"


def _index(base: Path) -> Path:
    from tests.unit.indexgen import build

    art = base / "art"
    if not art.exists():
        build(art, "docs", {"docs/cats.md": ["# Cats\n\nCats are small carnivorous mammals."]}, dim=8)
    return art


def _beir(folder: Path, broken: str, kind: str) -> None:
    files = {"corpus.jsonl": '{"_id": "d1", "text": "cats purr"}\n',
             "queries.jsonl": '{"_id": "q1", "text": "cats"}\n', "qrels/test.tsv": "q1\td1\t1\n"}
    for rel, text in files.items():
        if rel == broken:
            _make(folder / rel, kind, MAX_DATASET_FILE_BYTES)
        else:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")


def cases(base: Path | None) -> list[tuple[str, Callable[[Path, str], None]]]:
    """(what is broken, a check of one kind in a fresh case folder) for every file ragtui reads outside rag/;
    ``base`` None: the names alone (nothing is built)."""
    if base is not None:
        art = _index(base)

    def user_config(case: Path, kind: str) -> None:
        _make(case / "config" / "ragtui" / "ragtui.toml", kind, MAX_CONFIG_BYTES)
        _refused(_run(["info", "--artifacts", str(art)], case), "ragtui.toml", kind)

    def folder_config(case: Path, kind: str) -> None:
        _make(case / "ragtui.toml", kind, MAX_CONFIG_BYTES)
        _refused(_run(["info", "--artifacts", str(art)], case), "ragtui.toml", kind)

    def named_config(case: Path, kind: str) -> None:
        _make(case / "my.toml", kind, MAX_CONFIG_BYTES)
        _refused(_run(["info", "--artifacts", str(art), "--config", str(case / "my.toml")], case), "my.toml", kind)

    def last_index_search(case: Path, kind: str) -> None:
        _make(case / "state" / "ragtui" / "last-index.json", kind, 64 * 1024)
        r = _run(["search", "cats", "--mode", "bm25", "--artifacts", str(art)], case)
        _fine(r)
        assert "docs/cats.md" in r.stdout, r.stdout

    def last_index_ingest(case: Path, kind: str) -> None:
        _make(case / "state" / "ragtui" / "last-index.json", kind, 64 * 1024)
        docs = case / "docs"
        docs.mkdir()
        (docs / "a.md").write_text("# A\n\napples\n", encoding="utf-8")
        _fine(_run(["ingest", str(docs), "--artifacts", str(case / "art"), "--quiet"], case))

    def history(case: Path, kind: str) -> None:
        path = case / "state" / "ragtui" / "history"
        _make(path, kind, MAX_HISTORY_BYTES)
        snippet = ("import json, sys; from pathlib import Path; from ragtui.tui.history import QueryHistory; "
                   "h = QueryHistory(Path(sys.argv[1])).load(); h.add('cats'); "
                   "print(json.dumps([h.problem, h.entries]))")
        r = subprocess.run([sys.executable, "-c", snippet, str(path)], env=_env(case), capture_output=True, text=True,
                           timeout=HANG_SECONDS, stdin=subprocess.DEVNULL)
        _fine(r)
        problem, entries = json.loads(r.stdout)
        words = "is a symbolic link" if kind == "/dev/zero link" else WORDS[kind]  # state: links are not followed
        assert entries == ["cats"] and problem and words in problem, r.stdout
        if kind != "folder":
            assert path.is_file() and not path.is_symlink() and path.read_text() == "cats\n", "not replaced"

    def beir(rel: str) -> Callable[[Path, str], None]:
        def check(case: Path, kind: str) -> None:
            _beir(case / "coll", rel, kind)
            _refused(_run(["eval", str(case / "coll"), "--modes", "bm25", "--quiet"], case), rel.split("/")[-1],
                     kind)
        return check

    def native(case: Path, kind: str) -> None:
        _make(case / "set.json", kind, MAX_DATASET_FILE_BYTES)
        if kind == "folder":  # a folder is read as a collection folder, and refused as one
            r = _run(["eval", str(case / "set.json"), "--quiet"], case)
            assert r.returncode == 2 and "not a dataset folder" in r.stderr, r.stderr
            return
        _refused(_run(["eval", str(case / "set.json"), "--quiet"], case), "set.json", kind)

    def report(case: Path, kind: str) -> None:
        _make(case / "a.json", kind, MAX_REPORT_BYTES)
        (case / "b.json").write_text("{}", encoding="utf-8")
        _refused(_run(["eval", "--compare", str(case / "a.json"), str(case / "b.json")], case), "a.json", kind)

    def manifest(case: Path, kind: str) -> None:
        out = case / "site"
        (out / "search").mkdir(parents=True)
        (out / "index.html").write_text("<p>", encoding="utf-8")
        _make(out / "search" / "manifest.json", kind, 1 << 20)
        r = _run(["export", str(out), "--artifacts", str(art)], case)
        assert r.returncode == 2 and "does not hold a previous export" in r.stderr, r.stderr
        assert sorted(os.listdir(out)) == ["index.html", "search"] and os.listdir(out / "search") == ["manifest.json"]

    return [("the user's ragtui.toml", user_config), ("the folder's ragtui.toml", folder_config),
            ("--config FILE", named_config), ("last-index.json (search)", last_index_search),
            ("last-index.json (ingest)", last_index_ingest), ("the TUI's query history", history),
            ("a collection's queries.jsonl", beir("queries.jsonl")), ("a collection's corpus.jsonl", beir("corpus.jsonl")),
            ("a collection's qrels", beir("qrels/test.tsv")), ("a dataset .json", native),
            ("a report (eval --compare)", report), ("a previous export's manifest.json", manifest)]


def bounded_cases(size: str = "ci") -> list[Case]:
    """Every file ragtui reads outside the index x each kind: ``the-user-s-ragtui.toml-FIFO``."""
    return [Case(f"{_slug(name)}-{_slug(kind)}", functools.partial(_bounded, name, kind))
            for name, _ in cases(None) for kind in KINDS]


def _slug(name: str) -> str:
    out = "".join(c if c.isascii() and (c.isalnum() or c in ".") else "-" for c in name).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _bounded(name: str, kind: str, case: Path) -> None:
    from tests.reliability.cases import once

    check = dict(once("bounded-reads", cases))[name]
    try:
        check(case, kind)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {HANG_SECONDS:.0f} s (it hangs)") from None
