"""`gcpause.Collector`: a check runs as a stage with the cyclic collector paused; the reference
cycles it left are collected when it ends. Only the `FREEZING` collector an entry point chooses
freezes what survives; the library's default leaves no lasting change to the collector."""

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
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize("collector", [gcpause.SCOPED, gcpause.FREEZING])
def test_a_stage_pauses_the_collector_and_collects_its_cycles(
    unfrozen: None, collector: gcpause.Collector
) -> None:
    assert gc.isenabled()
    with collector.stage():
        assert not gc.isenabled()
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # a cycle: reference counting alone cannot free it
    assert gc.isenabled()
    assert gone() is None


def test_the_freezing_collector_freezes_what_a_stage_leaves_alive(unfrozen: None) -> None:
    gcpause.FREEZING.settled()
    before = gc.get_freeze_count()
    with gcpause.FREEZING.stage():
        kept = [_Node() for _ in range(100)]
    assert gc.get_freeze_count() >= before + 100
    assert len(kept) == 100


def test_the_default_collector_leaves_nothing_frozen(unfrozen: None) -> None:
    gcpause.SCOPED.settled()
    with gcpause.SCOPED.stage():
        kept = [_Node() for _ in range(100)]
    assert gc.get_freeze_count() == 0
    assert len(kept) == 100


def test_a_pipeline_run_leaves_the_collector_as_it_found_it(unfrozen: None) -> None:
    from gpuaudit.app import config, pipeline

    outcome = pipeline.run(config.for_scan({"demo": True, "format": "json", "output": None}))
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    assert outcome.exit_code == 0
