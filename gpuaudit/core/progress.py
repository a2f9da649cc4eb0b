"""What a long run reports as it goes: stages (loading a snapshot, querying Prometheus, listing
Kubernetes objects, building the inventory, running the checks), each with a count of what is
done out of how much, and a short note.

The pipeline opens the stages and the sources and checks tick them; the command line decides
how they look (a transient bar on stderr, on a terminal only). `SILENT` shows nothing. Only the
standard library is imported, so that any layer may take a `Progress`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol


class Stage(Protocol):
    """One stage under way: `stage(done, total)` as the work goes (total 0: not known yet),
    `stage.note(text)` for a short line about what is being done."""

    def __call__(self, done: int, total: int) -> None: ...

    def note(self, text: str) -> None: ...


class Progress(Protocol):
    """Opens stages. `unit` says what is counted: `bytes` (shown as sizes) or a plural noun
    (`queries`, `checks`); empty for a stage that is not counted."""

    def stage(self, label: str, unit: str = "") -> AbstractContextManager[Stage]: ...


class _Quiet:
    def __call__(self, done: int, total: int) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class _Silent:
    @contextmanager
    def _stage(self) -> Iterator[Stage]:
        yield _Quiet()

    def stage(self, label: str, unit: str = "") -> AbstractContextManager[Stage]:
        return self._stage()


SILENT: Progress = _Silent()
"""Shows nothing: for `--quiet`, output that is not a terminal, and library use."""
