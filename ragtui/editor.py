"""Opening a source file at a line in the person's editor: one launcher for ``inspect --open`` and the TUI's ``e``.

The editor is ``$VISUAL``, else ``$EDITOR`` (neither set: a ``UsageError`` saying to set one, in the
TUI as in ``inspect --open``: no editor is guessed); its value is split as
a shell would split it (``code --wait``), never run through a shell. How it
takes a line depends on its family, read from ``FAMILIES`` by the program's
name (its path and a ``.exe`` left out)::

    plus       vim +12 FILE           vi, nvim, nano, emacs, micro, kak... and any editor not listed
    colon      hx FILE:12             helix, Sublime Text, Zed
    goto       code --goto FILE:12    VS Code and its forks
    jetbrains  idea --line 12 FILE    the JetBrains IDEs
    textmate   mate -l 12 FILE

An editor not listed gets ``+LINE FILE``, which most terminal editors read. Without a line, every family
gets ``FILE``. A value that cannot be split (an unclosed quote) or is empty is a ``UsageError`` naming
the variable to fix. Imports nothing beyond the standard library and ``core.errors``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from ragtui.core.errors import UsageError

__all__ = ["FAMILIES", "editor_command", "editor_family"]

FAMILIES: dict[str, frozenset[str]] = {
    "plus": frozenset({"vi", "vim", "nvim", "gvim", "mvim", "view", "nano", "pico", "emacs", "emacsclient", "micro",
                       "kak", "joe", "jed", "ne", "mg", "mcedit", "gedit"}),
    "colon": frozenset({"hx", "helix", "subl", "sublime_text", "zed", "zeditor"}),
    "goto": frozenset({"code", "code-insiders", "codium", "vscodium", "cursor", "windsurf"}),
    "jetbrains": frozenset({"idea", "pycharm", "charm", "webstorm", "goland", "clion", "rubymine", "phpstorm",
                            "rider", "studio"}),
    "textmate": frozenset({"mate"}),
}
"""Editors by how they take a line (the module docstring); a name in none of them is treated as "plus"."""


def editor_family(program: str) -> str:
    """The family of an editor program (a name or a path): a key of ``FAMILIES``."""
    name = os.path.basename(program).removesuffix(".exe")
    return next((family for family, names in FAMILIES.items() if name in names), "plus")


def editor_command(path: str | os.PathLike[str], line: int | None, environ: Mapping[str, str] | None = None
                   ) -> list[str]:
    """The argv that opens ``path`` at ``line`` (1-based; None: the top) in the person's editor."""
    env = os.environ if environ is None else environ
    source = "VISUAL" if env.get("VISUAL") else "EDITOR" if env.get("EDITOR") else ""
    if not source:
        raise UsageError("no editor set: set $VISUAL or $EDITOR to your editor, e.g. export EDITOR=vim")
    value = env[source]
    try:
        argv = shlex.split(value)
    except ValueError as e:
        raise UsageError(f"cannot read ${source} {value!r} as a command ({e}): set it to an editor, "
                         "e.g. EDITOR=vim") from None
    if not argv:
        raise UsageError(f"${source} holds no command: set it to an editor, e.g. EDITOR=vim")
    file = str(Path(path))
    if line is None:
        return [*argv, file]
    family = editor_family(argv[0])
    if family == "colon":
        return [*argv, f"{file}:{line}"]
    if family == "goto":
        return [*argv, "--goto", f"{file}:{line}"]
    if family == "jetbrains":
        return [*argv, "--line", str(line), file]
    if family == "textmate":
        return [*argv, "-l", str(line), file]
    return [*argv, f"+{line}", file]
