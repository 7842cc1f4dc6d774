"""``ragtui watch FOLDER``: keep a folder's index up to date as its files change.

Reconciles the index with the folder at start (what changed while nothing
was watching), then follows filesystem events until SIGINT or SIGTERM.
``--once`` reconciles and exits. Log lines go to stdout, one per publish
and per notable event (``--json``: one JSON object per line); a fatal error
is one line on stderr with the exit code of spec/architecture.md.

Signals: the first SIGINT/SIGTERM stops the agent cleanly (a sync that has
not begun writing is abandoned, a publish under way completes) and exits 0;
with ``--once`` a signal interrupts the reconcile and exits 130 (nothing
half-published: publishing is atomic).
"""

from __future__ import annotations

import signal
import sys
import threading
from datetime import UTC, datetime

from ragtui import app
from ragtui.app import DEFAULT_RECONCILE_EVERY
from ragtui.commands.options import add_folder_options, folder_values
from ragtui.core.errors import UsageError
from ragtui.core.textsafe import json_text


def register(sub, common) -> None:
    p = sub.add_parser(
        "watch",
        help="keep the index of a folder up to date as its files change",
        description="Reconcile <artifacts>/rag/<index_id>/ with a folder (adds, changes and deletes made "
        "while nothing watched), then follow filesystem events and re-ingest what changed. "
        "Unchanged content writes nothing.",
    )
    p.add_argument("folder", help="the folder of documents (its name is the default index id)")
    p.add_argument("--once", action="store_true", help="reconcile and exit (for scripts and CI)")
    p.add_argument("--poll", action="store_true", help="poll the folder instead of using inotify (e.g. network filesystems)")
    p.add_argument("--poll-seconds", type=float, default=1.0, metavar="S", help="polling interval (default 1)")
    p.add_argument("--quiet-ms", type=int, default=100, metavar="MS",
                   help="wait until events pause this long before syncing a batch (default 100; files whose "
                        "last event is a close after writing wait 10 ms)")
    p.add_argument("--reconcile-every", type=float, default=DEFAULT_RECONCILE_EVERY, metavar="S",
                   help=f"also reconcile the whole folder every S seconds (0: never; default {DEFAULT_RECONCILE_EVERY:.0f})")
    add_folder_options(p)
    p.add_argument("--json", action="store_true", help="log one JSON object per line")
    common(p)
    p.set_defaults(func=run)


class _Log:
    """One line per publish or notable event, flushed at once (a pipe to a log collector sees it)."""

    def __init__(self, as_json: bool, stream=None) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()
        self._full = False
        self._warned: set[str] = set()

    def _write(self, event: str, text: str, data: dict) -> None:
        ts = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        line = json_text({"ts": ts, "event": event, **data}) if self.as_json else f"{ts} {text}"
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def report(self, report, *, full: bool | None = None) -> None:
        """A publish, or (after a full reconcile) the news that nothing needed writing."""
        from ragtui.core.textsafe import neutralize, one_line

        if full is None:
            full, self._full = self._full, False

        for path, reason in report.skipped:
            self._write("skipped", f"skipped {neutralize(path)}: {reason}", {"path": path, "reason": reason})
        for warning in report.warnings:
            if warning not in self._warned:  # once, not at every periodic reconcile
                self._warned.add(warning)
                self._write("warning", f"warning: {neutralize(warning)}", {"message": warning})
        # Why every document was re-read (a damaged index, changed settings) belongs on the line itself.
        note = f"; note: {one_line(report.rebuilt, 500)}" if report.rebuilt else ""
        ms = report.seconds.get("total", 0.0) * 1000
        data = {"ms": round(ms, 1), **report.to_json()}
        if "latency" in report.seconds:
            data["latency_ms"] = round(report.seconds["latency"] * 1000, 1)
        if report.published:
            what = ", ".join(
                f"{len(names)} {verb}{_names(names, neutralize)}"
                for verb, names in (("added", report.added), ("changed", report.changed), ("removed", report.removed))
                if names
            ) or "rewritten"
            text = (f"published {report.index_id}: {what}; {report.chunks_embedded} chunks embedded, "
                    f"{report.chunks_total} in the index; {ms:.0f} ms{note}")
            self._write("publish", text, data)
        elif full:
            text = f"index {report.index_id} is up to date ({report.unchanged} documents, {report.chunks_total} chunks); {ms:.0f} ms"
            self._write("up-to-date", text, data)

    def event(self, ev) -> None:
        if ev.kind == "batch":
            return  # the publish line says what the batch changed
        if ev.kind == "reconcile":
            # The agent calls back in order, so the next report is this reconcile's:
            # only then does "nothing to write" deserve a line.
            self._full = True
            if ev.data.get("reason") == "start":
                return  # the publish or up-to-date line that follows says it
        self._write(ev.kind, ev.message, {"message": ev.message, **ev.data})

    def error(self, exc: BaseException) -> None:
        self._write("error", f"error: {exc}", {"message": str(exc), "type": type(exc).__name__})


def _names(names: list[str], neutralize) -> str:
    shown = ", ".join(neutralize(n) for n in names[:3])
    more = f" +{len(names) - 3} more" if len(names) > 3 else ""
    return f" ({shown}{more})"


class _StopSignal(Exception):
    """Raised in the main thread by the SIGINT/SIGTERM handler."""


def _raise_stop(signum, frame) -> None:
    raise _StopSignal(signal.Signals(signum).name)


def run(args) -> int:
    from ragtui.watch.memory import IDLE_RELEASE_SECONDS, release_freed_memory, retain_freed_memory

    settings, folder, index_id, rules = app.folder_settings(args.folder, "watch", **folder_values(args))
    if args.quiet_ms < 0:
        raise UsageError(f"--quiet-ms must be at least 0 (got {args.quiet_ms})")
    if args.poll_seconds <= 0 or args.reconcile_every < 0:
        raise UsageError("--poll-seconds must be positive and --reconcile-every at least 0")
    log = _Log(args.json)
    embedder = app.open_embedder(settings)
    app.prepare_root(settings)  # a root that cannot be written fails now, not at the first publish
    agent = app.build_agent(
        settings,
        folder,
        rules,
        index_id=index_id,
        embedder=embedder,
        quiet_seconds=args.quiet_ms / 1000,
        reconcile_every=args.reconcile_every or None,
        poll=args.poll,
        poll_seconds=args.poll_seconds,
        on_sync=log.report,
        on_event=log.event,
        on_error=log.error,
        on_idle=lambda: None if release_freed_memory() else None,
        idle_seconds=IDLE_RELEASE_SECONDS,
    )
    if args.once:
        agent.run_once()  # logged through on_sync
        return 0

    # This process is the agent's alone: keep the memory one sync frees for the next (the agent returns it
    # when idle, through on_idle). A setting of the whole process, which glibc cannot restore: never in the library.
    retain_freed_memory()
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        agent.start()
        try:
            while not agent.join(timeout=3600):
                pass
        except _StopSignal as sig:
            log.event(_stopping(str(sig)))
            # A second signal while we wait ends the wait; the publish is atomic either way.
            agent.stop(timeout=None)
    except _StopSignal:
        return 130
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if agent.error is not None:
        raise agent.error  # cli.main prints it as one line and maps its exit code
    return 0


def _stopping(signame: str):
    from ragtui.watch import AgentEvent

    return AgentEvent("stopping", f"{signame}: stopping (a publish under way completes)", {"signal": signame})
