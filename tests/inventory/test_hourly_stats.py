"""The hourly statistics that replace window p95s, XID onsets and counter increases: the
inventory reduces each series' buckets to its window figure (the largest bucket p95, the sum of
the buckets' onsets and increases), exactly however the buckets were cut into time chunks, and
reads an older snapshot's window forms as before. Figures by hand."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from gpuaudit.inventory import Capability, build
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.parse import Parser
from gpuaudit.snapshot import Snapshot
from tests.support.factories import START, STEP, Series, gpu_labels, snapshot

HOURS = 6
LAB = gpu_labels(pod="trainer-0", namespace="ml")


def _entry(rtype: str, result: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "query": "q",
        "params": {},
        "body": {"status": "success", "data": {"resultType": rtype, "result": result}},
    }


def _matrix(labels: dict[str, str], points: dict[int, float]) -> dict[str, Any]:
    """A series with a value at the end of each bucket `i` given (0 is the first)."""
    values = [[START + (i + 1) * STEP, repr(v)] for i, v in sorted(points.items())]
    return {"metric": dict(labels), "values": values}


def _vector(labels: dict[str, str], v: float) -> dict[str, Any]:
    return {"metric": dict(labels), "value": [START + HOURS * STEP, repr(v)]}


def _with(snap: Snapshot, **answers: list[dict[str, Any]]) -> Snapshot:
    """`snap` with these query answers (each a list of chunk entries) instead of its own."""
    prom = {**snap.prometheus, **answers}
    return dataclasses.replace(snap, prometheus=prom)


def _without(snap: Snapshot, *qids: str) -> Snapshot:
    prom = {k: v for k, v in snap.prometheus.items() if k not in qids}
    return dataclasses.replace(snap, prometheus=prom)


def _base() -> Snapshot:
    return snapshot([Series(LAB, act=[0.5] * HOURS, fb_used=1000.0, fb_free=9000.0)], HOURS)


def _row(snap: Snapshot) -> Any:
    (row,) = build(snap).holdings.itertuples(index=False)
    return row


def test_the_p95_is_the_largest_bucket_p95_over_every_chunk() -> None:
    snap = _with(
        _base(),
        act_p95_hourly=[
            _entry("matrix", [_matrix(LAB, {0: 0.2, 1: 0.9, 2: 0.3})]),
            _entry("matrix", [_matrix(LAB, {3: 0.4, 4: 0.6, 5: 0.1})]),
        ],
        fb_used_p95_hourly=[
            _entry("matrix", [_matrix(LAB, {0: 1000.0, 1: 1200.0, 2: 1100.0})]),
            _entry("matrix", [_matrix(LAB, {3: 8000.0, 4: 1000.0, 5: 1000.0})]),
        ],
    )
    row = _row(snap)
    assert getattr(row, C.ACT_P95) == 0.9
    assert getattr(row, C.FB_USED_P95) == 8000.0
    # Exact whatever the chunks: not flagged as approximate.
    assert not getattr(row, C.ACT_APPROX)


def test_an_older_snapshot_reads_its_window_p95_as_before() -> None:
    snap = _without(_base(), "act_p95_hourly", "util_p95_hourly", "fb_used_p95_hourly")
    one = _row(_with(snap, act_p95=[_entry("vector", [_vector(LAB, 0.35)])]))
    assert getattr(one, C.ACT_P95) == 0.35 and not getattr(one, C.ACT_APPROX)
    chunks = [_entry("vector", [_vector(LAB, 0.35)]), _entry("vector", [_vector(LAB, 0.5)])]
    two = _row(_with(snap, act_p95=chunks))
    # Over two chunks: the larger chunk p95, an upper bound flagged as approximate.
    assert getattr(two, C.ACT_P95) == 0.5 and getattr(two, C.ACT_APPROX)
    # The checks say their p95 is over the window, not of the fullest hour.
    assert build(_with(snap, act_p95=chunks)).p95_of_window
    assert not build(_base()).p95_of_window


def _xid(code: int) -> dict[str, str]:
    return dict(LAB, err_code=str(code), err_msg=f"xid {code}")


def test_xid_onsets_add_up_over_buckets_and_chunks() -> None:
    snap = _with(
        _base(),
        xid_max=[_entry("vector", [_vector(_xid(13), 13.0), _vector(_xid(79), 79.0)])],
        xid_events_hourly=[
            # Only the buckets with an onset are answered.
            _entry("matrix", [_matrix(_xid(13), {0: 1.0, 2: 2.0}), _matrix(_xid(79), {1: 1.0})]),
            _entry("matrix", [_matrix(_xid(13), {4: 1.0})]),
        ],
    )
    assert getattr(_row(snap), C.XID_EVENTS) == "13:4,79:1"


def test_an_older_snapshot_reads_its_window_xid_events_as_before() -> None:
    snap = _without(_base(), "xid_events_hourly")
    snap = _with(
        snap,
        xid_max=[_entry("vector", [_vector(_xid(13), 13.0)])],
        xid_events=[_entry("vector", [_vector(_xid(13), 2.0)])],
    )
    assert getattr(_row(snap), C.XID_EVENTS) == "13:2"


def test_violation_increases_add_up_over_buckets_and_chunks() -> None:
    ns = 1e9
    snap = _with(
        _base(),
        power_violation_increase_hourly=[
            _entry("matrix", [_matrix(LAB, {0: 600 * ns, 1: 0.0, 2: 1200 * ns})]),
            _entry("matrix", [_matrix(LAB, {3: 0.0, 4: 0.0, 5: 300.5 * ns})]),
        ],
        thermal_violation_increase_hourly=[
            _entry("matrix", [_matrix(LAB, dict.fromkeys(range(6), 0.0))])
        ],
    )
    row = _row(snap)
    assert getattr(row, C.POWER_VIOLATION_S) == 2100.5
    # Answered, all zero: measured, none (not missing).
    assert getattr(row, C.THERMAL_VIOLATION_S) == 0.0


def test_an_older_snapshot_reads_its_window_increase_as_before() -> None:
    snap = _without(_base(), "power_violation_increase_hourly", "thermal_violation_increase_hourly")
    row = _row(_with(snap, power_violation_increase=[_entry("vector", [_vector(LAB, 7.25e9)])]))
    assert getattr(row, C.POWER_VIOLATION_S) == 7.25
    assert np.isnan(getattr(row, C.THERMAL_VIOLATION_S))


def test_reduced_skips_series_without_points() -> None:
    other = gpu_labels(uuid="GPU-1", gpu="1", pod="b", namespace="ml")
    third = gpu_labels(uuid="GPU-2", gpu="2", pod="c", namespace="ml")
    snap = _with(
        _base(),
        power_violation_increase_hourly=[
            _entry(
                "matrix",
                [
                    _matrix(LAB, {0: 1.0, 1: 2.0}),
                    {"metric": other, "values": []},
                    _matrix(third, {2: 5.0}),
                ],
            )
        ],
    )
    p = Parser(snap)
    k, v = p.reduced("power_violation_increase_hourly")
    assert [p.keys[i][1:] for i in k.tolist()] == [("ml", "trainer-0"), ("ml", "c")]
    assert v.tolist() == [3.0, 5.0]
    p95 = Parser(_with(_base(), act_p95_hourly=[_entry("matrix", [_matrix(LAB, {0: 0.5})])]))
    assert p95.reduced("act_p95_hourly")[1].tolist() == pytest.approx([0.5])


def test_a_narrowed_window_has_the_increases_of_its_own_buckets() -> None:
    ns = 1e9
    snap = _with(
        _base(),
        power_violation_increase_hourly=[
            _entry("matrix", [_matrix(LAB, {0: 600 * ns, 1: 60 * ns, 2: 1200 * ns})]),
            _entry("matrix", [_matrix(LAB, {3: 10 * ns, 4: 0.0, 5: 300.5 * ns})]),
        ],
    )
    # The last three buckets: (start + 3 h, start + 6 h].
    inv = build(snap, window=(START + 3 * STEP, START + HOURS * STEP))
    (row,) = inv.holdings.itertuples(index=False)
    assert getattr(row, C.POWER_VIOLATION_S) == 310.5
    assert Capability.THROTTLING in inv.capabilities
    # What was recorded for the whole window only stays missing.
    assert np.isnan(getattr(row, C.SM_CLOCK_MEAN))
    assert Capability.FRAMEBUFFER not in inv.capabilities


def test_a_narrowed_older_snapshot_has_no_increases() -> None:
    snap = _without(_base(), "power_violation_increase_hourly", "thermal_violation_increase_hourly")
    snap = _with(snap, power_violation_increase=[_entry("vector", [_vector(LAB, 7.25e9)])])
    inv = build(snap, window=(START + 3 * STEP, START + HOURS * STEP))
    assert np.isnan(getattr(next(inv.holdings.itertuples(index=False)), C.POWER_VIOLATION_S))
    assert Capability.THROTTLING not in inv.capabilities
    assert "whole window only" in inv.missing[Capability.THROTTLING]
