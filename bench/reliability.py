"""The reliability cases counted per class of fault: the table in docs/performance.md and spec/reliability.md.

    python bench/reliability.py                  # every class at full size (tens of minutes), prints the table
    python bench/reliability.py --size ci        # the tests' own size: runs tests/reliability under pytest
    python bench/reliability.py --only kill      # the rows whose title holds "kill"
    python bench/reliability.py --write          # ... and writes the table into the two documents
    python bench/reliability.py --size ci --write -- --durations=30   # arguments after -- go to pytest

The cases come from the generators in tests/reliability (``kill_cases``, ``corrupt_cases``, ...), the
same ones the tests parametrise over. At full size each case's check is called here, one after the
other, in a fresh folder; at CI size pytest runs tests/reliability with a plugin that counts each
test's outcome under its row (a test standing for several cases, a group, counts them all). The TUI
rows are test files run under pytest at either size. A case that fails is listed under the table with
its message, and the exit code is 1; a case skipped (no root, no mount, no git) is counted apart.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DOCS = {REPO / "docs" / "performance.md": False, REPO / "spec" / "reliability.md": True}
"""The documents that hold the table, and whether theirs has the notes column."""
START, END = "<!-- reliability table: start (bench/reliability.py --write) -->", "<!-- reliability table: end -->"


@dataclass
class Row:
    title: str
    cases: Callable[[str], list] | None
    """The generator (size -> cases); None for a row that is only a test file run under pytest."""
    tests: tuple[str, ...]
    """The tests that run these cases at CI size (node id prefixes), or the test files of a pytest row."""
    notes: str = ""


@dataclass
class Tried:
    tried: int = 0
    passed: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def rows() -> list[Row]:
    import tests.reliability.helpers_bombs as bombs
    import tests.reliability.helpers_bounded as bounded
    import tests.reliability.helpers_cli_http as cli_http
    import tests.reliability.helpers_concurrency as conc
    import tests.reliability.helpers_config as config
    import tests.reliability.helpers_dataloss as dataloss
    import tests.reliability.helpers_deadlines as deadlines
    import tests.reliability.helpers_embed as embed
    import tests.reliability.helpers_escapes as escapes
    import tests.reliability.helpers_export as export
    import tests.reliability.helpers_faults as faults
    import tests.reliability.helpers_fuzz as fuzz
    import tests.reliability.helpers_hostile as hostile
    import tests.reliability.helpers_io_cli as io_cli
    import tests.reliability.helpers_kill as kill
    import tests.reliability.helpers_longlines as longlines
    import tests.reliability.helpers_mcp as mcp
    import tests.reliability.helpers_patterns as patterns
    import tests.reliability.helpers_query as query
    import tests.reliability.helpers_terminal as terminal
    import tests.reliability.helpers_verified as verified

    t = "tests/reliability/"
    out = [
        Row("Writer killed (SIGKILL) before each I/O step of a publish, and after the last", kill.kill_cases,
            (f"{t}test_kill.py::test_writer_killed_before_step",), "scenarios update, first, adopt"),
        Row("Export killed (SIGKILL) before each of its steps, and after the last", kill.export_kill_cases,
            (f"{t}test_kill.py::test_export_killed_before_step",),
            "scenarios new, empty, replace; the target holds the old or the new export"),
        Row("Durability order (files, then folder, flushed before the link; rag/ after)", faults.durability_cases,
            (f"{t}test_durability.py::test_publish_order_with_short_writes",), "3 kinds of publish x 4 write sizes"),
        Row("I/O errors on each open, write, fsync, close, mkdir, rename, ..., once and always",
            faults.io_matrix_cases, (f"{t}test_io_errors.py::test_call_fails",),
            "ENOSPC, EIO, EACCES (full size: and EROFS, EDQUOT) at each occurrence and every time"),
        Row("`ragtui ingest` under I/O errors (exit 3, one line, index intact)", io_cli.cli_fault_cases,
            (f"{t}test_io_errors.py::test_cli_exits_3_with_one_line",), "write/fsync/rename x 3 errnos x once/always"),
        Row("Real filesystem faults: full tmpfs, read-only remount, EACCES", io_cli.real_fs_cases,
            (f"{t}test_io_errors.py::test_real_filesystem_fault",), "need root and mount; skipped otherwise"),
    ]
    for name in fuzz.FILES:
        out.append(Row(f"Corrupt {name}", lambda size, name=name: fuzz.corrupt_cases(size, names=(name,)),
                       (f"{t}test_corrupt.py::test_reader_on_generated_corruptions[{name}-",),
                       "judged against the reference validator"))
    for rel in export.FILES:
        out.append(Row(f"Corrupt Seekite export {rel}",
                       lambda size, rel=rel: [c for c in export.export_corrupt_cases(size) if c.id.startswith(rel + "-")],
                       (f"{t}test_export_fuzz.py::test_reader_on_generated_corruptions[{rel}-",),
                       "refused naming a file of the export, or accepted and searchable"))
    out += [
        Row("`ragtui info` / `search` on corrupt indexes (exit 3)", fuzz.cli_corrupt_cases,
            (f"{t}test_corrupt.py::test_cli_exits_3_on_corrupt_indexes",), "forked CLI, and the installed command"),
        Row("TUI on corrupt indexes (error state, then recovery)", None, (f"{t}test_tui_corrupt.py",)),
        Row("Crafted or damaged verified entries (rag/.cache), tampered files under an intact one",
            verified.crafted_cases, (f"{t}test_verified_entries.py::test_crafted_entry",),
            "the same data or error as the reader without a cache"),
        Row("Reader searching all four modes during 500 publishes (each read counts)", conc.reader_cases,
            (f"{t}test_concurrency.py::test_reader_sees_one_whole_generation",)),
        Row("Reloads injected mid-search (each injection counts)", conc.reload_cases,
            (f"{t}test_concurrency.py::test_a_reload_injected",),
            "before every line of ragtui's code a search runs (CI: every 5th)"),
        Row("Two writers racing (each attempt publishes or is refused)", conc.race_cases,
            (f"{t}test_concurrency.py::test_two_writers_racing",), "rounds x 2 racers x 50 publishes"),
        Row("Second writer refused; lock of a killed writer recovered", conc.lock_cases,
            (f"{t}test_concurrency.py::test_lock",)),
        Row("Embedding backend failures during ingest", embed.backend_cases,
            (f"{t}test_embed_failures.py::test_backend_fault",), "10 fault kinds + a killed server process"),
        Row("`ragtui ingest` with a failing embedding server (exit 3)", cli_http.backend_cli_cases,
            (f"{t}test_embed_failures.py::test_cli_exits_3",)),
        Row("Hostile documents (binary, bad UTF-8, 2 GiB, 10 MB line, FIFO, devices, links, odd names)",
            hostile.hostile_cases, (f"{t}test_hostile_docs.py::test_hostile_document",),
            "one case per file, plus 3 for the run"),
        Row("Files with the same name in different folders", hostile.same_name_cases,
            (f"{t}test_hostile_docs.py::test_thousands_of_files_with_the_same_name",), "CI: 2,000; full: 5,000"),
        Row("Terminal escapes in documents: search, inspect", terminal.terminal_cases,
            (f"{t}test_terminal.py::test_each_hostile_document",)),
        Row("Terminal escapes in documents: TUI", None, (f"{t}test_tui_terminal.py",)),
        Row("API key in artifacts, output (--json too), errors, logs", cli_http.secrets_cases,
            (f"{t}test_secrets.py::test_key_stays_out",), "each place looked at counts"),
        Row("`ragtui ask`: answers that never end, cut at the request's deadline (exit 3)",
            deadlines.chat_deadline_cases, (f"{t}test_deadlines.py::test_chat_deadline",),
            "[llm] timeout = 1.5; pings, empty deltas, trickles, each streamed and not"),
        Row("HTTP embedder: answers that never finish, cut at each request's deadline",
            deadlines.embed_deadline_cases, (f"{t}test_deadlines.py::test_embedder_deadline",)),
        Row("Answers past their bound (chat max_tokens, 8 MiB; embedder n x dim), not read on",
            deadlines.answer_bound_cases, (f"{t}test_deadlines.py::test_answer_bound",)),
        Row("Damaged index, then ingest / watch partial sync: rebuilt from every file", dataloss.damaged_resync_cases,
            (f"{t}test_dataloss.py::test_damaged_state_resync",), "result = clean build"),
        Row("Bad vector rows: rejected on read, re-embedded on ingest", dataloss.bad_row_cases,
            (f"{t}test_dataloss.py::test_bad_vector_row",), "first/middle/last row; 2 rows within tolerance accepted"),
        Row("A file or folder that cannot be read now keeps its chunks (real EACCES)", dataloss.unreadable_cases,
            (f"{t}test_dataloss.py::test_unreadable_keeps_chunks",)),
        Row("A second folder of the same name is refused", dataloss.same_folder_name_cases,
            (f"{t}test_dataloss.py::test_same_folder_name",)),
        Row("Hostile project config (network keys or `artifacts` in ./ragtui.toml, in the ingested folder)",
            config.hostile_config_cases, (f"{t}test_config.py::test_hostile_config_case",),
            "refusals (exit 2, no request received) and trusted controls"),
        Row("URL audit: a folder's config key that reaches a URL (no request to another host or port)",
            config.url_audit_cases, (f"{t}test_config.py::test_url_audit_case",)),
        Row("Out-of-root doc_ids, refused by inspect and the TUI", config.out_of_root_cases,
            (f"{t}test_config.py::test_out_of_root_case",)),
        Row("Terminal escapes in metadata and names: CLI surfaces", escapes.escape_cli_cases,
            (f"{t}test_escapes.py::test_cli_surface",), "payloads x 21 surfaces (3 in a pty)"),
        Row("Terminal escapes in metadata and names: TUI", escapes.escape_tui_cases,
            (f"{t}test_escapes.py::test_tui_views",), "payloads x 7 views, one Pilot session each"),
        Row("Markup in names: TUI", escapes.markup_cases, (f"{t}test_escapes.py::test_markup_in_names",),
            "6 names x 4 views + the index picker, one session"),
        Row("Broken entries under rag/", escapes.broken_cases, (f"{t}test_escapes.py::test_broken_entries",),
            "kinds x 8 checks (beside a good index, and alone; CLI and TUI)"),
        Row("Index folder bombs (FIFO, socket, directory, /dev/zero, 8 GiB) x commands, 1 GiB address space",
            bombs.bomb_cases, (f"{t}test_bombs.py::test_index_bomb",), "CI: a rotation covering each pair"),
        Row("Hostile queries (not UTF-8, 100 kB-1 MB, NUL, escapes, no terms) x modes; bad k1/b", bombs.query_cases,
            (f"{t}test_bombs.py::test_hostile_query",)),
        Row("Hostile query syntax (quotes, ORs, escapes, prefixes, filter values) x modes", query.syntax_cases,
            (f"{t}test_query_hostile.py::test_hostile_query_syntax",)),
        Row("Long single-line documents: chunked linearly and correctly", longlines.long_line_cases,
            (f"{t}test_longlines.py::test_long_lines_chunk_linearly",)),
        Row("Ingest of long single-line documents in bounded memory", longlines.ingest_long_line_cases,
            (f"{t}test_longlines.py::test_ingest_of_a_long_line",), "3 MB (full size: and 10 MB) of minified JSON"),
        Row("MCP protocol errors: every malformed case gets exactly one answer", mcp.protocol_cases,
            (f"{t}test_mcp_protocol.py::test_every_malformed_line",), "one server for every case, then a search"),
        Row("Bounded reads: every file ragtui opens, each as FIFO, directory, /dev/zero link, oversized",
            bounded.bounded_cases, (f"{t}test_bounded_reads.py::test_every_file_read",), "each run as a process"),
        Row("Ignore files as git reads them", patterns.gitignore_cases,
            (f"{t}test_patterns.py::test_ignore_files_as_git",), "random trees; skipped without git"),
        Row("Watch filter agrees with the walk", patterns.watch_agrees_cases,
            (f"{t}test_patterns.py::test_watch_filter_agrees",)),
        Row("Hostile ignore files", patterns.hostile_ignore_cases, (f"{t}test_patterns.py::test_hostile_ignore_file",)),
        Row("--include/--exclude strings", patterns.flag_pattern_cases, (f"{t}test_patterns.py::test_flag_patterns",),
            "in-process, and a few through the CLI"),
    ]
    return out


# -- full size: the checks called here ---------------------------------------------------------------


def run_cases(row: Row, size: str, tmp: Path) -> Tried:
    import pytest

    tried = Tried()
    assert row.cases is not None
    for case in row.cases(size):
        where = tmp / f"case-{tried.tried + tried.skipped}"
        where.mkdir(parents=True)
        try:
            counted = case.check(where)
        except pytest.skip.Exception:
            tried.skipped += case.count
            continue
        except Exception as e:  # noqa: BLE001 - a failed case, listed with its cause
            tried.tried += case.count
            if len(tried.failures) < 20:
                tried.failures.append(f"{case.id}: {type(e).__name__}: {str(e)[:600]}")
            continue
        finally:
            shutil.rmtree(where, ignore_errors=True)
        n = counted if isinstance(counted, int) else case.count
        tried.tried += n
        tried.passed += n
    return tried


# -- under pytest: each test's outcome counted under its row -------------------------------------------


class Count:
    """A pytest plugin: each test's outcome counted under the row whose tests its node id starts with."""

    def __init__(self, table: list[Row]) -> None:
        self.table = table
        self.by_row: dict[str, Tried] = {r.title: Tried() for r in table}
        self.weights: dict[str, int] = {}

    def _row(self, nodeid: str) -> Tried | None:
        if len(self.table) == 1 and self.table[0].cases is None:  # one row of whole files: every test is its
            return self.by_row[self.table[0].title]
        for r in self.table:
            if any(nodeid.startswith(prefix) for prefix in r.tests):
                return self.by_row[r.title]
        return None

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            case = getattr(item, "callspec", None) and item.callspec.params.get("case")
            self.weights[item.nodeid] = getattr(case, "count", 1)

    def pytest_collectreport(self, report) -> None:
        if report.failed:  # a file that cannot be imported is a failure, not zero cases
            rows = self.table if len(self.table) == 1 and self.table[0].cases is None else [
                r for r in self.table if any(p.split("::")[0] == report.nodeid.split("::")[0] for p in r.tests)]
            for r in rows:
                self.by_row[r.title].tried += 1
                self.by_row[r.title].failures.append(f"{report.nodeid or r.tests[0]}: collection error")

    def pytest_runtest_logreport(self, report) -> None:
        row = self._row(report.nodeid)
        if row is None:
            return
        n = self.weights.get(report.nodeid, 1)
        if report.outcome == "skipped" and report.when in ("setup", "call"):
            row.skipped += n
        elif report.when == "call" or (report.when == "setup" and report.outcome == "failed"):
            row.tried += n
            if report.outcome == "passed":
                row.passed += n
            elif len(row.failures) < 20:
                row.failures.append(report.nodeid)


def run_pytest(table: list[Row], paths: list[str], extra: list[str] | None = None) -> dict[str, Tried]:
    """Run ``paths`` under pytest (its report on stderr); the counts per row. A row none of whose tests
    ran is one failed case: a file that skips itself or holds no test must not pass with 0 of 0."""
    import pytest

    count = Count(table)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        code = pytest.main(["-q", "-n", "0", "-p", "no:cacheprovider", *(extra or []), *paths], plugins=[count])
    seconds = time.perf_counter() - t0
    for r in table:
        got = count.by_row[r.title]
        got.seconds = seconds
        if got.tried == 0 and got.skipped == 0:
            got.tried, got.failures = 1, got.failures or [f"{', '.join(r.tests)}: no test ran (pytest exit code {int(code)})"]
    return count.by_row


def pytest_row(title: str, *paths: str) -> Tried:
    """One row made of whole test files run under pytest (the TUI rows, which need Textual's Pilot)."""
    row = Row(title, None, tuple(paths))
    return run_pytest([row], [str(REPO / p) if not os.path.isabs(p) else p for p in paths])[title]


# -- the table ------------------------------------------------------------------------------------------


def table(table_rows: list[Row], results: dict[str, Tried], notes: bool) -> str:
    head = ["| Class of fault | Cases tried | Passed | Skipped |" + (" Notes |" if notes else ""),
            "|---|---:|---:|---:|" + ("---|" if notes else "")]
    for r in table_rows:
        got = results[r.title]
        line = f"| {r.title} | {got.tried:,} | {got.passed:,} | {got.skipped:,} |"
        head.append(line + (f" {r.notes} |" if notes else ""))
    return "\n".join(head)


def summary(results: dict[str, Tried], size: str, seconds: float, load: tuple[str, str]) -> str:
    tried = sum(r.tried for r in results.values())
    passed = sum(r.passed for r in results.values())
    skipped = sum(r.skipped for r in results.values())
    how = ("at full size (each case's check called by the script)" if size == "full" else
           "at CI size (the tests of tests/reliability under pytest, each test counted under its row)")
    return (f"`python bench/reliability.py{' --size ci' if size == 'ci' else ''}` ran the cases {how}: "
            f"{tried:,} cases, {passed:,} passed, {skipped:,} skipped, in {seconds:,.0f} s "
            f"(Linux, 2 cores, load average {load[0]} at the start and {load[1]} at the end).")


def write_docs(text_for: Callable[[bool], str]) -> None:
    for path, notes in DOCS.items():
        doc = path.read_text(encoding="utf-8")
        if START not in doc or END not in doc:
            raise SystemExit(f"{path}: no {START!r} ... {END!r} markers to write the table between")
        pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
        block = f"{START}\n{text_for(notes)}\n{END}"
        path.write_text(pattern.sub(lambda _, block=block: block, doc, count=1), encoding="utf-8")
        print(f"wrote the table into {path.relative_to(REPO)}", file=sys.stderr)


def _load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return f.read().split()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("full", "ci"), default="full")
    parser.add_argument("--only", default="", help="run only the rows whose title holds this (case-insensitive)")
    parser.add_argument("pytest_args", nargs="*", help="at CI size, more arguments for pytest (after --)")
    parser.add_argument("--write", action="store_true", help="write the table into docs/performance.md and "
                                                             "spec/reliability.md (between their markers)")
    args = parser.parse_args()
    from tests.reliability.cases import close_shared

    table_rows = [r for r in rows() if args.only.lower() in r.title.lower()]
    if args.write and args.only:
        parser.error("--write needs every row (no --only)")
    load_start, t0 = _load(), time.perf_counter()
    results: dict[str, Tried] = {}
    if args.size == "ci":
        files = sorted({p.split("::")[0] for r in table_rows for p in r.tests})
        paths = [str(REPO / "tests" / "reliability")] if not args.only else [str(REPO / f) for f in files]
        results = run_pytest(table_rows, paths, args.pytest_args)
    else:
        with tempfile.TemporaryDirectory(prefix="ragtui-reliability-") as tmp:
            try:
                for k, r in enumerate(table_rows):
                    t1 = time.perf_counter()
                    if r.cases is None:
                        results[r.title] = pytest_row(r.title, *r.tests)
                    else:
                        results[r.title] = run_cases(r, "full", Path(tmp) / f"row-{k}")
                    got = results[r.title]
                    got.seconds = time.perf_counter() - t1
                    print(f"  {r.title}: {got.passed}/{got.tried} ({got.skipped} skipped) in {got.seconds:.0f} s",
                          file=sys.stderr, flush=True)
            finally:
                close_shared()
    seconds = time.perf_counter() - t0
    line = summary(results, args.size, seconds, (load_start, _load()))
    print(table(table_rows, results, notes=True))
    print("\n" + line)
    failures = [f"{r.title}: {f}" for r in table_rows for f in results[r.title].failures]
    for f in failures[:100]:
        print("FAILED", f)
    if args.write:
        write_docs(lambda notes: line + "\n\n" + table(table_rows, results, notes))
    return 1 if failures or any(got.passed != got.tried for got in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
