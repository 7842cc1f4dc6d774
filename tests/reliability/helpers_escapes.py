"""Escape sequences, bidi and tag characters in index metadata and names, markup in names, broken entries under rag/.

Every payload of ``PAYLOADS`` is put everywhere a string from outside can
sit: the folder name (hence the index id and every chunk_id), file names,
the ``meta.json`` fields ``embedding_model``, ``tokenizer`` and
``created_at``, the name of a broken entry under ``rag/``, and an embedding
server's error message. Then each surface that shows such strings is run
and its raw output checked: no ESC, no other C0 control but newline and
tab, no C1 control (decoded as characters), no bidi or tag character.

``run_cli`` runs the installed command (subprocesses; two surfaces in a
pseudo-terminal, where rich styles the output), ``run_tui`` the app under
Pilot, checking what Textual would write to the terminal, the SVG
screenshot, the window title and the clipboard. ``run_markup`` puts rich and
Textual markup in names; ``run_broken`` puts broken entries under ``rag/``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import pty
import re
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from tests.helpers.cli import ragtui_exe
from tests.reliability.cases import Case
from tests.reliability.helpers import write
from tests.unit.fakes import HashEmbedder

PAYLOADS = {
    "osc52": "\x1b]52;c;cm0gLXJmIH4=\x07",  # writes "rm -rf ~" into the clipboard
    "title": "\x1b]0;PWNED\x07\x1b[2J",  # retitles the window, clears the screen
    "csi": "\x1b[2J\x1b[5;5f\x1b[?1049h",  # clear, move, switch screen
    "c1": "\x9b2J\x9d0;T\x9c\x85",  # the same in 8-bit controls
    "bidi": "\u202egnp.exe\u202c\u200e\u200f\u061c\u2067x\u2069",  # overrides, marks, isolates
    "tags": "\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065",  # invisible "ignore"
    "c0": "\x07\x08\x7f\x0b\x0c\x01",  # bell, backspace, delete, VT, FF, SOH
}
"""Each is a valid file name on Linux (no "/", no NUL, no backslash: index ids refuse it). No CR or LF:
``core.citations`` refuses a reference that holds one, so such a chunk cannot be inspected at all
(CR and LF in names and text are covered by ``helpers_terminal`` and the hostile-names tests)."""

CI_CLI_PAYLOADS = ("osc52", "bidi")
CI_TUI_PAYLOADS = ("osc52", "c1", "bidi")

# The characters a terminal acts on or that reorder or hide text; written out here, not taken from ragtui.
_RAW_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u206f\U000e0000-\U000e007f]"
)


def raw_unsafe(text: str) -> list[str]:
    """The unsafe characters in ``text`` (newline and tab are allowed), as sorted reprs."""
    return sorted({repr(c) for c in _RAW_UNSAFE.findall(text)})


# What rich and Textual write on purpose to a terminal: SGR, cursor and mode changes, OSC 8 links, CR.
_OWN_SEQUENCES = re.compile(r"\x1b\[\??[0-9;:]*[mlhAKGH]|\x1b\]8;[^\x07\x1b]*(?:\x1b\\|\x07)|\r")


def terminal_unsafe(raw: str) -> list[str]:
    """``raw_unsafe`` of terminal output once the styling sequences of rich and Textual are taken out.

    No payload is of those shapes alone, so a payload that leaked still shows.
    """
    return raw_unsafe(_OWN_SEQUENCES.sub("", raw))


# -- the hostile index ------------------------------------------------------------------


@dataclass
class Hostile:
    base: Path
    payload: str
    folder: Path
    """The hostile folder: named ``evil<payload>``, holding files named with the payload."""
    art: Path
    """Artifacts root: the hostile index, a plain one beside it, and a broken entry named with the payload."""
    index_id: str
    chunk_id: str
    marker: str


def marker_of(name: str) -> str:
    return f"zq{name}marker"


def build_hostile(base: Path, name: str) -> Hostile:
    """The hostile folder and its index (built in-process with the test embedder)."""
    from ragtui.core.ingest.publish import rag_root
    from ragtui.core.ingest.sync import sync

    payload = PAYLOADS[name]
    marker = marker_of(name)
    index_id = f"evil{payload}"
    folder = base / "src" / index_id
    write(folder / f"a{payload}.md", f"{marker} alpha beta\n")
    write(folder / f"bin{payload}.txt", b"\x00binary")
    plain = write(base / "src" / "plain" / "p.md", "plain text gamma\n").parent
    art = base / "art"
    embedder = HashEmbedder(model=f"model{payload}")
    embedder.tokenizer.name = f"tok{payload}"
    with mock.patch("ragtui.core.ingest.writer.utc_now", return_value=f"2026-01-01T00:00:00Z{payload}"):
        sync(folder, artifacts=art, embedder=embedder, max_tokens=32, overlap=4)
        sync(plain, artifacts=art, embedder=HashEmbedder(), max_tokens=32, overlap=4)
    loop = rag_root(art) / f"loop{payload}"
    os.symlink(loop.name, loop)  # a link to itself
    return Hostile(base, payload, folder, art, index_id, f"{index_id}/a{payload}.md#0", marker)


# -- running the command ------------------------------------------------------------------


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTUI_")}
    env.update(extra or {})
    return env


def run(*args: str, env: dict | None = None, timeout: float = 300) -> tuple[int, str]:
    """(exit code, stdout + stderr decoded as strict UTF-8) of the installed command."""
    rc, out, err = run3(*args, env=env, timeout=timeout)
    return rc, out + err


def run3(*args: str, env: dict | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """(exit code, stdout, stderr), each decoded as strict UTF-8."""
    p = subprocess.run([*ragtui_exe(), *args], capture_output=True, env=_env(env), timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def run_tty(*args: str, env: dict | None = None, timeout: float = 300) -> tuple[int, str]:
    """(exit code, everything written) of the installed command with a pseudo-terminal as stdout and stderr."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen([*ragtui_exe(), *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            env=_env({"TERM": "xterm-256color", "COLUMNS": "160", **(env or {})}))
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                proc.kill()
                raise TimeoutError(f"ragtui {args[0]} did not finish")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc.wait(timeout=timeout), b"".join(chunks).decode("utf-8")


def _check(rc: int, out: str, codes: tuple[int, ...], *, visible: str | None = None, tty: bool = False) -> None:
    bad = terminal_unsafe(out) if tty else raw_unsafe(out)
    assert rc in codes, f"exit {rc}: {out[-600:]!r}"
    assert not bad, f"raw {bad} in {out[-600:]!r}"
    if visible is not None:
        assert visible in out, f"{visible!r} not shown in {out[-600:]!r}"


def cli_surfaces(h: Hostile, name: str):
    """(label, fn) for every CLI surface, each raising AssertionError when it fails."""
    art = ["--artifacts", str(h.art)]
    idx = ["--index", h.index_id]
    shown = "evil"  # the part of the index id before the payload: the name is shown, only made safe

    def ingest():
        rc, out = run("ingest", str(h.folder), "--artifacts", str(h.base / "art-ingest"))
        _check(rc, out, (0,), visible=shown)
        assert "skipped" in out and "bin" in out, out

    def info_list():
        rc, out = run("info", *art)
        _check(rc, out, (0,), visible=shown)
        assert "loop" in out and "not a usable index" in out, out  # the broken entry is named

    def info_index():
        rc, out = run("info", *art, *idx)
        _check(rc, out, (0,), visible="model")
        assert "tok" in out and "2026-01-01" in out, out

    def info_json():
        rc, out, err = run3("info", *art, *idx, "--json")
        _check(rc, out + err, (0,))
        meta = json.loads(out)
        assert (meta["embedding_model"], meta["index_id"]) == (f"model{h.payload}", h.index_id)  # data intact

    def info_list_json():
        rc, out, err = run3("info", *art, "--json")
        _check(rc, out + err, (0,))
        listing = json.loads(out)
        assert h.index_id in listing["indexes"] and listing["broken"][0]["index_id"] == f"loop{h.payload}"

    def search():
        rc, out = run("search", h.marker, *art, *idx)
        _check(rc, out, (0,), visible=shown)

    def search_json():
        rc, out, err = run3("search", h.marker, *art, *idx, "--json")
        _check(rc, out + err, (0,))
        assert json.loads(out)[0]["chunk_id"] == h.chunk_id

    def several_error():  # with no memory of the index used last (the surfaces above used one): ask
        rc, out = run("search", h.marker, *art, env={"XDG_STATE_HOME": str(h.base / "no-memory")})
        _check(rc, out, (2,), visible="several indexes")
        assert shown in out and "loop" in out, out

    def missing_error():
        rc, out = run("search", h.marker, *art, "--index", f"nope{h.payload}")
        _check(rc, out, (2,), visible="nope")

    def mismatch_error():
        rc, out = run("search", h.marker, *art, *idx, "--mode", "flat")
        _check(rc, out, (2,), visible="model")

    def inspect():
        rc, out = run("inspect", h.chunk_id, *art, "--root", str(h.folder.parent))
        _check(rc, out, (0,), visible="fresh")

    def inspect_check():
        rc, out = run("inspect", "--check", h.chunk_id, *art, "--root", str(h.folder.parent))
        _check(rc, out, (0,), visible="fresh")

    def inspect_json():
        rc, out, err = run3("inspect", "--json", h.chunk_id, *art, "--root", str(h.folder.parent))
        _check(rc, out + err, (0,))
        assert json.loads(out)["chunk_id"] == h.chunk_id

    def inspect_unknown():
        rc, out = run("inspect", f"{h.index_id}/zz{h.payload}.md#0", *art)
        _check(rc, out, (1,), visible="zz")

    def watch_once():
        rc, out = run("watch", "--once", str(h.folder), "--artifacts", str(h.base / "art-watch"))
        _check(rc, out, (0,), visible=shown)

    def watch_once_json():
        rc, out, err = run3("watch", "--once", "--json", str(h.folder), "--artifacts", str(h.base / "art-watch-json"))
        _check(rc, out + err, (0,))
        assert any(json.loads(line).get("index_id") == h.index_id for line in out.splitlines()), out

    def server_error():
        from tests.helpers.embed_server import EmbedServer, Fault

        with EmbedServer(HashEmbedder(), model="m") as server:
            server.queue(*[Fault("status", 400, message=f"bad input {h.payload} here")] * 4)
            rc, out = run("ingest", str(h.folder), "--artifacts", str(h.base / "art-server"),
                          env={"RAGTUI_EMBEDDER": "http", "RAGTUI_EMBED_URL": server.url, "RAGTUI_EMBED_MODEL": "m"})
        _check(rc, out, (3,), visible="bad input")

    def inspect_tty():
        rc, out = run_tty("inspect", h.chunk_id, *art, "--root", str(h.folder.parent))
        _check(rc, out, (0,), visible="fresh", tty=True)
        assert "\x1b[" in out  # rich did style it: this is the terminal path

    def ingest_tty():
        rc, out = run_tty("ingest", str(h.folder), "--artifacts", str(h.base / "art-ingest-tty"))
        _check(rc, out, (0,), visible=shown, tty=True)

    def dataset() -> Path:
        path = h.base / f"ds{h.payload}.json"
        path.write_text(json.dumps({"format": "ragtui-eval-dataset/1", "name": f"ds[b]{h.payload}", "queries": [
            {"id": f"q{h.payload}", "text": h.marker, "relevant_chunk_ids": [h.chunk_id]}]}), encoding="utf-8")
        return path

    def eval_report():
        rc, out = run("eval", str(dataset()), "--modes", "bm25", *art, *idx)
        _check(rc, out, (0,), visible="ds[b]")  # the dataset's name, as written: markup is not parsed

    def eval_tty():
        rc, out = run_tty("eval", str(dataset()), "--modes", "bm25", *art, *idx)
        _check(rc, out, (0,), visible="ds[b]", tty=True)

    return [(f.__name__, f) for f in (
        ingest, info_list, info_index, info_json, info_list_json, search, search_json, several_error,
        missing_error, mismatch_error, inspect, inspect_check, inspect_json, inspect_unknown, watch_once,
        watch_once_json, server_error, eval_report, inspect_tty, ingest_tty, eval_tty,
    )]


CLI_SURFACES = (
    "ingest", "info_list", "info_index", "info_json", "info_list_json", "search", "search_json", "several_error",
    "missing_error", "mismatch_error", "inspect", "inspect_check", "inspect_json", "inspect_unknown", "watch_once",
    "watch_once_json", "server_error", "eval_report", "inspect_tty", "ingest_tty", "eval_tty",
)
"""The CLI surfaces ``cli_surfaces`` checks (3 of them in a pty, 5 error paths)."""


def _hostile(name: str) -> Hostile:
    from tests.reliability.cases import once

    return once(("escapes", name), lambda base: build_hostile(base / name, name))


def escape_cli_cases(size: str = "ci") -> list[Case]:
    """Payloads x CLI surfaces: every surface's raw output holds no unsafe character (``osc52-search``)."""
    names = CI_CLI_PAYLOADS if size == "ci" else tuple(PAYLOADS)
    return [Case(f"{name}-{label}", functools.partial(_cli_surface, name, label)) for name in names for label in CLI_SURFACES]


def _cli_surface(name: str, label: str, _tmp: Path) -> None:
    dict(cli_surfaces(_hostile(name), name))[label]()


# -- the TUI ----------------------------------------------------------------------------------


def screen_output(app) -> str:
    """What Textual would write to the terminal for the whole current screen (and the screens beneath)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return update.render_segments(console)


def screen_text(app) -> str:
    """The characters on screen, without the terminal's own sequences."""
    return _OWN_SEQUENCES.sub("", screen_output(app))


def check_screen(app, *must_show: str) -> None:
    """Nothing unsafe in what the terminal would receive, nor in the SVG screenshot; ``must_show`` is on screen."""
    raw = screen_output(app)
    assert not terminal_unsafe(raw), f"terminal receives {terminal_unsafe(raw)}"
    svg = app.export_screenshot()
    assert not raw_unsafe(svg), f"screenshot holds {raw_unsafe(svg)}"
    for app_title in (app.title, app.sub_title, app.screen.title or "", app.screen.sub_title or ""):
        assert not raw_unsafe(app_title), f"title {app_title!r}"
    text = _OWN_SEQUENCES.sub("", raw)
    for what in must_show:
        assert what in text, f"{what!r} is not on screen"


async def _steps(label: str, steps, app=None) -> None:
    """Run each (name, coroutine function) in turn; the first that fails fails the session, named."""
    for name, step in steps:
        assert app is None or app.is_running, f"{label}: {name}: the app is no longer running"
        try:
            await step()
        except AssertionError as e:
            raise AssertionError(f"{label}: {name}: {e}") from e


def _failing_embedder(message: str):
    from ragtui.core.errors import EmbeddingError

    def factory(settings):
        raise EmbeddingError(message)

    return factory


def tui_session(h: Hostile, name: str) -> None:
    """One Pilot session on the hostile index: each view that shows its names or metadata, in turn."""
    from ragtui.core.textsafe import inline
    from ragtui.tui.screens.compare import CompareScreen
    from ragtui.tui.screens.indexes import IndexScreen
    from ragtui.tui.screens.source import SourceScreen
    from ragtui.tui.widgets.index_stats import IndexStatsView
    from tests.tui import make_app, settled, wait_for

    shown = inline(h.payload)  # the payload as visible stand-ins
    first = inline(h.payload[0])  # where a long name is cut, at least its first stand-in shows
    app = make_app(h.art, index=h.index_id, embedder_factory=_failing_embedder(f"server said {h.payload}"))

    async def scenario():
        async with app.run_test(size=(200, 50), notifications=True) as pilot:
            async def toast_shown() -> None:
                from textual.widgets._toast import Toast

                await wait_for(pilot, lambda: bool(app.query(Toast)), "a notification")
                await pilot.pause()

            async def status_line():
                await wait_for(pilot, lambda: app.index_state == "ready" and app.vectors == "off", "the index")
                await pilot.pause()
                check_screen(app, f"evil{shown}", f"model{shown}")

            async def results_and_detail():
                app.use_query(h.marker)
                await settled(pilot, h.marker)
                assert app.results is not None and [x.chunk_id for x in app.results.hits] == [h.chunk_id]
                app.main.results.focus()
                await settled(pilot)
                await wait_for(pilot, lambda: app.main.detail.citation is not None, "the citation")
                check_screen(app, f"evil{first}")

            async def copy_chunk_id():
                await pilot.press("c")
                await toast_shown()
                assert app.clipboard == inline(h.chunk_id) and not raw_unsafe(app.clipboard), repr(app.clipboard)
                check_screen(app, "copied")

            async def vector_mode_refused():
                app.clear_notifications()
                app.action_set_mode("flat")
                await toast_shown()
                check_screen(app, "server said")

            async def source_view():
                app.action_jump(h.chunk_id)
                await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
                await pilot.pause()
                check_screen(app, f"evil{first}")
                app.pop_screen()

            async def compare_view():
                app.action_compare()
                await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.outcome is not None,
                               "the comparison")
                await pilot.pause()
                check_screen(app, "server said")
                app.pop_screen()

            async def index_picker():
                app.action_pick_index()
                await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen) and app.screen.broken, "the picker")
                view = app.screen.query_one(IndexStatsView)
                await wait_for(pilot, lambda: view.stats is not None, "the stats")
                await pilot.pause()
                check_screen(app, f"loop{first}", f"tok{first}", "2026-01-01")
                app.pop_screen()

            await _steps(name, [
                ("status line", status_line), ("results and detail", results_and_detail),
                ("copy chunk_id", copy_chunk_id), ("vector mode refused", vector_mode_refused),
                ("source view", source_view), ("compare view", compare_view), ("index picker", index_picker),
            ], app)

    asyncio.run(scenario())


TUI_STEPS = 7


def escape_tui_cases(size: str = "ci") -> list[Case]:
    """Payloads x TUI views: one Pilot session per payload, its views in turn (each counts as a case)."""
    names = CI_TUI_PAYLOADS if size == "ci" else tuple(PAYLOADS)
    return [Case(name, functools.partial(_tui_session, name), TUI_STEPS) for name in names]


def _tui_session(name: str, base: Path) -> None:
    tui_session(build_hostile(base / name, name), name)


# -- markup in names --------------------------------------------------------------------------

MARKUP_NAMES = (
    "[draft] notes.md",  # a plain tag: markup would swallow it
    "y[link=http:].md",  # a malformed link: markup raised MarkupError
    "[b]bold[/b].md",
    "[@click=app.quit]q.md",  # an action: markup would make it clickable
    "x[/].md",  # a closing tag with nothing open
    "[red]hot :smile:.md",
)
MARKUP_INDEX = "[red]idx"
"""A second index whose id (its folder's name) is markup, for the picker."""


def markup_cases(size: str = "ci") -> list[Case]:
    """Markup in file and index names: one Pilot session, each name in 4 views, then the index picker."""
    return [Case("session", check_markup, len(MARKUP_NAMES) * 4 + 1)]


def check_markup(base: Path) -> None:
    """Markup in file and index names, in each TUI view that shows names: shown literally, never parsed."""
    from ragtui.core.ingest.sync import sync
    from ragtui.tui.screens.compare import CompareScreen
    from ragtui.tui.screens.indexes import IndexScreen
    from ragtui.tui.screens.source import SourceScreen
    from tests.tui import make_app, settled, wait_for

    folder = base / "src" / "d2"
    for i, name in enumerate(MARKUP_NAMES):
        write(folder / name, f"zqmark{i} notes about markup\n")
    other = write(base / "src" / MARKUP_INDEX / "o.md", "other index\n").parent
    art = base / "art"
    for f in (folder, other):
        sync(f, artifacts=art, embedder=HashEmbedder(), max_tokens=32, overlap=4)
    app = make_app(art, index="d2")

    async def scenario():
        async with app.run_test(size=(200, 50), notifications=True) as pilot:
            await wait_for(pilot, lambda: app.index_state == "ready" and app.vectors == "ready", "the index")
            steps = []
            for i, name in enumerate(MARKUP_NAMES):
                chunk_id = f"d2/{name}#0"

                async def results(i=i, chunk_id=chunk_id):
                    app.use_query(f"zqmark{i}")
                    await settled(pilot, f"zqmark{i}")
                    assert [h.chunk_id for h in app.results.hits] == [chunk_id]
                    app.main.results.focus()
                    await settled(pilot)
                    await wait_for(pilot, lambda: app.main.detail.citation is not None, "the citation")
                    check_screen(app, chunk_id)

                async def copy(chunk_id=chunk_id):
                    from textual.widgets._toast import Toast

                    app.clear_notifications()
                    await pilot.press("c")
                    await wait_for(pilot, lambda: bool(app.query(Toast)), "the notification")
                    await pilot.pause()
                    assert app.clipboard == chunk_id and app.is_running
                    check_screen(app, f"copied {chunk_id}")

                async def source(name=name):
                    app.action_jump()
                    await wait_for(pilot, lambda: isinstance(app.screen, SourceScreen), "the source view")
                    await pilot.pause()
                    check_screen(app, f"d2/{name}")
                    app.pop_screen()

                async def compare(name=name):
                    app.action_compare()
                    await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.outcome is not None,
                                   "the comparison")
                    await pilot.pause()
                    check_screen(app, f"{name}#0")
                    app.pop_screen()

                steps += [(f"{name}: results and detail", results), (f"{name}: copy", copy),
                          (f"{name}: source view", source), (f"{name}: compare view", compare)]

            async def picker():
                from ragtui.tui.widgets.index_stats import IndexStatsView

                app.action_pick_index()
                await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen) and app.screen.names, "the picker")
                await pilot.press("down")
                view = app.screen.query_one(IndexStatsView)
                await wait_for(pilot, lambda: view.stats is not None and view.stats.index_id == MARKUP_INDEX, "stats")
                await pilot.pause()
                check_screen(app, MARKUP_INDEX, f"  {MARKUP_INDEX}")
                app.pop_screen()

            steps.append(("index picker", picker))
            await _steps("markup", steps, app)
            assert app.is_running

    asyncio.run(scenario())


# -- broken entries under rag/ ----------------------------------------------------------------

BROKEN_KINDS = ("self-loop", "two-link loop", "dangling link", "link to a file")
CI_BROKEN_KINDS = ("self-loop", "dangling link")


def make_broken(rag: Path, kind: str) -> list[str]:
    """Put a broken entry of ``kind`` under ``rag``; the names of the entries made."""
    rag.mkdir(parents=True, exist_ok=True)
    if kind == "self-loop":
        os.symlink("bad", rag / "bad")
        return ["bad"]
    if kind == "two-link loop":
        os.symlink("bad2", rag / "bad1")
        os.symlink("bad1", rag / "bad2")
        return ["bad1", "bad2"]
    if kind == "dangling link":
        os.symlink(".gen/bad/g-gone", rag / "bad")
        return ["bad"]
    write(rag.parent / "stray.txt", "not an index\n")
    os.symlink("../stray.txt", rag / "bad")
    return ["bad"]


BROKEN_CHECKS = ("info", "info --json", "search", "inspect", "TUI picker", "info, nothing else",
                 "search, nothing else", "TUI, nothing else")


def broken_cases(size: str = "ci") -> list[Case]:
    """Broken entries under rag/, beside a good index and alone: every command and the TUI name them."""
    kinds = CI_BROKEN_KINDS if size == "ci" else BROKEN_KINDS
    return [Case(f"{kind}-{label}".replace(" ", "-").replace(",", ""), functools.partial(_broken, kind, label))
            for kind in kinds for label in BROKEN_CHECKS]


def _broken(kind: str, label: str, _tmp: Path) -> None:
    dict(broken_checks(kind))[label]()


def _broken_setup(kind: str):
    from ragtui.core.ingest.sync import sync
    from tests.reliability.cases import once

    def build(root: Path):
        good = write(root / "src" / "good" / "g.md", "zqgood words here\n").parent
        with_good, alone = root / "with-good", root / "alone"
        sync(good, artifacts=with_good, embedder=HashEmbedder(), max_tokens=32, overlap=4)
        bad = make_broken(with_good / "rag", kind)
        make_broken(alone / "rag", kind)
        return good, with_good, alone, bad

    return once(("broken", kind), build)


def broken_checks(kind: str):
    """(label, check) for each of ``BROKEN_CHECKS`` on the entries of ``kind``."""
    from tests.tui import make_app, wait_for

    good, with_good, alone, bad = _broken_setup(kind)

    def named(out: str, bad=bad) -> bool:
        return all(f"rag/{b} is not a usable index" in out for b in bad)

    def info_good(art=with_good, named=named):
        rc, out, err = run3("info", "--artifacts", str(art))
        assert rc == 0 and out.split() == ["good"] and named(err), (rc, out, err)

    def info_json(art=with_good, bad=bad):
        rc, out, _err = run3("info", "--json", "--artifacts", str(art))
        listing = json.loads(out)
        assert rc == 0 and listing["indexes"] == ["good"] and [b["index_id"] for b in listing["broken"]] == bad

    def search_good(art=with_good, named=named):
        rc, out, err = run3("search", "zqgood", "--artifacts", str(art))
        assert rc == 0 and "good/g.md#0" in out and named(err) and "using good" in err, (rc, out, err)

    def inspect_good(art=with_good, root=good.parent):
        rc, out, err = run3("inspect", "good/g.md#0", "--artifacts", str(art), "--root", str(root))
        assert rc == 0 and "fresh" in out, (rc, out, err)

    def info_alone(art=alone, named=named):
        rc, out, err = run3("info", "--artifacts", str(art))  # no usable index: exit 2, as search
        assert rc == 2 and out == "" and named(err) and err.startswith("ragtui: error: no index"), (rc, out, err)

    def search_alone(art=alone, named=named):
        rc, out, err = run3("search", "zqgood", "--artifacts", str(art))
        assert rc == 2 and named(err) and err.startswith("ragtui: error: no index") and err.count("\n") == 1, err

    def tui_picker(art=with_good, bad=bad):
        from ragtui.tui.screens.indexes import IndexScreen

        app = make_app(art)

        async def scenario():
            async with app.run_test(size=(160, 40)) as pilot:
                await wait_for(pilot, lambda: app.index_state == "ready", "the good index to open")
                app.action_pick_index()
                await wait_for(pilot, lambda: isinstance(app.screen, IndexScreen) and app.screen.broken, "picker")
                await pilot.pause()
                assert app.screen.names == ["good"] and [b for b, _ in app.screen.broken] == bad
                check_screen(app, *(f"✗ {b}:" for b in bad))

        asyncio.run(scenario())

    def tui_alone(art=alone, bad=bad):
        app = make_app(art)

        async def scenario():
            async with app.run_test(size=(160, 40)) as pilot:
                await wait_for(pilot, lambda: app.index_state == "missing", "the missing notice")
                await pilot.pause()
                check_screen(app, "Not usable as an index", *(f"{b}: " for b in bad))

        asyncio.run(scenario())

    return list(zip(BROKEN_CHECKS, (info_good, info_json, search_good, inspect_good, tui_picker, info_alone,
                                    search_alone, tui_alone)))
