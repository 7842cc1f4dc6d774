"""The ``ragtui`` command: parse arguments, call one function per subcommand, map errors to exit codes.

Only the parser's skeleton and the global flags live here: each subcommand is
a module of ``ragtui.commands``, and what they share (settings, which index,
the embedder, the watch agent) is ``ragtui.app``. Nothing imports this module
but ``__main__``.

Exit codes (every command): 0 success · 1 nothing found · 2 bad usage or bad
input · 3 index or storage integrity failure, or an embedding backend that
failed. Errors are one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import NoReturn, cast

from ragtui.core.errors import RagtuiError

__all__ = ["main"]

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_FAILURE = 0, 1, 2, 3


_ARGV: list[str] = []
"""The arguments being parsed, for the hint about a query that begins with '-'."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one actionable line, exit 2
        hint = self._dash_hint()
        self.exit(EXIT_USAGE, f"ragtui: error: {message}{hint} (see `{self.prog} --help`)\n")

    def _dash_hint(self) -> str:
        """A word of the command line that starts with '-' and is no option of this command: most likely a
        query or question that begins with '-', which goes after ``--``."""
        positional = [a.dest for a in self._actions if not a.option_strings and a.dest in ("query", "question")]
        if not positional:
            return ""
        for word in _ARGV[: _ARGV.index("--")] if "--" in _ARGV else _ARGV:
            if len(word) > 1 and word.startswith("-") and word not in self._option_string_actions \
                    and word.split("=", 1)[0] not in self._option_string_actions and not self._joined(word):
                return (f"; a {positional[0]} that begins with '-' goes after --: "
                        f"{self.prog} -- {word}")
        return ""

    def _joined(self, word: str) -> bool:
        """Whether ``word`` is a short option with its value joined (``-k10``)."""
        action = self._option_string_actions.get(word[:2])
        if action is None or not callable(action.type):
            return False
        try:
            action.type(word[2:])
        except (TypeError, ValueError):
            return False
        return True


class _Commands(argparse._SubParsersAction):
    """The subcommands, listed from ``ragtui.commands.COMMANDS``; each module is imported when its command is parsed.

    So ``ragtui --version`` and ``ragtui --help`` import no command module (nor
    what they import: the application layer, numpy). ``load`` builds one
    command's parser; ``build_parser(lazy=False)`` builds them all.
    """

    common: object = None
    helps: dict[str, str | None]

    def add_listed(self, name: str, help: str) -> None:  # noqa: A002 - argparse's own word
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help))
        self._name_parser_map[name] = None  # a known choice whose parser is not built yet

    def load(self, name: str) -> argparse.ArgumentParser:
        if self._name_parser_map.get(name) is None:
            import importlib

            # Our own modules are never optional: one that fails to import is a bug, reported by
            # main() as an internal error, not a command that quietly vanishes.
            importlib.import_module(f"ragtui.commands.{name}").register(self, self.common)
        return self._name_parser_map[name]

    def add_parser(self, name, **kwargs):  # called by a command module's register()
        self.helps[name] = kwargs.pop("help", None)  # listed already, from COMMANDS
        kwargs.setdefault("prog", f"{self._prog_prefix} {name}")
        parser = self._parser_class(**kwargs)
        self._name_parser_map[name] = parser
        return parser

    def __call__(self, parser, namespace, values, option_string=None):
        self.load(values[0])
        super().__call__(parser, namespace, values, option_string)


_CONFIG_HELP = ("a ragtui.toml to use instead of ./ragtui.toml, trusted to set base_url and api_key_env "
                "(default: ~/.config/ragtui/ragtui.toml, then ./ragtui.toml)")


_ARTIFACTS_HELP = ("artifacts root (default: $RAGTUI_ARTIFACTS, else /artifacts when it exists and is writable, "
                   "else ~/.local/share/ragtui; `ragtui info` says which)")


def _common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps a value given before the subcommand (`ragtui --artifacts X search q`).
    p.add_argument("--artifacts", metavar="DIR", default=argparse.SUPPRESS,
                   help=_ARTIFACTS_HELP)
    p.add_argument("--index", metavar="ID", default=argparse.SUPPRESS,
                   help="index id (default: the only index, or the folder's name)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=_CONFIG_HELP)


def build_parser(lazy: bool = False) -> argparse.ArgumentParser:
    """The ``ragtui`` parser; ``lazy``: build a command's own parser only when it is parsed (``main``)."""
    parser = _Parser(
        prog="ragtui",
        description="Local retrieval you can watch and look into. "
        "With no command, opens the terminal UI on an index.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--config", metavar="FILE", help=_CONFIG_HELP)
    parser.add_argument("--artifacts", metavar="DIR", help=_ARTIFACTS_HELP)
    parser.add_argument("--index", metavar="ID", help="the index to open in the UI")
    parser.add_argument("--watch", metavar="FOLDER", help="UI: also run the sync agent on FOLDER in-process")
    from ragtui.commands.options import add_rerank_options

    add_rerank_options(parser)  # the UI's; `x` turns reranking on and off there
    parser.add_argument("--version", action=_Version)
    sub = cast("_Commands", parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                                  action=_Commands))
    sub.common, sub.helps = _common, {}

    from ragtui.commands import COMMANDS

    for name, help_line in COMMANDS.items():
        sub.add_listed(name, help_line)
    if not lazy:
        for name in COMMANDS:
            sub.load(name)
    return parser


def _version() -> str:
    from ragtui import __version__

    return __version__


class _Version(argparse._VersionAction):
    """``--version``: the package metadata is read when the flag is given (importing
    ``importlib.metadata`` costs every other command tens of milliseconds)."""

    def __call__(self, parser, namespace, values, option_string=None):
        self.version = f"ragtui {_version()}"
        super().__call__(parser, namespace, values, option_string)


def _launch_tui(args) -> int:
    from ragtui.tui.launch import launch  # an import failure here is an internal error (exit 3)

    return launch(args)


def _internal_error(e: BaseException, debug: bool) -> int:
    """A bug (or a broken install of ours): one line, the traceback with --debug, exit 3."""
    if debug:
        traceback.print_exc()
    from ragtui.core.textsafe import one_line

    print(f"ragtui: internal error: {type(e).__name__}: {one_line(str(e), 2000)} (run with --debug for details)",
          file=sys.stderr)
    return EXIT_FAILURE


def main(argv: list[str] | None = None) -> int:
    from ragtui.terminal import safe_stdio

    # Everything printed below passes the neutraliser: a name or message from outside is shown, never obeyed.
    with safe_stdio():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _ARGV[:] = argv
    try:
        parser = build_parser(lazy=True)
        args = parser.parse_args(argv)  # imports the module of the command it names, and only that one
    except Exception as e:  # noqa: BLE001 - one of our modules failed to import
        return _internal_error(e, "--debug" in argv)
    debug = getattr(args, "debug", False) or "--debug" in argv
    if args.command is None:
        args.func = _launch_tui
    args.build_parser = build_parser  # `ragtui completion` reads every command's options (nothing imports cli)
    try:
        return args.func(args)
    except RagtuiError as e:
        if debug:
            traceback.print_exc()
        from ragtui.core.textsafe import one_line

        # Messages may quote paths or text from documents: keep them to one safe line.
        print(f"ragtui: error: {one_line(str(e), 2000)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("ragtui: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        # Bounds keep every read of a file to what its format allows; this is what is left (a legitimately
        # huge index, or a tight `ulimit -v`). Not a bug to report, but the process cannot go on.
        if debug:
            traceback.print_exc()
        print("ragtui: error: out of memory (the index or a document may be too large for the memory "
              "available; check `ulimit -v`)", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`); not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:  # a bug: still one line, and the traceback on request
        return _internal_error(e, debug)
