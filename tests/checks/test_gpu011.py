"""GPU011 a straggler in a gang: the one slow member named with its node, the peers' GPU-hours
spent waiting, the near-misses and the skip without the violation counters. Figures by hand."""

from __future__ import annotations

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu011_gang_straggler as gpu011
from gpuaudit.checks.findings import Severity
from tests.support.factories import START, Series, gpu_labels, inventory, make_pod, run_check

HOURS = 10
META = {
    "labels": {"kueue.x-k8s.io/pod-group-name": "bert"},
    "annotations": {"kueue.x-k8s.io/pod-group-total-count": "4"},
}


def _member(i: int, act: float, power_s: float = 0.0, **health: float) -> Series:
    lab = gpu_labels(uuid=f"G{i}", gpu=str(i), pod=f"bert-{i}", namespace="ml")
    counters = {
        "power_violation_increase_hourly": power_s * 1e9,
        "thermal_violation_increase_hourly": 0.0,
    }
    return Series(lab, act=[act] * HOURS, health={**counters, **health})


def _pods(n: int = 4) -> list[dict[str, object]]:
    return [make_pod(f"bert-{i}", started=START, **META) for i in range(n)]  # type: ignore[arg-type]


def test_the_one_throttled_member_holds_its_peers_back() -> None:
    # bert-2 throttled 14,400 of 36,000 s (0.4) at 0.9 activity; its 3 peers at 0.55 each wait
    # (0.9 - 0.55) x 10 GPU-hours = 3.5 GPU-hours: 10.5 in all.
    series = [_member(i, 0.55) for i in (0, 1, 3)] + [_member(2, 0.9, power_s=14400.0)]
    (f,) = run_check(gpu011, inventory(series, HOURS, pods=_pods()))
    assert f.code == "GPU011" and f.severity is Severity.LOW
    assert (f.resource.kind, f.resource.namespace, f.resource.name) == ("Workload", "ml", "bert")
    assert f.resource.node == "node-a" and f.resource.gpus == 4.0
    assert f.impact.gpu_hours == pytest.approx(10.5)
    assert f.message == (
        "Workload ml/bert (4 members) waited for member ml/bert-2 on node node-a: its GPU was "
        "throttled by its power limit 40 % of the time, and its peers ran at a median 55 % "
        "engine activity against its 90 %, 10.5 GPU-hours of their time spent waiting for it."
    )
    assert f.evidence["straggler"]["pod"] == "ml/bert-2"
    assert f.evidence["activity_gap"] == pytest.approx(0.35)
    assert "Move ml/bert-2 off node node-a" in f.recommendation


def test_a_lower_sm_clock_is_slow_too() -> None:
    # No throttling; bert-0's SM clock 1,500 MHz against its peers' 1,980 (24 % below).
    clock = {"sm_clock_sum": 0.0, "sm_clock_count": 600.0}
    series = [_member(i, 0.5, **{**clock, "sm_clock_sum": 1980.0 * 600}) for i in (1, 2, 3)] + [
        _member(0, 0.8, **{**clock, "sm_clock_sum": 1500.0 * 600})
    ]
    (f,) = run_check(gpu011, inventory(series, HOURS, pods=_pods()))
    assert "SM clock averaged 1,500 MHz against its peers' 1,980 MHz" in f.message
    assert f.impact.gpu_hours == pytest.approx(3 * 0.3 * 10)


@pytest.mark.parametrize(
    "series",
    [
        # throttled, but its peers kept pace (0.85 vs 0.9: a gap of 0.05 < 0.10)
        [_member(i, 0.85) for i in (0, 1, 3)] + [_member(2, 0.9, power_s=14400.0)],
        # two members throttled: a node or fleet problem (GPU071), no single straggler
        [_member(0, 0.5), _member(1, 0.5)]
        + [_member(2, 0.9, power_s=14400.0), _member(3, 0.9, power_s=9000.0)],
        # nobody slow
        [_member(i, 0.5) for i in (0, 1, 2)] + [_member(3, 0.9)],
    ],
)
def test_near_misses_stay_quiet(series: list[Series]) -> None:
    assert run_check(gpu011, inventory(series, HOURS, pods=_pods())) == []


def test_a_member_whose_throttling_is_unmeasured_decides_nothing() -> None:
    bare = Series(gpu_labels(uuid="G0", gpu="0", pod="bert-0", namespace="ml"), act=[0.5] * HOURS)
    series = [bare, _member(1, 0.5), _member(3, 0.5), _member(2, 0.9, power_s=14400.0)]
    assert run_check(gpu011, inventory(series, HOURS, pods=_pods())) == []


def test_skipped_with_the_reason_without_the_violation_counters() -> None:
    series = [Series(gpu_labels(pod=f"bert-{i}", namespace="ml"), act=[0.5] * HOURS) for i in (0,)]
    check = by_code("GPU011")
    assert check is not None
    result = run_checks(inventory(series, HOURS, pods=_pods(1)), Settings(), (check,))
    (skip,) = result.skipped
    assert skip.code == "GPU011" and "DCGM_FI_DEV_POWER_VIOLATION" in skip.reason
