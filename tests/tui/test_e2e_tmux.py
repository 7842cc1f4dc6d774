"""End to end: the installed ``ragtui`` in a real terminal (tmux), driven by keys, read off the screen.

The index is built by the installed ``ragtui ingest`` with the real default
embedder, so vector search runs with the model a person gets. Skipped, with
the reason, where tmux or the command is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tui import DEMO

RAGTUI = shutil.which("ragtui", path=str(Path(sys.executable).parent)) or shutil.which("ragtui")
WAIT = 60.0

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
    pytest.mark.skipif(RAGTUI is None, reason="the ragtui command is not installed (pip install -e .)"),
]


class Terminal:
    """One tmux server of our own (its own socket), one window of ``width`` × ``height``."""

    def __init__(self, tmp: Path, width: int = 100, height: int = 30) -> None:
        self.socket = str(tmp / "tmux.sock")
        self.width, self.height = width, height

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=check, timeout=30)

    def start(self, argv: list[str]) -> None:
        env = {**os.environ, "TERM": "xterm-256color"}
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "e2e",
                        "-x", str(self.width), "-y", str(self.height), *argv],
                       env=env, check=True, timeout=30)

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "e2e", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "e2e", "-l", text)

    def screen(self) -> str:
        result = self.tmux("capture-pane", "-p", "-t", "e2e", check=False)
        return result.stdout if result.returncode == 0 else ""

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "e2e", check=False).returncode == 0

    def wait_for(self, what: str, predicate) -> str:
        """The screen once ``predicate(screen)`` holds (polled: a terminal has no events to wait on)."""
        deadline = time.monotonic() + WAIT
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{text}")
            time.sleep(0.1)

    def close(self) -> None:
        self.tmux("kill-server", check=False)


def test_a_person_searches_compares_and_quits(tmp_path):
    folder = tmp_path / "src" / "demo"
    shutil.copytree(DEMO, folder)
    artifacts = tmp_path / "artifacts"
    subprocess.run([RAGTUI, "ingest", str(folder), "--artifacts", str(artifacts), "--quiet",
                    "--max-tokens", "64", "--overlap", "8"], check=True, capture_output=True, timeout=300)

    record = tmp_path / "editor-args"
    editor = tmp_path / "fake-editor"
    editor.write_text(  # shows what it got on the terminal it was handed, then waits for Enter
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {record}\n'
        'echo "FAKE EDITOR got: $*"\n'
        "read line\n"
    )
    editor.chmod(0o755)
    term = Terminal(tmp_path)
    term.start(["env", f"EDITOR={editor}", RAGTUI, "--artifacts", str(artifacts)])
    try:
        term.wait_for("the index and the embedder", lambda s: "demo ·" in s and "vectors on" in s)
        term.type("bm25 ranking")
        screen = term.wait_for("BM25 results", lambda s: "demo/retrievers.md#" in s)
        assert re.search(r"^\s*1\s+\d+\.\d\d\s+demo/", screen, re.M)  # rank, a BM25 score, a chunk_id
        assert "ms" in screen and "k 10" in screen

        term.send("F1")  # flat: cosine scores have four decimals
        term.wait_for("flat results", lambda s: re.search(r"^\s*1\s+0\.\d{4}\s+demo/", s, re.M))

        # A terminal sends ESC then "v" as alt+v when they arrive together: wait for the
        # escape to show (the footer lists the results keys) before the next key, as a person would.
        term.send("Escape")
        term.wait_for("the results keys", lambda s: "Open source" in s)
        term.send("v")
        screen = term.wait_for("the compare view", lambda s: "IVF recall@10 vs flat" in s)
        assert "overlap@10" in screen

        term.send("Escape")
        term.wait_for("the search screen", lambda s: "Open source" in s)
        term.send("Enter")  # jump to the first result's source
        term.wait_for("the source view", lambda s: "fresh" in s and "markdown" in s and "$EDITOR" in s)
        term.send("e")  # the app hands the terminal to $EDITOR and takes it back
        screen = term.wait_for("the editor", lambda s: "FAKE EDITOR got: +" in s)
        assert "Open source" not in screen  # the app is suspended, not drawn over the editor
        line, path = record.read_text().split()
        assert line.startswith("+") and path.endswith(".md") and Path(path).is_file()
        term.send("Enter")
        term.wait_for("the app again", lambda s: "$EDITOR" in s and "FAKE EDITOR" not in s)

        term.send("Escape")
        term.wait_for("the search screen", lambda s: "Open source" in s)
        term.send("?")
        term.wait_for("the help", lambda s: "ragtui help" in s)
        term.send("Escape")
        term.wait_for("the search screen again", lambda s: "Open source" in s)

        term.send("C-q")
        deadline = time.monotonic() + WAIT
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not term.alive(), "ragtui did not quit on ctrl+q"
    finally:
        term.close()


def test_a_watch_folder_that_is_not_one_is_refused_before_the_ui_starts(tmp_path):
    result = subprocess.run([RAGTUI, "--artifacts", str(tmp_path), "--watch", str(tmp_path / "nope")],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert "--watch" in result.stderr and "not a folder" in result.stderr
