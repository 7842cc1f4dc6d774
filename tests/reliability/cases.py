"""Reliability cases: one ``Case`` per thing tried, produced by one generator per class of fault.

A generator (``kill_cases(size)``, ``corrupt_cases(size)``, ...) returns the cases of its class at a
size: ``CI`` for the tests, ``FULL`` for bench/reliability.py. A case has an ``id`` (its pytest id)
and a ``check(tmp)`` that runs it in a fresh folder and raises ``AssertionError`` (a plain ``assert``
with a message) when ragtui breaks its promise. The tests parametrise over the cases; the bench
script calls the same checks and counts them per class for the docs tables.

Where one case per test would make setup too slow (thousands of generated corruptions), the tests
run ``groups(cases, key)``: one test per meaningful unit (a file kind and a block of seeds), which
stops at the first failing case and fails with its details.

What several cases share (a fork server, a loopback embedding server, a base index built once) comes
from ``shared(key, factory)``: made on first use, kept for the rest of the run (the test session or
the bench run) and closed at its end by ``close_shared()``.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

CI, FULL = "ci", "full"
"""The two sizes: what the tests run, and what bench/reliability.py runs for the docs tables."""


@dataclass(frozen=True)
class Case:
    id: str
    check: Callable[[Path], None] = field(compare=False)
    count: int = 1
    """How many cases this one stands for (a group counts each of its members)."""

    def __repr__(self) -> str:
        return self.id

    def __call__(self, tmp: Path) -> None:
        self.check(tmp)


def ids(cases: Iterable[Case]) -> list[str]:
    return [c.id for c in cases]


def params(cases: Iterable[Case]) -> list[Any]:
    """``pytest.param(case, id=case.id)`` for each case: the argument list of a parametrised test."""
    import pytest

    return [pytest.param(c, id=c.id) for c in cases]


def groups(cases: Iterable[Case], key: Callable[[Case], str], one_folder: bool = False) -> list[Case]:
    """The cases gathered by ``key`` (in order): each group runs its members in turn, each in its own
    folder (``one_folder``: all in the group's, for checks that replace what they change), and fails at
    the first that fails, naming it."""
    gathered: dict[str, list[Case]] = {}
    for case in cases:
        gathered.setdefault(key(case), []).append(case)

    def run_all(members: list[Case]) -> Callable[[Path], None]:
        def check(tmp: Path) -> None:
            for i, member in enumerate(members):
                where = tmp if one_folder else tmp / f"c{i}"
                where.mkdir(parents=True, exist_ok=True)
                try:
                    member.check(where)
                except AssertionError as e:
                    raise AssertionError(f"case {member.id}: {e}") from e
                if not one_folder:
                    shutil.rmtree(where, ignore_errors=True)

        return check

    return [Case(name, run_all(members), sum(m.count for m in members)) for name, members in gathered.items()]


# -- what cases share ----------------------------------------------------------------------------

_stack = contextlib.ExitStack()
_made: dict[Hashable, Any] = {}


def shared(key: Hashable, factory: Callable[[], Any]) -> Any:
    """``factory()`` once per run for ``key``; a context manager is entered and exited at the end."""
    if key not in _made:
        value = factory()
        if hasattr(value, "__enter__") and hasattr(value, "__exit__") and not isinstance(value, PurePath):
            value = _stack.enter_context(value)
        _made[key] = value
    return _made[key]


def shared_dir(name: str) -> Path:
    """A folder kept for the run, for what several cases build once."""
    root = shared("shared-root", lambda: tempfile.TemporaryDirectory(prefix="ragtui-reliability-"))
    path = Path(root) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def once(key: Hashable, build: Callable[[Path], Any]) -> Any:
    """``build(folder)`` once per run for ``key``, in its own shared folder; its result after that."""
    return shared(("once", key), lambda: build(shared_dir(f"once-{len(_made)}")))


def close_shared() -> None:
    _made.clear()
    _stack.close()


def fork_server():
    """The fork server every case of the run shares (helpers_child)."""
    from tests.reliability.helpers_child import ForkServer

    return shared("fork-server", ForkServer)


def embed_server():
    """A loopback embedding server every case of the run shares."""
    from tests.helpers.embed_server import EmbedServer

    return shared("embed-server", EmbedServer)
