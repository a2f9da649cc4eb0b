"""GPU071 throttled GPUs: the busy GPU-hours lost to power or thermal throttling, the likely
cause, the thresholds, and the skip without the violation counters. Figures by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu071_throttled_gpus as gpu071
from gpuaudit.checks.findings import Severity
from gpuaudit.inventory import columns as C
from tests.support.factories import Series, gpu_labels, inventory, run_check

NS = 1e9


def _gpu(
    i: int, pod: str = "trainer-0", act: float = 0.8, read_health: bool = True, **health: float
) -> Series:
    lab = gpu_labels(uuid=f"G{i}", gpu=str(i), pod=pod, namespace="ml")
    counters = {f"{k}_violation_increase_hourly": v * NS for k, v in health.items()}
    if read_health:  # a row-remap gauge read, with nothing pending: a healthy card
        counters["remap_pending_max"] = 0.0
    return Series(lab, act=[act] * 10, health=counters)


def test_power_throttled_pod_loses_its_busy_share() -> None:
    # Held 10 h = 36,000 s; power-throttled 9,000 s: share 0.25. Busy 0.8 x 10 = 8 GPU-hours,
    # lost 8 x 0.25 = 2 GPU-hours (25 % of the busy time). Thermal 1,800 s is shorter.
    inv = inventory([_gpu(0, power=9000.0, thermal=1800.0)], 10)
    row = inv.holdings.iloc[0]
    assert row[C.POWER_VIOLATION_S] == 9000.0
    assert row[C.THROTTLED_SHARE] == pytest.approx(0.25)
    assert row[C.THROTTLED_LOST] == pytest.approx(2.0)
    (f,) = run_check(gpu071, inv)
    assert f.code == "GPU071" and f.severity is Severity.LOW
    assert f.impact.gpu_hours == pytest.approx(2.0)
    assert f.resource.ref() == "ml/trainer-0"
    assert f.message == (
        "Pod ml/trainer-0 held 1 GPU (H100 80GB HBM3) for 10 h, and its most throttled GPU "
        "(GPU 0 on node node-a) had its clocks held down by their power limit for 25 % of that "
        "time: 2.0 of its 8.0 busy GPU-hours (25 %) ran throttled. Likely cause: the power cap."
    )
    assert f.evidence["cause"] == "the power cap"
    assert f.evidence["power_violation_s"] == 9000.0
    assert f.evidence["thermal_violation_s"] == 1800.0
    assert "power limit in force" in f.recommendation


def test_thermal_throttling_points_at_cooling() -> None:
    # Two GPUs: GPU 1 thermal 18,000 s (share 0.5, lost 0.8 x 10 x 0.5 = 4); GPU 0 none (0).
    inv = inventory([_gpu(0, thermal=0.0), _gpu(1, thermal=18000.0, power=3600.0)], 10)
    (f,) = run_check(gpu071, inv)
    assert f.impact.gpu_hours == pytest.approx(4.0)
    assert f.evidence["cause"] == "cooling"
    assert f.evidence["busy_gpu_hours"] == 16.0
    assert f.evidence["share_of_busy_lost"] == 0.25
    assert "GPU 1 on node node-a" in f.message and "heat (thermal limits)" in f.message
    assert "cooling" in f.recommendation


def test_a_gpu_with_an_xid_event_is_a_sick_card_as_gpu070_says() -> None:
    s = _gpu(0, power=18000.0)
    s.xids = [79]
    (f,) = run_check(gpu071, inventory([s], 10))
    assert f.evidence["cause"] == "a sick card"
    assert "follow GPU070's action" in f.recommendation
    # A stale code (no event in the window) is no sick card: GPU070 does not report it.
    s.xid_events = {}
    (f,) = run_check(gpu071, inventory([s], 10))
    assert f.evidence["cause"] == "the power cap"


def test_lost_never_exceeds_the_busy_gpu_hours() -> None:
    # Violation time over the held time (extrapolated increase): share capped at 1.
    inv = inventory([_gpu(0, act=0.5, power=40000.0, thermal=39000.0)], 10)
    row = inv.holdings.iloc[0]
    assert row[C.THROTTLED_SHARE] == 1.0
    assert row[C.THROTTLED_LOST] == pytest.approx(5.0)  # 0.5 x 10, all its busy time


@pytest.mark.parametrize(
    ("act", "power"),
    [
        (0.8, 3000.0),  # share 3,000 / 36,000 = 0.083 < 0.10
        (0.05, 18000.0),  # share 0.5 but busy 0.5 GPU-hours: lost 0.25 < 1
    ],
)
def test_near_misses_are_not_reported(act: float, power: float) -> None:
    assert run_check(gpu071, inventory([_gpu(0, act=act, power=power)], 10)) == []


def test_thresholds_are_settings() -> None:
    inv = inventory([_gpu(0, power=3000.0)], 10)
    (f,) = run_check(gpu071, inv, throttle_min_share=0.05, throttle_min_lost_hours=0.5)
    assert f.impact.gpu_hours == pytest.approx(0.8 * 10 * 3000 / 36000)


def test_skipped_with_the_reason_without_the_violation_counters() -> None:
    inv = inventory([Series(gpu_labels(pod="p", namespace="ml"), act=[0.9] * 10)], 10)
    assert np.isnan(inv.holdings[C.THROTTLED_LOST].iloc[0])  # unmeasured, not 0
    check = by_code("GPU071")
    assert check is not None
    result = run_checks(inv, Settings(), (check,))
    (skip,) = result.skipped
    assert skip.code == "GPU071" and "DCGM_FI_DEV_POWER_VIOLATION" in skip.reason


def test_the_sm_clock_against_the_cards_maximum_is_shown_where_exported() -> None:
    # 600 samples summing to 600 x 1,800 MHz: mean 1,800; maximum 1,980 -> 1,800 / 1,980 = 91 %.
    s = _gpu(0, power=9000.0)
    s.health |= {"sm_clock_sum": 600 * 1800.0, "sm_clock_count": 600.0, "max_sm_clock_max": 1980.0}
    (f,) = run_check(gpu071, inventory([s], 10))
    assert f.message == (
        "Pod ml/trainer-0 held 1 GPU (H100 80GB HBM3) for 10 h, and its most throttled GPU "
        "(GPU 0 on node node-a) had its clocks held down by their power limit for 25 % of that "
        "time: 2.0 of its 8.0 busy GPU-hours (25 %) ran throttled. Its SM clock averaged "
        "1,800 MHz, 91 % of the card's 1,980 MHz maximum. Likely cause: the power cap."
    )
    assert f.evidence["sm_clock_mean_mhz"] == 1800.0
    assert f.evidence["max_sm_clock_mhz"] == 1980.0
    assert f.evidence["sm_clock_share_of_max"] == round(1800 / 1980, 4)
    assert f.evidence["gpus"][0]["sm_clock_mean_mhz"] == 1800.0
    # Without the maximum (not in the default CSV): the clock alone, no share.
    s.health.pop("max_sm_clock_max")
    (f,) = run_check(gpu071, inventory([s], 10))
    assert "Its SM clock averaged 1,800 MHz. Likely cause" in f.message
    assert f.evidence["max_sm_clock_mhz"] is None and f.evidence["sm_clock_share_of_max"] is None
    # Without the clock: nothing said of it (the first test's message).
    s.health = {k: v for k, v in s.health.items() if not k.startswith("sm_clock")}
    (f,) = run_check(gpu071, inventory([s], 10))
    assert "SM clock" not in f.message and f.evidence["sm_clock_mean_mhz"] is None


def test_without_health_series_a_sick_card_is_not_ruled_out() -> None:
    # The same power-throttled GPU, but no XID, ECC or row-remap series were read: the power cap
    # is the likely cause, and the message says a sick card could not be ruled out.
    inv = inventory([_gpu(0, read_health=False, power=9000.0, thermal=1800.0)], 10)
    (f,) = run_check(gpu071, inv)
    assert f.evidence["cause"] == "the power cap"
    assert f.evidence["gpu_health_read"] is False
    assert f.message.endswith(
        "Likely cause: the power cap (a sick card is not ruled out: no XID, ECC or row-remap "
        "series were read)."
    )
    (healthy,) = run_check(gpu071, inventory([_gpu(0, power=9000.0, thermal=1800.0)], 10))
    assert healthy.evidence["gpu_health_read"] is True
    assert healthy.message.endswith("Likely cause: the power cap.")
