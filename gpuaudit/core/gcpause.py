"""Pausing Python's cyclic garbage collector around allocation-heavy stages.

Parsing a large snapshot and joining it into tables allocates millions of small objects
(labels, samples) and creates no reference cycles. Each allocation burst triggers collections
that traverse every live object, which at 10,000 GPUs cost more than the parsing itself;
reference counting still frees everything as usual while the collector is paused.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


_settled = False
"""Whether `settled` was called: `stage` then freezes what each stage leaves alive too."""


def settled() -> None:
    """Say that what exists now lives until the audit ends (the inventory, once built): the
    collector stops traversing it (`gc.freeze`). Objects made later are collected as usual;
    reference counting frees the frozen ones as usual too, only their reference cycles are no
    longer looked for."""
    global _settled
    gc.freeze()
    _settled = True


@contextmanager
def stage() -> Iterator[None]:
    """One stage of an audit (a check): the collector paused while it runs, then one
    collection of the reference cycles among the objects it made, and, after `settled`, what
    it leaves alive (the views it made) frozen too. At 100,000 GPUs the collector otherwise
    ran some 4,400 times during the checks and the plan (3.7 s), each full collection walking
    every view made so far."""
    with paused():
        yield
    gc.collect(0)  # what the stage made is all in the youngest generation
    if _settled:
        gc.freeze()
