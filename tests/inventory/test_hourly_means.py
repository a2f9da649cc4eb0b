"""The window means of activity, utilisation and power are those of their hourly means, each
bucket weighed by its samples (`catalogue.HOURLY_MEANS`): the same whether the buckets were read
raw or from the hourly recording rules. An older snapshot's window sums are read as before."""

from __future__ import annotations

import copy

import pytest

from gpuaudit.inventory import build
from gpuaudit.inventory import columns as C
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.prometheus import catalogue
from tests.support.factories import Series, gpu_labels
from tests.support.factories import snapshot as make_snapshot


def _snap() -> Snapshot:
    # A pod that started 40 minutes into its first hour: 20 samples there, 60 in the next.
    prof = Series(
        gpu_labels(uuid="GPU-0", gpu="0", pod="a", namespace="ml"),
        act=[0.8, 0.2],
        samples=[20, 60],
        power=150.0,
    )
    # No profiling series: GPU_UTIL is the activity.
    util = Series(
        gpu_labels(uuid="GPU-1", gpu="1", pod="b", namespace="ml"),
        act=[None, None],
        util=[50.0, 10.0],
        samples=[20, 60],
    )
    return make_snapshot([prof, util], hours=2)


def _row(snap: Snapshot, pod: str) -> dict[str, object]:
    h = build(snap).holdings
    rows = h[h[C.POD] == pod].to_dict("records")
    assert len(rows) == 1
    return rows[0]


def test_window_means_are_the_hourly_means_weighed_by_their_samples() -> None:
    snap = _snap()
    assert not {"act_sum", "util_sum", "power_sum", "power_count"} & set(snap.prometheus)
    a, b = _row(snap, "a"), _row(snap, "b")
    assert a[C.ACT_MEAN] == pytest.approx((0.8 * 20 + 0.2 * 60) / 80, rel=1e-15)
    assert a[C.ACT_COUNT] == 80
    assert a[C.POWER_MEAN] == 150.0
    assert b[C.ACT_SOURCE] == catalogue.UTIL
    assert b[C.ACT_MEAN] == pytest.approx((0.5 * 20 + 0.1 * 60) / 80, rel=1e-15)


def test_an_older_snapshots_window_sums_are_read_as_before() -> None:
    snap = _snap()
    prom = copy.deepcopy(dict(snap.prometheus))
    # The window sum says 0.5 a sample: the mean is read from it, not from the buckets.
    prom["act_sum"] = copy.deepcopy(prom["act_count"])
    for r in prom["act_sum"][0]["body"]["data"]["result"]:
        r["value"][1] = repr(0.5 * float(r["value"][1]))
    old = Snapshot(manifest=snap.manifest, kubernetes=snap.kubernetes, prometheus=prom)
    assert _row(old, "a")[C.ACT_MEAN] == 0.5
    # Without the window sum, the buckets give it.
    assert _row(snap, "a")[C.ACT_MEAN] != 0.5
