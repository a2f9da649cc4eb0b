"""`gcpause.stage`: a check runs with the cyclic collector paused; the reference cycles it
left are collected when it ends, and once the audit has `settled`, what it leaves alive is
frozen so that later collections do not walk it again."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gpuaudit.core import gcpause


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unsettled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(gcpause, "_settled", False)
    yield
    gc.unfreeze()


def test_a_stage_pauses_the_collector_and_collects_its_cycles(unsettled: None) -> None:
    assert gc.isenabled()
    with gcpause.stage():
        assert not gc.isenabled()
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # a cycle: reference counting alone cannot free it
    assert gc.isenabled()
    assert gone() is None


def test_after_settling_what_a_stage_leaves_alive_is_frozen(unsettled: None) -> None:
    gcpause.settled()
    before = gc.get_freeze_count()
    with gcpause.stage():
        kept = [_Node() for _ in range(100)]
    assert gc.get_freeze_count() >= before + 100
    assert len(kept) == 100
