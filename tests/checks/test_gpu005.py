"""GPU005 slow start, on hand-computed inventories (buckets of 1 h, a sample a minute)."""

from __future__ import annotations

import pytest

from gpuaudit.checks import gpu005_slow_start as gpu005
from gpuaudit.checks.findings import Finding, Severity
from tests.support.factories import START, Series, gpu_labels, inventory, make_pod, run_check


def _pod_series(acts: list[float | None], gpus: int = 2, pod: str = "llm-0") -> list[Series]:
    return [
        Series(gpu_labels(uuid=f"G{i}", gpu=str(i), pod=pod, namespace="serve"), act=list(acts))
        for i in range(gpus)
    ]


def _run(acts: list[float | None], started: float | None = START, **kw: float) -> list[Finding]:
    pods = [make_pod("llm-0", namespace="serve", gpus=2, started=started)]
    return run_check(gpu005, inventory(_pod_series(acts), len(acts), pods=pods), **kw)


def test_eight_hours_of_loading_before_work_is_reported() -> None:
    """2 GPUs idle for 8 of 24 held hours, then busy: 16 of 48 GPU-hours spent starting."""
    (f,) = _run([0.0] * 8 + [0.6] * 16)
    assert f.code == "GPU005" and f.severity is Severity.LOW
    assert f.impact.gpu_hours == pytest.approx(16.0)
    assert f.evidence["starting_share"] == pytest.approx(16 / 48, abs=1e-4)
    assert f.message == (
        "Pod serve/llm-0 held 2 GPUs (H100 80GB HBM3) for 8.0 h from its start at "
        "2023-11-14T22:00:00Z before its first sustained activity (from 2023-11-15T06:00:00Z): "
        "16.0 GPU-hours, 33 % of what it held in the window."
    )
    assert "Pre-pull" in f.recommendation and "16.0 GPU-hours" in f.recommendation


def test_a_single_busy_bucket_is_not_sustained() -> None:
    """One busy hour (a health probe's load) between idle ones does not end the start."""
    (f,) = _run([0.0] * 3 + [0.6] + [0.0] * 4 + [0.6] * 16)
    assert f.impact.gpu_hours == pytest.approx(16.0)


def test_sustained_buckets_is_a_setting() -> None:
    (f,) = _run(
        [0.0] * 3 + [0.6] + [0.0] * 4 + [0.6] * 16, start_sustained_buckets=1, start_min_share=0.1
    )
    assert f.impact.gpu_hours == pytest.approx(6.0) and f.evidence["starting_share"] == 0.125


def test_near_miss_a_training_job_warming_up_ten_minutes_of_three_days() -> None:
    """The warm-up lies inside the first bucket, whose mean activity already counts as work."""
    assert _run([0.5] + [0.9] * 71) == []


def test_near_miss_a_small_share_of_the_holding() -> None:
    assert _run([0.0] * 2 + [0.6] * 22) == []  # 2 h, 4 of 48 GPU-hours: under 25 %


def test_near_miss_a_pod_that_started_before_the_window() -> None:
    """Its start is not in view: idle first hours are not a start."""
    assert _run([0.0] * 8 + [0.6] * 16, started=START - 7200) == []


def test_near_miss_never_working_is_an_idle_holder_not_a_slow_start() -> None:
    assert _run([0.0] * 24) == []
