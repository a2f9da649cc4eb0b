from __future__ import annotations

import pytest

from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks.findings import Severity
from tests.support.factories import Series, gpu_labels, inventory, make_pod, run_check


def _run(series: list[Series], hours: int, **kw):  # type: ignore[no-untyped-def]
    return run_check(gpu001, inventory(series, hours, **kw))


def test_fires_on_idle_pod_with_impact_and_message() -> None:
    s0 = Series(gpu_labels(uuid="G0", gpu="0", pod="idle-0", namespace="ml"), act=[0.01] * 10)
    s1 = Series(gpu_labels(uuid="G1", gpu="1", pod="idle-0", namespace="ml"), act=[0.02] * 10)
    found = _run([s0, s1], 10)
    assert len(found) == 1
    f = found[0]
    assert f.code == "GPU001"
    assert f.resource.name == "idle-0" and f.resource.gpus == 2
    assert f.impact.gpu_hours == pytest.approx(20)
    assert f.impact.cost == pytest.approx(20 * 6.88)
    assert f.severity is Severity.LOW
    assert f.message == (
        "Pod ml/idle-0 held 2 GPUs (H100 80GB HBM3) for 10 h at 1.5 % average engine activity. "
        "Confidence medium: no power draw was measured on its GPUs (framebuffer use not "
        "measured)."
    )
    assert f.evidence["mean_activity"] == pytest.approx(0.015)


def test_near_miss_six_percent_stays_quiet() -> None:
    s = Series(gpu_labels(pod="busyish", namespace="ml"), act=[0.06] * 48)
    assert _run([s], 48) == []


def test_near_miss_three_hours_stays_quiet() -> None:
    s = Series(gpu_labels(pod="short", namespace="ml"), act=[None] * 7 + [0.0] * 3)
    assert _run([s], 10) == []


def test_exactly_four_hours_fires() -> None:
    s = Series(gpu_labels(pod="four", namespace="ml"), act=[None] * 6 + [0.0] * 4)
    assert [f.resource.name for f in _run([s], 10)] == ["four"]


def test_mig_slice_counts_its_share_of_a_gpu() -> None:
    lab = gpu_labels(
        model="NVIDIA A100-SXM4-80GB", pod="tiny", namespace="web", mig=("1g.10gb", "9")
    )
    (f,) = _run([Series(lab, act=[0.0] * 14)], 14)
    assert f.impact.gpu_hours == pytest.approx(2.0)
    assert "1g.10gb MIG slice" in f.message


def test_recommendation_names_the_owner() -> None:
    s = Series(gpu_labels(pod="api-5d-x", namespace="web"), act=[0.0] * 30)
    pod = make_pod(
        "api-5d-x", "web", owner=("ReplicaSet", "api-5d"), labels={"pod-template-hash": "5d"}
    )
    (f,) = _run([s], 30, pods=[pod])
    assert "Deployment web/api" in f.recommendation
    assert f.severity is Severity.MEDIUM


def test_thresholds_are_settings() -> None:
    s = Series(gpu_labels(pod="p", namespace="ml"), act=[0.06] * 5)
    inv = inventory([s], 5)
    loose = run_check(gpu001, inv, idle_activity=0.10)
    assert [f.resource.name for f in loose] == ["p"]
    assert run_check(gpu001, inv, idle_activity=0.10, idle_min_hours=6) == []


def test_unheld_gpus_are_not_findings() -> None:
    assert _run([Series(gpu_labels(), act=[0.0] * 24)], 24) == []
