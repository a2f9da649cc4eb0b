"""Pausing Python's cyclic garbage collector around allocation-heavy stages.

Parsing a large snapshot and joining it into tables allocates millions of small objects
(labels, samples) and creates no reference cycles. Each allocation burst triggers collections
that traverse every live object, and at fleet scale those traversals cost more than the parsing
itself (`benchmarks/README.md` has the figures); reference counting still frees everything as
usual while the collector is paused.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector for the block (restored afterwards, also on errors)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def without_gc(f: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run `f` with the cyclic collector paused (see `paused`)."""

    @functools.wraps(f)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with paused():
            return f(*args, **kwargs)

    return run


@dataclass(frozen=True)
class Collector:
    """How one audit treats Python's cyclic collector, chosen by whoever owns the process.

    Library code never changes the collector for longer than a block: the default, `SCOPED`,
    pauses it while a stage runs and restores it after. Freezing survivors (`gc.freeze`) lasts
    for the rest of the process, so only an entry point whose process ends with the command asks
    for it (`FREEZING`, `gpuaudit.cli`); a test session or any long-lived caller keeps `SCOPED`.
    """

    freeze: bool = False
    """Freeze what exists once the audit has settled, and what each stage leaves alive."""

    def settled(self) -> None:
        """Say that what exists now lives until the audit ends (the inventory, once built).
        With `freeze`, the collector stops traversing it (`gc.freeze`); reference counting
        frees frozen objects as usual, only their reference cycles are no longer looked for."""
        if self.freeze:
            gc.freeze()

    @contextmanager
    def stage(self) -> Iterator[None]:
        """One stage of an audit (a check): the collector paused while it runs, then one
        collection of the reference cycles among the objects it made, and with `freeze` what
        it leaves alive (the views it made) frozen too, so that later collections do not walk
        every view made so far again."""
        with paused():
            yield
        gc.collect(0)  # what the stage made is all in the youngest generation
        if self.freeze:
            gc.freeze()


SCOPED = Collector()
"""Pauses only: nothing outlives a stage. The default of every library call."""
FREEZING = Collector(freeze=True)
"""For a process of one command (the console script)."""
