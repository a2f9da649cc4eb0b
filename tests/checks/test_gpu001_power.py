"""GPU001's second signals: power draw against the model's idle and maximum power, framebuffer
in use, the confidence they give, and the engine-activity noise floor. Figures by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks import idle
from gpuaudit.checks.findings import Confidence
from gpuaudit.report.models.from_result import finding
from tests.support.factories import Series, gpu_labels, inventory, run_check

H100 = "NVIDIA H100 80GB HBM3"  # gpuaudit.domain.power: 700 W board power, about 70 W idle


def _one(series: list[Series], hours: int = 10, **cfg: float):  # type: ignore[no-untyped-def]
    found = run_check(gpu001, inventory(series, hours), **cfg)
    assert len(found) == 1, found
    return found[0]


def _gpu(i: int, pod: str = "p", **kw: object) -> Series:
    lab = gpu_labels(
        uuid=f"G{i}", gpu=str(i), pod=pod, namespace="ml", model=str(kw.pop("model", H100))
    )
    return Series(lab, act=kw.pop("act", [0.01] * 10), **kw)  # type: ignore[arg-type]


def test_idle_power_gives_high_confidence_with_board_power() -> None:
    # (98 - 70) / (700 - 70) = 0.0444 above idle, under the 0.25 margin; 98 / 700 = 14 %.
    f = _one([_gpu(0, power=98.0, fb_used=2048.0, fb_free=79511.0)])
    assert f.confidence is Confidence.HIGH
    assert f.evidence["power_mean_w"] == 98.0
    assert f.evidence["power_max_w"] == 700.0
    assert f.evidence["power_max_source"] == "model board power (gpuaudit.power)"
    assert f.evidence["power_share_of_max"] == pytest.approx(0.14)
    assert f.evidence["power_idle_w_approx"] == 70.0
    assert f.evidence["power_above_idle"] == pytest.approx(0.0444, abs=1e-4)
    assert f.evidence["power_corroboration"] == "available"
    assert f.evidence["fb_used_mib"] == 2048
    assert f.evidence["fb_used_share"] == pytest.approx(2048 / 81559, abs=1e-4)
    assert f.message.endswith(
        "Confidence high: its GPUs drew 98 W on average (14 % of their 700 W board power), "
        "near the H100 80GB HBM3's idle draw of about 70 W; 2,048 MiB of framebuffer in use "
        "per GPU (3 %)."
    )
    assert finding(f).model_dump(mode="json")["confidence"] == "high"


def test_high_power_under_the_limit_gives_low_confidence_or_drops() -> None:
    # Limit 500 W: (300 - 70) / (500 - 70) = 0.535 above idle, over the margin; 300 / 500 = 60 %.
    s = _gpu(0, power=300.0, power_limit=500.0)
    f = _one([s])
    assert f.confidence is Confidence.LOW
    assert f.evidence["power_max_w"] == 500.0
    assert f.evidence["power_max_source"] == "DCGM_FI_DEV_POWER_MGMT_LIMIT"
    assert f.evidence["power_share_of_max"] == pytest.approx(0.6)
    assert f.evidence["power_above_idle"] == pytest.approx(230 / 430, abs=1e-4)
    assert "Confidence low: its GPUs drew 300 W on average (60 % of their 500 W limit)" in (
        f.message
    )
    assert finding(f).model_dump(mode="json")["confidence"] == "low"
    assert run_check(gpu001, inventory([s], 10), idle_power_drop=1.0) == []


def test_margin_edge() -> None:
    # 70 + 0.25 x 630 = 227.5 W lies exactly at the margin: still idle power.
    assert _one([_gpu(0, power=227.5)]).confidence is Confidence.HIGH
    assert _one([_gpu(0, power=228.0)]).confidence is Confidence.LOW
    # A wider margin accepts the higher draw.
    assert _one([_gpu(0, power=228.0)], idle_power_margin=0.3).confidence is Confidence.HIGH


def test_two_gpus_average_weighted_by_hours() -> None:
    # 80 W over 10 h and 200 W over 5 h: (800 + 1000) / 15 = 120 W; (120 - 70) / 630 = 0.079.
    a = _gpu(0, power=80.0)
    b = _gpu(1, power=200.0, act=[None] * 5 + [0.0] * 5)
    f = _one([a, b])
    assert f.evidence["power_mean_w"] == 120.0
    assert f.confidence is Confidence.HIGH


def test_missing_power_is_unavailable_never_idle() -> None:
    f = _one([_gpu(0)])
    assert f.confidence is Confidence.MEDIUM
    assert f.evidence["power_mean_w"] is None
    assert "no power draw" in f.evidence["power_corroboration"]
    # Power on one GPU of two: not measured on every GPU it held.
    f = _one([_gpu(0, power=75.0), _gpu(1)])
    assert f.confidence is Confidence.MEDIUM and f.evidence["power_mean_w"] is None
    assert "Confidence medium: no power draw was measured on its GPUs" in f.message


def test_mig_and_unknown_models_cannot_corroborate() -> None:
    lab = gpu_labels(
        model="NVIDIA A100-SXM4-80GB", pod="tiny", namespace="web", mig=("1g.10gb", "9")
    )
    f = _one([Series(lab, act=[0.0] * 10, power=60.0)])
    assert f.confidence is Confidence.MEDIUM
    assert "whole GPU's" in f.evidence["power_corroboration"]
    assert f.evidence["power_mean_w"] == 60.0  # stated, not weighed
    # A model gpuaudit.domain.power does not know: a limit gives the maximum but no idle figure.
    f = _one([_gpu(0, model="NVIDIA A10G", power=25.0, power_limit=300.0)])
    assert f.confidence is Confidence.MEDIUM
    assert f.evidence["power_corroboration"] == "the GPU model's idle draw is not known"
    f = _one([_gpu(0, model="NVIDIA A10G", power=25.0)])
    assert "board power is not known" in f.evidence["power_corroboration"]
    assert f.evidence["power_share_of_max"] is None


def test_noise_floor_counts_background_hours_as_zero() -> None:
    # 9 h at 3 % and 1 h at 30 %: mean 5.7 %, not idle; with a 5 % floor the 3 % hours count
    # as 0: 30 / 10 = 3.0 %.
    act: list[float | None] = [0.03] * 9 + [0.30]
    s = _gpu(0, act=act)
    assert run_check(gpu001, inventory([s], 10)) == []
    f = _one([s], activity_noise_floor=0.05)
    assert f.evidence["mean_activity"] == pytest.approx(0.03)
    assert f.evidence["measured_mean_activity"] == pytest.approx(0.057)
    assert "at 3.0 % average engine activity (5.7 % before hours under the 5 % noise floor" in (
        f.message
    )


def test_noise_floor_never_turns_missing_data_into_idle() -> None:
    # 4 h measured at 30 %, 6 h without data. A floor under 30 % changes nothing; a floor
    # over it counts the measured hours as 0, but the unmeasured hours stay out: 4 h held.
    s = _gpu(0, act=[None] * 6 + [0.30] * 4)
    assert run_check(gpu001, inventory([s], 10), activity_noise_floor=0.2) == []
    f = _one([s], activity_noise_floor=0.5)
    assert f.evidence["hours_held"] == 4 and f.evidence["mean_activity"] == 0.0
    assert np.isnan(idle.floored(np.array([np.nan, 0.01, 0.2]), 0.05)[0])
    assert idle.floored(np.array([np.nan, 0.01, 0.2]), 0.05)[1:].tolist() == [0.0, 0.2]


def test_the_switch_takes_zero_or_one() -> None:
    from gpuaudit.checks.contract import SWITCH

    assert SWITCH.problem(0.0) is None and SWITCH.problem(1.0) is None
    assert SWITCH.problem(0.5) == "is 0 for off or 1 for on, got 0.5"
    assert SWITCH.problem(2.0) is not None
