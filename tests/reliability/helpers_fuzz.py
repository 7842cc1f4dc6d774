"""The reader judged on generated corruptions of each file, against the plain reference validator.

``corrupt_cases`` checks, for each case (helpers_mutations), that ``read_index``
(eager, and lazy then ``verify()``) either raises ``IndexFormatError``
naming one of the four files — never another exception, never a hang —
exactly when the reference (helpers_reference) rejects the files, and
otherwise returns the same content the reference decoded: never a partial
result. ``cli_corrupt_cases`` puts a sample of the corrupt indexes under an
artifacts root and runs the command line on them: exit 3 and one line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import signal
from pathlib import Path

from ragtui.core.errors import IndexFormatError
from ragtui.core.index.index_format import FILES, read_index
from tests.reliability.cases import Case
from tests.reliability.helpers_mutations import INDEX_ID, base_files, mutate
from tests.reliability.helpers_reference import Invalid, validate

HANG_SECONDS = 30
"""A case that takes longer than this is a hang (a tiny index reads in about a millisecond)."""


# -- judging the reader -----------------------------------------------------------------------------


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


def _same(data, ref: dict) -> bool:
    records = [tuple(getattr(r, k) for k in ("chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint"))
               for r in data.records]
    return (records == ref["records"] and data.vectors.ravel().tolist() == ref["vectors"]
            and data.meta.n_chunks == ref["meta"]["n_chunks"] and data.bm25.n_docs == ref["meta"]["n_chunks"])


def judge(index_dir: Path, files: dict[str, bytes]) -> str | None:
    """None when the reader behaved, else what it did wrong."""
    try:
        ref = validate(files, index_dir.name)
        ref_problem = None
    except Invalid as e:
        ref, ref_problem = None, f"{e.args[0]}: {e.args[1]}"
    for mode in ("eager", "lazy"):
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(HANG_SECONDS)
        try:
            data = read_index(index_dir, full=(mode == "eager"))
            if mode == "lazy":
                data.records.verify()
            got = data
        except IndexFormatError as e:
            if Path(e.path).name not in FILES or Path(e.path).parent != index_dir:
                return f"{mode}: the error names {e.path!r}, not one of the four files"
            got = None
        except _Hang:
            return f"{mode}: no answer within {HANG_SECONDS} s"
        except Exception as e:  # noqa: BLE001 - the finding itself
            return f"{mode}: raised {type(e).__name__}: {str(e)[:200]}"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        if got is None and ref is not None:
            return f"{mode}: rejected a valid index"
        if got is not None and ref is None:
            return f"{mode}: accepted an index the format rejects ({ref_problem})"
        if got is not None and not _same(got, ref):
            return f"{mode}: returned content that differs from the files"
    return None


@functools.cache
def _mutations(name: str, n: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """The first ``n`` mutations of ``name`` (one random stream per file and seed)."""
    pristine = base_files()
    rng = random.Random(f"{seed}-{name}")
    return [mutate(name, pristine[name], rng) for _ in range(n)]


def check_corrupt(name: str, i: int, n: int, seed: int, tmp: Path) -> None:
    """Mutation ``i`` of ``name``: the reader rejects exactly what the reference rejects, else reads the same."""
    kind, data = _mutations(name, n, seed)[i]
    files = {**base_files(), name: data}
    index = tmp / INDEX_ID
    index.mkdir(parents=True, exist_ok=True)
    for fname, content in files.items():  # a folder shared with other cases: only what differs is replaced
        path = index / fname
        if path.exists() and path.read_bytes() == content:
            continue
        # Unlink, then create: truncating a file in place makes ext4 flush it on close (auto_da_alloc).
        path.unlink(missing_ok=True)
        path.write_bytes(content)
    problem = judge(index, files)
    assert problem is None, f"{name} case {i} ({kind}): {problem} [bytes {data[:120]!r}]"


PER_FILE = {"ci": 1000, "full": 5000}


def corrupt_cases(size: str = "ci", names=FILES, seed: int = 0, per_file: int | None = None) -> list[Case]:
    """``per_file`` generated corruptions of each index file, ids ``meta.json-17``."""
    n = per_file or PER_FILE[size]
    return [Case(f"{name}-{i}", functools.partial(check_corrupt, name, i, n, seed)) for name in names for i in range(n)]


def seed_block(case: Case, block: int = 100) -> str:
    """``meta.json-0100-0199``: the file and the block of a hundred cases a corruption case belongs to."""
    name, i = case.id.rsplit("-", 1)
    lo = int(i) // block * block
    return f"{name}-{lo:04d}-{lo + block - 1:04d}"


# -- the command line on corrupt indexes ------------------------------------------------------------


@functools.cache
def invalid_cases(per_file: int, seed: int = 0) -> list[tuple[str, str, bytes]]:
    """(file, mutation, bytes): ``per_file`` corruptions of each file that the reference rejects."""
    pristine = base_files()
    out = []
    for name in FILES:
        rng = random.Random(f"cli-{seed}-{name}")
        found = 0
        while found < per_file:
            kind, data = mutate(name, pristine[name], rng)
            try:
                validate({**pristine, name: data}, INDEX_ID)
            except Invalid:
                out.append((name, kind, data))
                found += 1
    return out


def check_cli_on_corrupt(run, art: Path, name: str, data: bytes) -> None:
    """``run(argv) -> (exit, stdout, stderr)``: info exits 3 with one line; search exits 3, or shows only intact chunks."""
    from tests.helpers.cli import one_error_line

    index = art / "rag" / INDEX_ID
    index.mkdir(parents=True, exist_ok=True)
    for fname, content in {**base_files(), name: data}.items():
        (index / fname).write_bytes(content)
    code, out, err = run(["info", "--artifacts", str(art), "--json"])
    assert code == 3 and one_error_line(err), f"info: exit {code}, stderr {err!r}"
    assert str(index) in err, f"info: the message does not say where: {err!r}"
    code, out, err = run(["search", "word end café", "--artifacts", str(art), "--json"])
    if name != "docs.jsonl" or code == 3:
        assert code == 3 and one_error_line(err), f"search: exit {code}, stderr {err!r}"
        return
    # Search opens lazily (spec: each line is checked when used; order across lines by verify()),
    # so it may answer from intact lines: every hit shown must be its line, exactly, integrity-checked.
    assert code in (0, 1), f"search: exit {code}, stderr {err!r}"
    lines = data.split(b"\n")
    for hit in json.loads(out or "[]"):
        line = json.loads(lines[hit["row"]])
        assert (line["chunk_id"], line["text"]) == (hit["chunk_id"], hit["text"]), f"not what is on disk: {hit}"
        assert hashlib.sha256(hit["text"].encode()).hexdigest() == line["fingerprint"], f"damaged text shown: {hit}"


CLI_PER_FILE = {"ci": (8, 1), "full": (25, 3)}
"""(corrupt indexes per file, how many of them also through the installed command)."""


def cli_corrupt_cases(size: str = "ci", seed: int = 0) -> list[Case]:
    """``info`` and ``search`` on corrupt indexes: the CLI's main in a forked child for every case, and the
    first few of each file through the installed ``ragtui`` command."""
    per_file, installed = CLI_PER_FILE[size]
    out, seen = [], dict.fromkeys(FILES, 0)
    for k, (name, _kind, _data) in enumerate(invalid_cases(per_file, seed)):
        seen[name] += 1
        out.append(Case(f"{name}-{seen[name]}-forked", functools.partial(check_cli_corrupt, per_file, seed, k, False)))
        if seen[name] <= installed:
            out.append(Case(f"{name}-{seen[name]}-installed",
                            functools.partial(check_cli_corrupt, per_file, seed, k, True)))
    return out


def check_cli_corrupt(per_file: int, seed: int, k: int, installed: bool, case: Path) -> None:
    from tests.helpers.cli import run_process
    from tests.reliability.cases import fork_server

    name, _kind, data = invalid_cases(per_file, seed)[k]

    def forked(argv):
        answer = fork_server().run({"action": "cli", "argv": argv, "stdout": str(case / "out"),
                                    "stderr": str(case / "err")})
        return (answer["exit"], (case / "out").read_text(errors="replace"), (case / "err").read_text(errors="replace"))

    def installed_cmd(argv):
        r = run_process(*argv)
        return r.code, r.out, r.err

    check_cli_on_corrupt(installed_cmd if installed else forked, case / "art", name, data)
