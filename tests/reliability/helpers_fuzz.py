"""The reader judged on generated corruptions of each file, against the plain reference validator.

``run_fuzz`` checks, for each case (helpers_mutations), that ``read_index``
(eager, and lazy then ``verify()``) either raises ``IndexFormatError``
naming one of the four files — never another exception, never a hang —
exactly when the reference (helpers_reference) rejects the files, and
otherwise returns the same content the reference decoded: never a partial
result. ``run_cli_corrupt`` puts a sample of the corrupt indexes under an
artifacts root and runs the command line on them: exit 3 and one line.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
from pathlib import Path

from ragtui.core.errors import IndexFormatError
from ragtui.core.index.index_format import FILES, read_index
from tests.reliability.helpers import Tally
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


def _replace(path: Path, data: bytes) -> None:
    # Unlink, then create: truncating a file in place makes ext4 flush it on close (auto_da_alloc),
    # which would cost milliseconds per case.
    path.unlink()
    path.write_bytes(data)


def run_fuzz(base: Path, per_file: int = 1000, seed: int = 0, names=FILES) -> dict[str, Tally]:
    """``per_file`` mutations of each file; one Tally per file."""
    pristine = base_files()
    index = base / INDEX_ID
    index.mkdir(parents=True, exist_ok=True)
    for name, data in pristine.items():
        (index / name).write_bytes(data)
    assert judge(index, pristine) is None, "the pristine index is not read correctly"
    out = {}
    for name in names:
        tally = Tally(f"Corrupt {name}")
        rng = random.Random(f"{seed}-{name}")
        for i in range(per_file):
            kind, data = mutate(name, pristine[name], rng)
            _replace(index / name, data)
            problem = judge(index, {**pristine, name: data})
            tally.case(problem is None, f"{name} case {i} ({kind}): {problem} [bytes {data[:120]!r}]")
        _replace(index / name, pristine[name])
        out[name] = tally
    return out


# -- the command line on corrupt indexes ------------------------------------------------------------


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
    from tests.reliability.helpers import one_clear_line

    index = art / "rag" / INDEX_ID
    index.mkdir(parents=True, exist_ok=True)
    for fname, content in {**base_files(), name: data}.items():
        (index / fname).write_bytes(content)
    code, out, err = run(["info", "--artifacts", str(art), "--json"])
    assert code == 3 and one_clear_line(err), f"info: exit {code}, stderr {err!r}"
    assert str(index) in err, f"info: the message does not say where: {err!r}"
    code, out, err = run(["search", "word end café", "--artifacts", str(art), "--json"])
    if name != "docs.jsonl" or code == 3:
        assert code == 3 and one_clear_line(err), f"search: exit {code}, stderr {err!r}"
        return
    # Search opens lazily (spec: each line is checked when used; order across lines by verify()),
    # so it may answer from intact lines: every hit shown must be its line, exactly, integrity-checked.
    assert code in (0, 1), f"search: exit {code}, stderr {err!r}"
    lines = data.split(b"\n")
    for hit in json.loads(out or "[]"):
        line = json.loads(lines[hit["row"]])
        assert (line["chunk_id"], line["text"]) == (hit["chunk_id"], hit["text"]), f"not what is on disk: {hit}"
        assert hashlib.sha256(hit["text"].encode()).hexdigest() == line["fingerprint"], f"damaged text shown: {hit}"


def run_cli_corrupt(base: Path, server, per_file: int = 10, installed: int = 1, seed: int = 0) -> Tally:
    """The CLI's main (in forked children) on ``per_file`` corrupt indexes per file; the first
    ``installed`` of each file also through the installed ``ragtui`` command."""
    from tests.reliability.helpers import ragtui

    tally = Tally("`ragtui info` / `search` on corrupt indexes (exit 3)")
    seen: dict[str, int] = {}
    for k, (name, kind, data) in enumerate(invalid_cases(per_file, seed)):
        case = base / f"c{k}"
        case.mkdir(parents=True)
        seen[name] = seen.get(name, 0) + 1

        def forked(argv, case=case):
            answer = server.run({"action": "cli", "argv": argv, "stdout": str(case / "out"), "stderr": str(case / "err")})
            return (answer["exit"], (case / "out").read_text(errors="replace"),
                    (case / "err").read_text(errors="replace"))

        def installed_cmd(argv):
            r = ragtui(*argv)
            return r.returncode, r.stdout, r.stderr

        runners = [forked] + ([installed_cmd] if seen[name] <= installed else [])
        for run in runners:
            tally.check(f"{name} ({kind}) via {run.__name__}",
                        lambda run=run, case=case, name=name, data=data: check_cli_on_corrupt(run, case / "art", name, data))
    return tally
