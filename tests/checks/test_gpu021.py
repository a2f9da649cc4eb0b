from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu021_oversized_reservation as gpu021
from gpuaudit.checks.findings import Finding, Severity
from tests.support.factories import Series, gpu_labels, inventory, make_pod, run_check

H100_MIB, L40S_MIB = 81559.0, 46068.0


def _run(series: list[Series], hours: int = 48, **kw: Any) -> list[Finding]:
    return run_check(gpu021, inventory(series, hours, **kw))


def _held(
    used: float, act: float = 0.04, hours: int = 48, total: float = H100_MIB, **kw: Any
) -> Series:
    lab = gpu_labels(pod="embed-0", namespace="search", **kw)
    return Series(lab, act=[act] * hours, fb_used=used, fb_free=total - used)


def test_a_small_model_on_a_whole_h100_fits_a_mig_slice() -> None:
    pod = make_pod("embed-0", "search", owner=("StatefulSet", "embed"))
    (f,) = _run([_held(6000.0)], pods=[pod])
    assert f.code == "GPU021" and f.severity is Severity.MEDIUM
    assert f.impact.gpu_hours == pytest.approx(48 * 6 / 7)
    assert f.impact.cost == pytest.approx(48 * 6 / 7 * 6.88)
    assert f.message == (
        "Pod search/embed-0 held a whole H100 80GB HBM3 for 48 h but peaked at 5.9 GiB and "
        "4 % engine activity (p95 of its busiest hour): a 1g.10gb MIG slice fits it."
    )
    assert f.evidence["p95_of"] == "the busiest hour"
    # No node pool is known for the pod: the repartitioning step comes in parentheses.
    assert f.recommendation == (
        "On nodes partitioned into MIG slices, request `nvidia.com/mig-1g.10gb: 1` for "
        "StatefulSet search/embed instead of a whole GPU (if none are, repartition some first: "
        "with the GPU Operator, label them `nvidia.com/mig.config=all-1g.10gb` or a mixed "
        "layout holding it, under the mixed MIG strategy); it frees 41 GPU-hours over this "
        "window."
    )


def test_compute_picks_a_larger_slice() -> None:
    """20 % activity needs 25 % to spare: 2 of 7 slices (29 %) are the smallest that cover it."""
    (f,) = _run([_held(6000.0, act=0.2)])
    assert f.evidence["fits"] == "2g.20gb"


def test_without_mig_half_a_time_sliced_gpu_fits() -> None:
    lab: dict[str, Any] = {"model": "NVIDIA L40S"}
    (f,) = _run([_held(15000.0, total=L40S_MIB, **lab)])
    assert f.evidence["fits"] == "a half of a time-sliced GPU"
    assert f.impact.gpu_hours == pytest.approx(24)
    assert f.recommendation.startswith("Run pod search/embed-0 on a time-sliced GPU")


def test_near_miss_held_under_a_day() -> None:
    assert _run([_held(6000.0, hours=20)], hours=20) == []


def test_near_miss_a_model_that_needs_the_whole_card() -> None:
    assert _run([_held(60000.0)]) == []


def test_near_miss_too_busy_for_a_slice() -> None:
    assert _run([_held(6000.0, act=0.7)]) == []


def test_near_miss_busy_in_one_hour_needs_the_whole_card_then() -> None:
    # 4 % for 47 hours and 70 % in one: the p95 over the window's hours was 4 % (a 1g slice),
    # the busiest hour's p95 is 70 %, which 70 % x 1.25 of 7 slices leaves no profile for.
    s = _held(6000.0)
    s.act[20] = 0.7
    assert _run([s]) == []


def test_near_miss_pods_with_two_gpus_are_not_resized() -> None:
    a = _held(6000.0)
    b = Series(
        gpu_labels(uuid="G1", gpu="1", pod="embed-0", namespace="search"),
        act=[0.04] * 48,
        fb_used=6000.0,
        fb_free=H100_MIB - 6000.0,
    )
    assert _run([a, b]) == []


def test_thresholds_are_settings() -> None:
    inv = inventory([_held(6000.0, hours=20)], 20)
    (f,) = run_check(gpu021, inv, oversized_min_hours=12)
    assert f.severity is Severity.LOW  # 20 h x 6/7 = 17 freed GPU-hours
