"""A progress display for long commands: a rich bar on a terminal, nothing otherwise.

``update(stage, done, total)`` matches the ``progress`` callback that core's
sync and evaluation take, so core itself never imports rich.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    """Context manager; one bar per stage ("scan", "chunk", "embed", ...)."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self._bar: Any = None  # a rich Progress while shown
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> ProgressDisplay:
        if self.show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            from ragtui.terminal import console

            # The remaining time matters for slow embedders (a transformer embeds ~10 chunks/s on 2 cores).
            self._bar = Progress(
                TextColumn("{task.description:>7}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(),
                transient=True, console=console(stderr=True),
            )
            self._bar.__enter__()
        return self

    def update(self, stage: str, done: int, total: int) -> None:
        if self._bar is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._bar.add_task(stage, total=total)
        self._bar.update(self._tasks[stage], completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
