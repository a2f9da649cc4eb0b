from __future__ import annotations

from typing import Any

from gpuaudit.checks import gpu020_framebuffer_pressure as gpu020
from gpuaudit.checks.findings import Finding, Severity
from gpuaudit.inventory import build
from tests.support.factories import Series, gpu_labels, inventory, make_pod, run_check, snapshot

H100_MIB = 81559.0


def _run(series: list[Series], hours: int = 10, **kw: Any) -> list[Finding]:
    return run_check(gpu020, inventory(series, hours, **kw))


def _held(used: float, total: float = H100_MIB, pod: str = "llm-0", **kw: Any) -> Series:
    lab = gpu_labels(pod=pod, namespace="serving", **kw)
    return Series(lab, act=[0.5] * 10, fb_used=used, fb_free=total - used)


def test_a_full_gpu_is_high_with_its_figures() -> None:
    (f,) = _run([_held(0.97 * H100_MIB)])
    assert f.code == "GPU020" and f.severity is Severity.HIGH
    assert f.impact.gpu_hours == 0 and f.impact.cost == 0
    assert f.message == (
        "Pod serving/llm-0 used 97.0 % of the memory of GPU 0 (H100 80GB HBM3) at p95 in its "
        "fullest hour (peak 77.3 of 79.6 GiB)."
    )
    assert f.evidence["p95_of"] == "the fullest hour"
    assert f.recommendation.startswith("Cut batch or context size")
    assert f.evidence["gpu_hours_at_risk"] == 10


def test_pressure_in_one_hour_of_a_day_is_found_by_the_fullest_hour() -> None:
    # 60 % of the card for 23 hours, 97 % in one (4 % of the samples): the p95 of every sample
    # of the window (the figure before hourly p95s) was 60 %, the fullest hour's is 97 %.
    s = _held(0.6 * H100_MIB)
    s.act = [0.5] * 24
    snap = snapshot([s], 24)
    (entry,) = snap.prometheus["fb_used_p95_hourly"]
    (series,) = entry["body"]["data"]["result"]
    series["values"][7][1] = repr(0.97 * H100_MIB)
    (f,) = run_check(gpu020, build(snap))
    assert f.severity is Severity.HIGH
    assert f.evidence["fb_used_p95_ratio"] == 0.97
    assert "used 97.0 % of the memory of GPU 0" in f.message


def test_between_warning_and_critical_is_medium() -> None:
    (f,) = _run([_held(0.92 * H100_MIB)])
    assert f.severity is Severity.MEDIUM


def test_a_full_mig_slice_names_the_next_profile_that_fits() -> None:
    lab: dict[str, Any] = {"mig": ("1g.10gb", "9"), "model": "NVIDIA A100-SXM4-80GB"}
    (f,) = _run([_held(9600.0, 9856.0, **lab)])
    assert "its 1g.10gb MIG slice" in f.message
    assert f.recommendation.startswith("Move it from 1g.10gb to 1g.20gb")


def test_near_miss_under_the_warning_stays_quiet() -> None:
    assert _run([_held(0.89 * H100_MIB)]) == []


def test_near_miss_an_unheld_gpu_stays_quiet() -> None:
    lab = gpu_labels()
    s = Series(lab, act=[0.0] * 10, fb_used=0.99 * H100_MIB, fb_free=0.01 * H100_MIB)
    assert _run([s]) == []


def _crashing(restarts: int, message: str) -> dict[str, Any]:
    pod = make_pod("oom-0", "ml-train", owner=("Job", "oom"))
    pod["status"]["containerStatuses"] = [
        {
            "name": "c",
            "restartCount": restarts,
            "lastState": {"terminated": {"reason": "Error", "message": message}},
        }
    ]
    return pod


def test_a_gpu_out_of_memory_crash_loop_is_high() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    s = _held(0.5 * H100_MIB)
    found = _run([s], pods=[_crashing(5, oom)])
    (f,) = [f for f in found if f.resource.name == "oom-0"]
    assert f.severity is Severity.HIGH
    assert f.message.startswith("Pod ml-train/oom-0 restarted 5 times; its last crash was a GPU")
    assert f.evidence["restarts"] == 5


def test_near_miss_few_restarts_or_a_host_oom_stay_quiet() -> None:
    s = _held(0.5 * H100_MIB)
    oom = "CUDA out of memory"
    assert _run([s], pods=[_crashing(2, oom)]) == []
    assert _run([s], pods=[_crashing(9, "OOMKilled: container memory limit")]) == []


def test_thresholds_are_settings() -> None:
    inv = inventory([_held(0.89 * H100_MIB)], 10)
    (f,) = run_check(gpu020, inv, fb_pressure_warning=0.85)
    assert f.severity is Severity.MEDIUM
    (g,) = run_check(gpu020, inv, fb_pressure_warning=0.85, fb_pressure_critical=0.88)
    assert g.severity is Severity.HIGH
