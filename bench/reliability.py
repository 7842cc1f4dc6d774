"""The reliability harness at full size: every class of fault, how many cases, how many passed.

    python bench/reliability.py              # everything (a few minutes), prints the README table
    python bench/reliability.py --fuzz 1000  # fewer generated corruptions per file

Each row runs one of the runners in tests/reliability/helpers_*.py — the
same code the tests run at CI size — and counts cases: a kill point, an
injected error, a generated corruption, a read during publishing, a hostile
file, a command's output. Failures are listed under the table and make the
exit code 1. Cases that need root (mount, mknod, setuid) are reported as
skipped where that is not available. spec/reliability.md says what each row
checks; the table there was produced by this script.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.reliability.helpers import Tally  # noqa: E402


class _Row:
    def __init__(self, tally: Tally, seconds: float, notes: str = "") -> None:
        self.tally, self.seconds, self.notes = tally, seconds, notes


def _pytest_tally(name: str, *paths: str) -> Tally:
    """Run test files with pytest and count their tests (the TUI rows need Textual's Pilot)."""
    import pytest

    tally = Tally(name)

    class Count:
        def pytest_collectreport(self, report):
            if report.failed:  # a file that cannot be imported is a failure, not zero cases
                tally.case(False, f"{report.nodeid or paths}: collection error")

        def pytest_runtest_logreport(self, report):
            if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
                if report.outcome == "skipped":
                    return
                tally.case(report.outcome == "passed", report.nodeid)

    # pytest's report goes to stderr: stdout is the table; failures are listed under it by node id.
    with contextlib.redirect_stdout(sys.stderr):
        code = pytest.main(["-q", "-p", "no:cacheprovider", *[str(REPO / p) for p in paths]], plugins=[Count()])
    if tally.tried == 0 or (code not in (0, 1) and not tally.failures):
        tally.case(False, f"{', '.join(paths)}: no test ran (pytest exit code {int(code)})")
    return tally


def run(args) -> list[_Row]:
    from tests.helpers.embed_server import EmbedServer
    from tests.reliability import (
        helpers_bombs,
        helpers_bounded,
        helpers_cli_http,
        helpers_concurrency,
        helpers_config,
        helpers_dataloss,
        helpers_deadlines,
        helpers_embed,
        helpers_escapes,
        helpers_export,
        helpers_faults,
        helpers_fuzz,
        helpers_hostile,
        helpers_io_cli,
        helpers_kill,
        helpers_longlines,
        helpers_mcp,
        helpers_patterns,
        helpers_query,
        helpers_terminal,
        helpers_verified,
    )
    from tests.reliability.helpers_child import ForkServer

    rows: list[_Row] = []

    def timed(fn, notes=""):
        t0 = time.perf_counter()
        result = fn()
        tally, extra = result if isinstance(result, tuple) else (result, "")
        rows.append(_Row(tally, time.perf_counter() - t0, notes or extra))
        print(f"  {tally.name}: {tally.passed}/{tally.tried}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="ragtui-reliability-") as tmp, ForkServer() as server:
        base = Path(tmp)

        def kills():
            total, counts = Tally("Writer killed (SIGKILL) before each I/O step of a publish"), []
            for scenario in helpers_kill.SCENARIOS:
                tally, steps = helpers_kill.run_kill_harness(base / f"kill-{scenario}", server, scenario)
                total.merge(tally)
                counts.append(f"{scenario} {len(steps)}")
            return total, "steps per publish: " + ", ".join(counts) + " (+1 each: killed after the last)"

        timed(kills)

        def export_kills():
            total, counts = Tally("Export killed (SIGKILL) before each of its steps"), []
            for scenario in helpers_kill.EXPORT_SCENARIOS:
                tally, steps = helpers_kill.run_export_kill_harness(base / f"export-kill-{scenario}", server, scenario)
                total.merge(tally)
                counts.append(f"{scenario} {len(steps)}")
            return total, ("steps per export: " + ", ".join(counts) + " (+1 each); the target held the old or the "
                           "new export, and the next export left nothing beside it")

        timed(export_kills)
        timed(lambda: helpers_faults.run_durability(base / "durability"), "3 kinds of publish x 4 write sizes")
        errnos = (errno.ENOSPC, errno.EIO, errno.EACCES, errno.EROFS, errno.EDQUOT)
        timed(lambda: helpers_faults.run_io_matrix(base / "io", errnos=errnos),
              "10 kinds of call x 5 errnos x (each occurrence, every time)")
        timed(lambda: helpers_io_cli.run_cli_faults(base / "io-cli", server), "write/fsync/rename x 3 errnos x once/always")
        real = {}

        def real_fs():
            tally, skipped = helpers_io_cli.run_real_fs_faults(server)
            real["skipped"] = skipped
            return tally, ("skipped: " + "; ".join(skipped)) if skipped else "full tmpfs, ro remount, EACCES as nobody"

        timed(real_fs)
        fuzz = helpers_fuzz.run_fuzz(base / "fuzz", args.fuzz)
        for tally in fuzz.values():
            rows.append(_Row(tally, 0.0, "judged against the reference validator"))
            print(f"  {tally.name}: {tally.passed}/{tally.tried}", file=sys.stderr, flush=True)
        for rel, (tally, outcomes) in helpers_export.run_export_fuzz(base / "export-fuzz", args.fuzz).items():
            named = outcomes.get(f"rejected: {rel.rsplit('/', 1)[-1]}", 0)
            rows.append(_Row(tally, 0.0, f"{named} refused naming this file, {outcomes.get('accepted', 0)} accepted "
                                         "(still valid: text check passes, searches answer), the rest naming the "
                                         "file they contradict"))
        timed(lambda: helpers_fuzz.run_cli_corrupt(base / "fuzz-cli", server, per_file=25, installed=3),
              "info + search per case, forked and installed command")
        timed(lambda: _pytest_tally("TUI on corrupt indexes (error state, then recovery)",
                                    "tests/reliability/test_tui_corrupt.py"))
        timed(lambda: helpers_verified.run_crafted_entries(base / "verified"),
              "1 pristine, 22 kinds of bad ends, 8 bad heads, 6 bad BM25 keys, 8 damaged entries, "
              "5 files tampered with under an intact entry; judged against the reader without a cache")

        timed(lambda: helpers_concurrency.run_reader_all_modes(base / "reader-modes", args.generations, 1))
        timed(lambda: helpers_concurrency.run_races(base / "races", 10), "10 rounds x 2 racers x 50 publishes")
        timed(lambda: helpers_concurrency.run_lock_cases(base / "locks", 10))
        with EmbedServer() as embed_server:
            def backend():
                tally = helpers_embed.run_backend_faults(base / "backend")
                return tally.merge(helpers_cli_http.run_backend_cli(base / "backend-cli", embed_server))

            timed(backend, "10 fault kinds + a killed server process (library) and 4 through the CLI")
            timed(lambda: helpers_hostile.run_hostile(base / "hostile"), "one case per file, plus 3 for the run")
            timed(lambda: helpers_hostile.run_same_name(base / "same-name", 5000))
            timed(lambda: helpers_terminal.run_terminal(base / "terminal"))
            timed(lambda: _pytest_tally("Terminal escapes in documents: TUI", "tests/reliability/test_tui_terminal.py"),
                  "15 hostile documents in results and detail, one session")
            timed(lambda: helpers_cli_http.run_secrets(base / "secrets", embed_server))
            timed(lambda: helpers_deadlines.run_chat_deadlines(base / "deadlines-chat"),
                  "installed command, [llm] timeout = 1.5: comment pings, empty deltas, a trickle of text, a trickled "
                  "JSON body, trickled headers, each streamed and not; what arrived is shown, marked as cut")
            timed(lambda: helpers_deadlines.run_embed_deadlines(base / "deadlines-embed", embed_server),
                  "timeout = 1: a trickled body and trickled headers on embeddings, tokenize, detokenize; "
                  "+ ingest (exit 3, index untouched)")
            timed(lambda: helpers_deadlines.run_answer_bounds(base / "answer-bounds", embed_server),
                  "chat text past max_tokens (streamed, not), a 9 MiB body; endless and 64 MiB bodies on each "
                  "embedder endpoint (not asked for again); + ingest")
        # Trust: data loss, hostile configs, escapes, bombs.
        timed(lambda: helpers_dataloss.run_damaged_resync(base / "damaged"),
              "12 kinds of damage x (ingest unchanged, ingest after an edit, watch partial sync); result = clean build")
        timed(lambda: helpers_dataloss.run_bad_vector_rows(base / "rows"),
              "9 bad rows x first/middle/last, + 2 rows inside the 1e-3 tolerance accepted")
        timed(lambda: helpers_dataloss.run_unreadable_keeps_chunks(base / "unreadable"))
        timed(lambda: helpers_dataloss.run_same_name_refused(base / "same-folder-name"),
              "installed command: refused, --json, same folder, via a link, --index, --replace")
        timed(lambda: helpers_config.run_hostile_config(base / "hostile-config"))
        timed(lambda: helpers_config.run_url_audit(base / "url-audit"))
        timed(lambda: helpers_config.run_out_of_root(base / "out-of-root"))
        timed(lambda: helpers_escapes.run_cli(base / "escapes-cli"))
        timed(lambda: helpers_escapes.run_tui(base / "escapes-tui"))
        timed(lambda: helpers_escapes.run_markup(base / "markup"))
        timed(lambda: helpers_escapes.run_broken(base / "broken"))
        timed(lambda: helpers_bombs.run_index_bombs(base / "bombs", full=True),
              "5 kinds x 13 places x commands, 1 GiB address space; ingest rebuilds")
        timed(lambda: helpers_bombs.run_hostile_queries(base / "queries"),
              "exit 2 / QueryError before embedding; no raw control characters; no numpy warnings")
        timed(lambda: helpers_query.run_hostile_syntax(base / "query-syntax"),
              "results whose hits pass the filters, or one-line QueryError with its column; CLI exit 0/1/2")
        timed(lambda: helpers_longlines.run_long_lines(base / "long-lines"))
        timed(lambda: helpers_longlines.run_ingest_long_lines(base / "long-lines-ingest"))
        timed(lambda: helpers_mcp.run_protocol_errors(helpers_mcp.make_index(base / "mcp")),
              "one server for every case, then a search it must still answer; lines over 4 MiB included")
        timed(lambda: helpers_bounded.run_bounded_reads(base / "bounded"),
              "12 files (3 ragtui.toml, last-index.json for search and ingest, the TUI history, 4 collection "
              "files, a report, a previous export's manifest) x 4 kinds; each run as a process")
        # Which files are documents.
        timed(lambda: helpers_patterns.run_gitignore_vs_git(base / "git", cases=1000), "counts 0 without git")
        timed(lambda: helpers_patterns.run_watch_agrees_with_walk(base / "agree", cases=1000))
        timed(lambda: helpers_patterns.run_hostile_ignore_files(base / "ignore-files"), "one case per kind")
        timed(lambda: helpers_patterns.run_flag_patterns_fuzz(base / "flags", cases=2000, cli_cases=20),
              "2,000 in-process + 20 through the CLI")
    return rows


def table(rows: list[_Row]) -> str:
    lines = ["| Class of fault | Cases tried | Passed | Notes |", "|---|---:|---:|---|"]
    for row in rows:
        t = row.tally
        lines.append(f"| {t.name} | {t.tried:,} | {t.passed:,} | {row.notes} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=5000, help="generated corruptions per index file (default 5000)")
    parser.add_argument("--generations", type=int, default=500, help="publishes under the searching reader")
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows = run(args)
    print(table(rows))
    print(f"\n{sum(r.tally.tried for r in rows):,} cases, {sum(r.tally.passed for r in rows):,} passed, "
          f"in {time.perf_counter() - t0:.0f} s")
    failures = [f"{r.tally.name}: {f}" for r in rows for f in r.tally.failures]
    for f in failures[:100]:
        print("FAILED", f)
    return 1 if failures or any(r.tally.passed != r.tally.tried for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
