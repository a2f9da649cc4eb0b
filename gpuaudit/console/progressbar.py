"""Progress on a terminal: one transient line on stderr per stage of a run (loading a snapshot,
querying Prometheus, listing Kubernetes objects, building the inventory, running the checks),
cleared when the stage ends, so that the report printed after it starts on a clean screen.

Nothing is shown with `--quiet` or when stderr is not a terminal (a pipe, a file, CI logs): a
progress display there is noise in a log.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from gpuaudit.core import progress
from gpuaudit.report.text import terminal


def for_run(quiet: bool) -> progress.Progress:
    """The progress display of one run: on stderr when it is a terminal and not `quiet`."""
    if quiet or not sys.stderr.isatty():
        return progress.SILENT
    return TerminalProgress(Console(stderr=True))


class TerminalProgress:
    """Each stage draws its own transient bar and clears it when it ends."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def stage(self, label: str, unit: str = "") -> AbstractContextManager[progress.Stage]:
        return self._stage(label, unit)

    @contextmanager
    def _stage(self, label: str, unit: str) -> Iterator[progress.Stage]:
        columns: list[ProgressColumn | str] = [TextColumn(label, markup=False), BarColumn()]
        if unit == "bytes":
            columns.append(DownloadColumn())
        elif unit:
            columns += [MofNCompleteColumn(), TextColumn(unit, markup=False)]
        columns.append(TimeElapsedColumn())
        if unit:
            # The estimate of the time left, from the pace so far: a large live scan's
            # queries take minutes, and the user should know whether to wait.
            columns += [TextColumn("left"), TimeRemainingColumn(compact=True)]
        columns.append(TextColumn("{task.fields[note]}", markup=False))
        # stdout is left alone: only the report goes there, after the stage.
        with Progress(*columns, transient=True, console=self.console, redirect_stdout=False) as bar:
            yield _Stage(bar, bar.add_task(label, total=None, note=""))


class _Stage:
    def __init__(self, bar: Progress, task: TaskID) -> None:
        self.bar, self.task = bar, task

    def __call__(self, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done, total=total or None)

    def note(self, text: str) -> None:
        # Notes name cluster objects: made harmless like every other name on a terminal.
        self.bar.update(self.task, note=terminal(text, 60))
