"""Bombs in the artifacts folder, and hostile queries.

``run_index_bombs`` puts, in place of one file of an index folder, something
that would block or exhaust a naive reader — a FIFO, a socket, a directory, a
link to /dev/zero, or the file itself grown to 8 GiB (sparse: its real
content, a hole, a final newline) — and runs the installed ``ragtui`` on it:
``info``, ``search`` (BM25 and flat), ``inspect`` and ``ingest``. Each run is
a subprocess with a 1 GiB address-space limit (``RLIMIT_AS``: a read of the
8 GiB file, or of /dev/zero, cannot fit) and a timeout (a guard, not a
measurement: a hang fails the case instead of the run). Expected:

* a file of the generation (meta.json, docs.jsonl, vectors.f32, bm25.idx) or
  the generation directory itself: the readers exit 3 with one line naming
  it; ``ingest`` rebuilds the index from the folder (exit 0, "rebuilt"), and
  ``info`` then validates it;
* the index link ``rag/<id>`` replaced: the same, or exit 2 "no index" when
  what is there is an empty directory;
* a cached array (``rag/.cache``), the writer state (``state.bin``) or the
  embedding journal (``embedded.bin``): these only save time, so every
  command succeeds as if they were absent;
* the writer lock: ``ingest`` refuses with one line naming it (exit 3) unless
  it is a regular file (then its size does not matter); readers never open it.

``run_hostile_queries`` sends queries that are not UTF-8, far too long, full
of NULs or escape sequences, or without a single term, to every mode — through
the installed command and through the API — and BM25 parameters out of range
to ``sync``, ``BM25Index.decode`` and the meta.json reader.
"""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import shutil
import stat
import subprocess
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.helpers.cli import one_error_line as one_clear_line
from tests.helpers.cli import ragtui_exe
from tests.reliability.cases import Case
from tests.reliability.helpers import run_sync, write
from tests.reliability.helpers_terminal import unsafe

KINDS = ("fifo", "socket", "directory", "device", "huge")
INDEX_FILES = ("meta.json", "docs.jsonl", "vectors.f32", "bm25.idx")
COMMANDS = ("info", "search", "search-flat", "inspect", "ingest")
HUGE = 8 << 30
MEMORY_LIMIT = 1 << 30
"""Address space of every command run here: ample for ragtui, far short of any unbounded read."""
INDEX_ID = "docs"
DOCS = {
    "cats.md": "# Cats\n\nCats are small domesticated carnivorous mammals that purr.\n",
    "dogs.md": "# Dogs\n\nDogs are loyal companions and good at fetching sticks.\n",
    "birds.md": "# Birds\n\nBirds sing at dawn; some migrate thousands of miles.\n",
}


def plant(path: Path, kind: str) -> None:
    """Replace ``path`` (a file, a link or a directory) by a bomb of ``kind``."""
    content = path.read_bytes() if kind == "huge" and path.is_file() else b""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        os.mknod(path, stat.S_IFSOCK | 0o600)
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        with open(path, "wb") as f:
            f.write(content)
            f.truncate(HUGE - 1)
            f.seek(HUGE - 1)
            f.write(b"\n")
    else:
        raise ValueError(kind)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args: str | bytes, timeout: float) -> tuple[int | None, str, str]:
    """(exit code or None if it had to be killed, stdout, stderr) of the installed command, memory-limited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    # Thread pools and malloc arenas reserve address space per core: keep the cap about ragtui on any machine.
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MALLOC_ARENA_MAX="2", RAYON_NUM_THREADS="2")
    try:
        p = subprocess.run([*ragtui_exe(), *args], capture_output=True, env=env, timeout=timeout,
                           preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def build_pristine(base: Path) -> tuple[Path, Path]:
    """(folder, artifacts): a small folder ingested by the installed command (its default embedder)."""
    folder, art = base / "pristine" / INDEX_ID, base / "pristine" / "art"
    for name, text in DOCS.items():
        write(folder / name, text)
    code, _, err = run_cli("ingest", str(folder), "--artifacts", str(art), "--quiet", timeout=600)
    if code != 0:
        raise RuntimeError(f"cannot build the pristine index: {err}")
    # Readers and the writer leave a cached decoding of bm25.idx: bombs go there too.
    return folder, art


def _targets(art: Path) -> dict[str, Path]:
    """Where each bomb goes, in an artifacts folder copied from the pristine one."""
    root = art / "rag"
    gen = Path(os.path.realpath(root / INDEX_ID))
    caches = sorted(root.glob(".cache/bm25-*/*.npy"))
    out = {name: gen / name for name in INDEX_FILES}
    out.update({
        "generation": gen,
        "link": root / INDEX_ID,
        "cache": caches[0] if caches else root / ".cache" / "missing.npy",
        "state.bin": root / ".state" / INDEX_ID / "state.bin",
        "embedded.bin": root / ".state" / INDEX_ID / "embedded.bin",
        "lock": root / ".locks" / f"{INDEX_ID}.lock",
    })
    return out


def _argv(command: str, folder: Path, art: Path) -> list[str]:
    common = ["--artifacts", str(art), "--index", INDEX_ID]
    return {
        "info": ["info", *common],
        "search": ["search", "cats", *common],
        "search-flat": ["search", "cats", "--mode", "flat", *common],
        "inspect": ["inspect", f"{INDEX_ID}/cats.md#0", *common],
        # --replace: the artifacts were copied from the pristine folder, which still exists under the same name.
        "ingest": ["ingest", str(folder), "--quiet", "--replace", *common],
    }[command]


def _expected(target: str, kind: str, command: str) -> tuple[int, str]:
    """(exit code, what stderr must say) for ``command`` with a ``kind`` bomb at ``target``."""
    if target == "state.bin" and command == "inspect":
        # The writer state records the ingested folder; without it inspect reads no source (never the
        # current directory) and says to name the folder with --root.
        return 2, "--root"
    if target in ("cache", "state.bin", "embedded.bin"):
        return 0, ""
    if target == "lock":
        if command != "ingest" or kind == "huge":
            return 0, ""
        return 3, "lock"
    if command == "ingest":
        return 0, ""
    if target in ("link", "generation") and kind == "directory":
        return 2, "no index"
    return 3, target if target in INDEX_FILES else f"rag/{INDEX_ID}: is"


def plan(full: bool) -> list[tuple[str, str, str]]:
    """(target, kind, command) cases: every one when ``full``, else a rotation that still covers each pair."""
    cases = []
    for target in (*INDEX_FILES, "generation", "link"):
        for i, kind in enumerate(KINDS):
            for j, command in enumerate(COMMANDS):
                if full or command in ("info", "ingest") or (i + j + len(target)) % len(KINDS) == 0:
                    cases.append((target, kind, command))
    extra = {"cache": ("search", "inspect"), "state.bin": ("ingest", "inspect"), "embedded.bin": ("ingest",),
             "lock": ("ingest", "search")}
    for target, commands in extra.items():
        for kind in KINDS:
            cases += [(target, kind, c) for c in commands]
    return cases


def _pristine() -> tuple[Path, Path]:
    from tests.reliability.cases import once

    return once("bombs-pristine", build_pristine)


def bomb_cases(size: str = "ci", timeout: float = 120.0) -> list[Case]:
    """Every case of ``plan(full)``, each on a fresh copy of the pristine index and folder:
    ``docs.jsonl-fifo-search``."""
    return [Case(f"{target}-{kind}-{command}", functools.partial(check_bomb, target, kind, command, timeout))
            for target, kind, command in plan(size == "full")]


def check_bomb(target: str, kind: str, command: str, timeout: float, case: Path) -> None:
    pristine_folder, pristine_art = _pristine()
    folder, art = case / INDEX_ID, case / "art"
    shutil.copytree(pristine_folder, folder)
    shutil.copytree(pristine_art, art, symlinks=True)
    if target in ("state.bin", "embedded.bin"):
        # Something for ingest to do, so that it reads its state and journal and embeds.
        write(folder / "cats.md", DOCS["cats.md"] + "Kittens too.\n")
        if target == "embedded.bin":
            write(art / "rag" / ".state" / INDEX_ID / "embedded.bin", b"")
    where = _targets(art)[target]
    plant(where, kind)
    _check_case(target, kind, command, folder, art, where, timeout)


def _check_case(target, kind, command, folder, art, where, timeout) -> None:
    want_code, needle = _expected(target, kind, command)
    code, out, err = run_cli(*_argv(command, folder, art), timeout=timeout)
    assert code is not None, f"still running after {timeout:.0f} s (killed): {err[-300:]!r}"
    assert code == want_code, f"exit {code}, expected {want_code}: {err[-500:]!r}"
    assert "Traceback" not in err and "internal error" not in err, err[-500:]
    if want_code:
        assert one_clear_line(err), err[-500:]
        assert needle in err, f"the error does not name {needle!r}: {err!r}"
    if command == "ingest" and want_code == 0:
        if target in INDEX_FILES or target in ("generation", "link"):
            assert "rebuilt" in err or target in ("generation", "link"), err[-500:]
        # The index is whole again: validated in full by another process.
        code, _, err = run_cli(*_argv("info", folder, art), timeout=timeout)
        assert code == 0, f"info after ingest: exit {code}: {err[-500:]!r}"
        real = Path(os.path.realpath(art / "rag" / INDEX_ID))
        for name in INDEX_FILES:
            assert stat.S_ISREG(os.stat(real / name).st_mode), f"{name} is not a regular file after ingest"
        if target == "state.bin":
            assert stat.S_ISREG(os.lstat(where).st_mode), "the writer state was not rewritten as a regular file"


# -- hostile queries ---------------------------------------------------------------------------


def query_cases(size: str = "ci") -> list[Case]:
    """Hostile queries x every mode, through the installed command and the API; bad BM25 parameters."""
    return [Case(_slug(label), functools.partial(_query_case, label)) for label, _ in hostile_query_checks(None)]


def _slug(label: str) -> str:
    out = "".join(c if c.isascii() and (c.isalnum() or c in ".") else "-" for c in label).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _query_case(label: str, _tmp: Path) -> None:
    from tests.reliability.cases import once

    dict(once("hostile-queries", hostile_query_checks))[label]()


def hostile_query_checks(base: Path | None, *, timeout: float = 120.0) -> list[tuple[str, Callable[[], None]]]:
    """(label, check) of every hostile query case; ``base`` None: the labels alone (nothing is built)."""
    from ragtui.core.errors import IndexFormatError, QueryError, UsageError
    from ragtui.core.index.bm25 import BM25Index
    from ragtui.core.index.index_format import read_index
    from ragtui.core.search.retriever import MAX_QUERY_CHARS, MODES, Retriever
    from tests.unit.fakes import HashEmbedder

    checks: list[tuple[str, Callable[[], None]]] = []
    if base is not None:
        folder, art = build_pristine(base)

    # The installed command.
    cli_queries = {
        "not UTF-8": (b"caf\xe9 cats", {2}, "UTF-8"),
        "100 kB": ("cats " * 20_000, {2}, f"at most {MAX_QUERY_CHARS:,}"),
        "escape sequences": ("\x1b[2J\x1b]0;PWNED\x07 cats \x9b31m", {0, 1}, ""),
        "punctuation only": ("!!! ??? ... ---", {0, 1}, ""),
        "stopwords only": ("the of and a to", {0, 1}, ""),
    }
    for label, (query, codes, needle) in cli_queries.items():
        for mode in MODES:
            def cli_case(query=query, codes=codes, needle=needle, mode=mode):
                code, out, err = run_cli("search", query, "--mode", mode, "--artifacts", str(art), timeout=timeout)
                assert code in codes, f"exit {code}: {err[-300:]!r}"
                assert "Traceback" not in err and "internal error" not in err, err[-300:]
                if code == 2:
                    assert one_clear_line(err) and needle in err, err
                assert unsafe(out + err) == [], f"raw control characters reached the terminal: {unsafe(out + err)}"
            checks.append((f"CLI {label}, {mode}", cli_case))

    # The API: the checks come before any embedding.
    if base is not None:
        api_art = base / "api-art"
        run_sync(folder, api_art)
        embedder = HashEmbedder()
        retriever = Retriever.open(api_art / "rag" / INDEX_ID, embedder=embedder)
    refused = {"1 MB": "cats " * 200_000, "one over the cap": "a" * (MAX_QUERY_CHARS + 1),
               "surrogate-escaped byte": "caf\udce9", "lone surrogate": "\ud800 cats"}
    for label, query in refused.items():
        for mode in MODES:
            def api_refused(query=query, mode=mode):
                before = len(embedder.embedded)
                try:
                    retriever.search(query, mode=mode)
                except QueryError as e:
                    assert isinstance(e, ValueError) and isinstance(e, UsageError) and e.exit_code == 2
                else:
                    raise AssertionError("searched a query that should be refused")
                assert len(embedder.embedded) == before, "the query was embedded before being refused"
            checks.append((f"API {label}, {mode}", api_refused))
    accepted = {"NUL bytes": "cats\0dogs\0", "at the cap": ("cats " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS],
                "escapes": "\x1b[2J cats \x07", "no terms": "!!! \0 ???"}
    for label, query in accepted.items():
        for mode in MODES:
            def api_accepted(query=query, mode=mode):
                hits = retriever.search(query, mode=mode)
                assert all(math.isfinite(h.score) for h in hits)
            checks.append((f"API {label}, {mode}", api_accepted))

    # BM25 parameters out of range: refused everywhere they enter, without a numpy warning.
    bad = [(-1.0, 0.75), (1e308, 0.75), (float("nan"), 0.75), (float("inf"), 0.75), (101.0, 0.75),
           (1.2, -0.1), (1.2, 1.5), (True, 0.75), ("1.2", 0.75)]
    if base is not None:
        bm25_bytes = (Path(os.path.realpath(api_art / "rag" / INDEX_ID)) / "bm25.idx").read_bytes()
    for k1, b in bad:
        def sync_refuses(k1=k1, b=b):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    run_sync(folder, base / "never", k1=k1, b=b)
                except UsageError as e:
                    assert "BM25" in str(e)
                else:
                    raise AssertionError("sync accepted the parameters")
            assert not (base / "never").exists(), "sync wrote before refusing its parameters"

        def decode_refuses(k1=k1, b=b):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    BM25Index.decode(bm25_bytes, k1, b)
                except UsageError:
                    pass
                else:
                    raise AssertionError("decode accepted the parameters")

        def reader_refuses(k1=k1, b=b):
            index = base / "meta-bad" / INDEX_ID
            shutil.rmtree(index.parent, ignore_errors=True)
            shutil.copytree(Path(os.path.realpath(api_art / "rag" / INDEX_ID)), index)
            meta = json.loads((index / "meta.json").read_text())
            meta["bm25"] = {"k1": k1, "b": b}
            (index / "meta.json").write_text(json.dumps(meta))  # NaN and Infinity as Python writes them
            try:
                read_index(index)
            except IndexFormatError as e:
                assert e.path.endswith("meta.json")
            else:
                raise AssertionError("the reader accepted the parameters")

        for what, fn in (("sync", sync_refuses), ("decode", decode_refuses), ("meta.json", reader_refuses)):
            checks.append((f"k1={k1!r} b={b!r} via {what}", fn))
    for k1, b in ((0.0, 0.0), (100.0, 1.0), (0, 1)):
        def bounds_accepted(k1=k1, b=b):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                scores = BM25Index.decode(bm25_bytes, k1, b).scores("cats dogs birds")
            assert np.isfinite(scores).all() and (scores >= 0).all()
        checks.append((f"k1={k1!r} b={b!r} accepted", bounds_accepted))
    return checks
