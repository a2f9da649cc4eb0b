from __future__ import annotations

import pytest

from gpuaudit.checks import gpu002_idle_tail as gpu002
from gpuaudit.checks.findings import Confidence, Finding, Severity
from tests.support.factories import (
    START,
    STEP,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_pod,
    run_check,
)


def _run(series: list[Series], hours: int, **kw: object) -> list[Finding]:
    return run_check(gpu002, inventory(series, hours, **kw))  # type: ignore[arg-type]


def _pod(act: list[float | None], uuid: str = "G0", gpu: str = "0", pod: str = "ft-0") -> Series:
    return Series(gpu_labels(uuid=uuid, gpu=gpu, pod=pod, namespace="ml"), act=act)


def test_a_finished_job_that_keeps_its_gpu_is_reported() -> None:
    s = _pod([0.8] * 10 + [0.01] * 8)
    pod = make_pod("ft-0", owner=("Job", "ft"))
    (f,) = _run([s], 18, pods=[pod])
    assert f.code == "GPU002" and f.severity is Severity.LOW
    assert (f.resource.kind, f.resource.namespace, f.resource.name) == ("Pod", "ml", "ft-0")
    assert f.impact.gpu_hours == pytest.approx(8)
    assert f.impact.cost == pytest.approx(8 * 6.88)
    assert f.message == (
        "Pod ml/ft-0 has held 1 GPU (H100 80GB HBM3) idle for the last 8 h after working "
        "earlier (busiest hour 80 % engine activity); it still holds them. Confidence medium: "
        "no power draw was measured on its GPUs (framebuffer use not measured)."
    )
    assert f.confidence is Confidence.MEDIUM
    assert f.recommendation.startswith("Stop Job ml/ft now;")
    assert f.evidence["idle_tail_hours"] == 8 and f.evidence["owner"] == "Job/ft"
    # The tail starts with the 11th hour of the window: the capacity plan releases from there.
    assert f.evidence["idle_tail_from"] == iso(START + 10 * STEP)


def test_impact_counts_every_gpu_and_sets_the_severity() -> None:
    act: list[float | None] = [0.8] * 10 + [0.01] * 12
    found = _run([_pod(act), _pod(act, "G1", "1")], 22)
    (f,) = found
    assert f.impact.gpu_hours == pytest.approx(24) and f.severity is Severity.MEDIUM
    assert "held 2 GPUs" in f.message


def test_near_miss_a_tail_under_six_hours_stays_quiet() -> None:
    assert _run([_pod([0.8] * 10 + [0.01] * 5)], 15) == []


def test_near_miss_never_active_stays_quiet() -> None:
    """Idle all along (GPU001's case), not an idle tail: no hour reached 20 %."""
    assert _run([_pod([0.15] * 10 + [0.01] * 8)], 18) == []


def test_near_miss_a_daily_pattern_is_not_an_end() -> None:
    """An earlier idle run at least as long as the tail: a recurring pattern (GPU003)."""
    act: list[float | None] = [0.8] * 2 + [0.01] * 10 + [0.8] * 2 + [0.01] * 8
    assert _run([_pod(act)], 22) == []


def test_near_miss_released_before_the_end_stays_quiet() -> None:
    assert _run([_pod([0.8] * 10 + [0.01] * 8 + [None] * 2)], 20) == []


def test_thresholds_are_settings() -> None:
    inv = inventory([_pod([0.8] * 10 + [0.01] * 5)], 15)
    (f,) = run_check(gpu002, inv, idle_tail_hours=4)
    assert f.impact.gpu_hours == pytest.approx(5)
    assert run_check(gpu002, inv, idle_tail_hours=4, active_activity=0.9) == []


def test_power_is_stated_but_cannot_speak_for_the_tail() -> None:
    s = _pod([0.8] * 10 + [0.01] * 8)
    s.power, s.fb_used, s.fb_free = 400.0, 1000.0, 80559.0
    (f,) = _run([s], 18)
    assert f.confidence is Confidence.MEDIUM
    assert f.evidence["power_mean_w"] == 400.0
    assert f.evidence["power_share_of_max"] == pytest.approx(400 / 700, abs=1e-4)
    assert "active hours included" in f.evidence["power_corroboration"]
    assert "its GPUs drew 400 W on average (57 % of their 700 W board power)" in f.message


def test_noise_floor_and_missing_hours() -> None:
    # A tail at 6 % is not idle; under a 10 % floor it counts as 0 and is.
    s = _pod([0.8] * 10 + [0.06] * 8)
    assert _run([s], 18) == []
    (f,) = run_check(gpu002, inventory([s], 18), activity_noise_floor=0.1)
    assert f.evidence["tail_mean_activity"] == 0.0
    # An hour without data is never counted as idle, whatever the floor: 7 of the last 8.
    gap = _pod([0.8] * 10 + [0.06] * 4 + [None] + [0.06] * 3)
    (f,) = run_check(gpu002, inventory([gap], 18), activity_noise_floor=0.1)
    assert f.evidence["idle_tail_hours"] == 7
    assert f.impact.gpu_hours == pytest.approx(7)
