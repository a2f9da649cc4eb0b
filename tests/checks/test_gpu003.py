from __future__ import annotations

import pytest

from gpuaudit.checks import gpu003_part_time_reservation as gpu003
from gpuaudit.checks.findings import Finding, Severity
from tests.support.factories import Series, gpu_labels, inventory, make_pod, run_check

# The factories' window starts at 22:00 UTC: bucket i covers hour of day (22 + i) % 24.
FIRST_HOUR = 22


def _day(active: set[int], days: int, on: float = 0.8, off: float = 0.01) -> list[float | None]:
    return [on if (FIRST_HOUR + i) % 24 in active else off for i in range(24 * days)]


def _run(act: list[float | None], **kw: object) -> list[Finding]:
    s = Series(gpu_labels(pod="nightly-0", namespace="batch"), act=act)
    return run_check(gpu003, inventory([s], len(act), **kw))  # type: ignore[arg-type]


def test_a_nightly_job_held_all_day_is_reported() -> None:
    pod = make_pod("nightly-0", "batch", owner=("StatefulSet", "nightly"))
    (f,) = _run(_day({1, 2, 3}, 4), pods=[pod])
    assert f.code == "GPU003" and f.severity is Severity.MEDIUM
    assert f.impact.gpu_hours == pytest.approx(84)
    assert f.impact.cost == pytest.approx(84 * 6.88)
    assert f.message == (
        "Pod batch/nightly-0 held 1 GPU (H100 80GB HBM3) around the clock for 4.0 days but "
        "worked only 01:00-04:00 UTC; it was idle (1.0 % activity) the other 21 hours a day. "
        "Confidence medium: no power draw was measured on its GPUs (framebuffer use not "
        "measured)."
    )
    assert f.recommendation.startswith(
        "Replace StatefulSet batch/nightly with a CronJob scheduled `0 1 * * *`"
    )
    assert f.evidence["active_hours_utc"] == [1, 2, 3]


def test_a_window_across_midnight_is_one_window() -> None:
    (f,) = _run(_day({23, 0, 1}, 4))
    assert "worked only 23:00-02:00 UTC" in f.message


def test_near_miss_held_under_three_days() -> None:
    assert _run(_day({1, 2, 3}, 2)) == []


def test_near_miss_a_window_longer_than_eight_hours() -> None:
    assert _run(_day(set(range(9)), 4)) == []


def test_near_miss_a_window_that_does_not_recur() -> None:
    act = _day({1, 2, 3}, 2) + _day(set(), 2)  # active on 2 of 4 days: 50 % < 80 %
    assert _run(act) == []


def test_near_miss_busy_outside_the_window() -> None:
    assert _run(_day({1, 2, 3}, 4, off=0.06)) == []


def test_thresholds_are_settings() -> None:
    s = Series(gpu_labels(pod="nightly-0", namespace="batch"), act=_day({1, 2, 3}, 2))
    inv = inventory([s], 48)
    assert run_check(gpu003, inv) == []
    (f,) = run_check(gpu003, inv, part_time_min_days=2)
    assert f.impact.gpu_hours == pytest.approx(42) and f.severity is Severity.MEDIUM


def test_noise_floor_counts_background_hours_as_zero() -> None:
    # Outside the window at 6 %: not idle; under a 10 % floor those hours count as 0.
    act = _day({1, 2, 3}, 4, off=0.06)
    assert _run(act) == []
    s = Series(gpu_labels(pod="nightly-0", namespace="batch"), act=act, power=90.0)
    (f,) = run_check(gpu003, inventory([s], len(act)), activity_noise_floor=0.1)
    assert f.evidence["outside_mean_activity"] == 0.0
    assert f.confidence is not None and f.confidence.value == "medium"
    assert f.evidence["power_mean_w"] == 90.0
