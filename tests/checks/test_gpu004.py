"""GPU004 restarting holders, on hand-computed inventories (buckets of 1 h, a sample a minute)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu004_restarting_holders as gpu004
from gpuaudit.checks.findings import Finding, Severity
from gpuaudit.inventory.crashes import down_spans
from gpuaudit.inventory.kube import containers
from tests.support.factories import START, Series, gpu_labels, inventory, iso, make_pod, run_check

HOURS = 24
END = START + HOURS * 3600


def _pod(restarts: int, last: dict[str, Any] | None, state: dict[str, Any]) -> dict[str, Any]:
    pod = make_pod("trainer-0", namespace="ml", gpus=1, started=START - 86400)
    cs: dict[str, Any] = {"name": "c", "restartCount": restarts, "state": state}
    if last is not None:
        cs["lastState"] = {"terminated": last}
    pod["status"]["containerStatuses"] = [cs]
    return pod


def _term(reason: str, started: float, finished: float, code: int = 137) -> dict[str, Any]:
    return {
        "reason": reason,
        "exitCode": code,
        "startedAt": iso(started),
        "finishedAt": iso(finished),
    }


def _run(pod: dict[str, Any], **kw: float) -> list[Finding]:
    s = Series(gpu_labels(pod="trainer-0", namespace="ml"), act=[0.5] * HOURS, fb_used=70000.0)
    s.fb_free = 11000.0
    return run_check(gpu004, inventory([s], HOURS, pods=[pod]), **kw)


def test_a_crash_loop_holds_its_gpu_from_its_last_crash_to_the_reading() -> None:
    """OOM-killed 6.5 h before the window's end and waiting since: 6.5 GPU-hours, measured."""
    last = _term("OOMKilled", END - 8 * 3600, END - 6.5 * 3600)
    pod = _pod(7, last, {"waiting": {"reason": "CrashLoopBackOff"}})
    (f,) = _run(pod)
    assert f.code == "GPU004" and f.severity is Severity.MEDIUM
    assert f.impact.gpu_hours == pytest.approx(6.5)
    assert f.message == (
        "Pod ml/trainer-0 is in CrashLoopBackOff (7 restarts, last OOMKilled) while holding "
        "1 GPU (H100 80GB HBM3): 6.5 GPU-hours held with its container down since its last "
        "termination."
    )
    ev = f.evidence
    assert ev["earlier_restarts_not_measured"] == 6
    assert ev["earlier_down_hours_at_least_estimate"] == pytest.approx(6 * 10 / 3600, abs=1e-4)
    assert ev["gpu_memory_used_max_mib"] == 70000.0
    assert "not measured" in ev["host_memory_needed"]
    assert "raise its memory limit" in f.recommendation


def test_restarts_with_the_last_down_time_inside_the_window() -> None:
    """Down from 10:30 to 11:15 into the window: 0.75 GPU-hours, in two buckets."""
    last = _term("Error", START + 3 * 3600, START + 10.5 * 3600, code=1)
    pod = _pod(4, last, {"running": {"startedAt": iso(START + 11.25 * 3600)}})
    (f,) = _run(pod)
    assert f.impact.gpu_hours == pytest.approx(0.75)
    assert f.message.startswith("Pod ml/trainer-0 restarted 4 times (4 restarts, last Error)")
    assert "gpu_memory_used_max_mib" not in f.evidence
    assert f.evidence["last_exit_code"] == 1


def test_near_miss_a_quick_restart_holds_too_little() -> None:
    """Down 36 s (0.01 GPU-hours) after its last of 7 restarts: under the 0.5 GPU-hours."""
    last = _term("OOMKilled", START + 3 * 3600, START + 10 * 3600)
    pod = _pod(7, last, {"running": {"startedAt": iso(START + 10.01 * 3600)}})
    assert _run(pod) == []
    (f,) = _run(pod, restart_min_gpu_hours=0.01)
    assert f.impact.gpu_hours == pytest.approx(0.01)


def test_near_miss_one_restart_long_ago_and_healthy_since() -> None:
    last = _term("Error", START - 80000, START - 79000, code=1)
    pod = _pod(1, last, {"running": {"startedAt": iso(START - 78990)}})
    assert _run(pod) == []


def test_near_miss_two_restarts_are_under_the_count() -> None:
    last = _term("Error", START + 3 * 3600, START + 10.5 * 3600, code=1)
    pod = _pod(2, last, {"running": {"startedAt": iso(START + 11 * 3600)}})
    assert _run(pod) == []
    assert len(_run(pod, restart_min_count=2)) == 1


def test_skipped_without_the_pods() -> None:
    s = Series(gpu_labels(pod="trainer-0", namespace="ml"), act=[0.5] * HOURS)
    check = by_code("GPU004")
    assert check is not None
    result = run_checks(inventory([s], HOURS), Settings(), (check,))
    (skip,) = result.skipped
    assert skip.code == "GPU004"


def test_down_spans_merge_and_stop_at_the_next_run() -> None:
    status = {
        "containerStatuses": [
            {
                "name": "a",
                "restartCount": 3,
                "state": {"running": {"startedAt": iso(START + 200)}},
                "lastState": {"terminated": _term("Error", START, START + 100)},
            },
            {
                "name": "b",
                "restartCount": "x",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": _term("OOMKilled", START, START + 150)},
            },
        ]
    }
    cs = containers(status)
    assert cs[1].restarts == 0 and cs[1].waiting == "CrashLoopBackOff"
    assert down_spans(cs, START + 1000) == [(START + 100, START + 1000)]


def test_an_oom_kill_without_framebuffer_series_says_so() -> None:
    last = _term("OOMKilled", END - 8 * 3600, END - 2 * 3600)
    pod = _pod(5, last, {"running": {"startedAt": iso(END - 3600)}})
    s = Series(gpu_labels(pod="trainer-0", namespace="ml"), act=[0.5] * HOURS)
    (f,) = run_check(gpu004, inventory([s], HOURS, pods=[pod]))
    assert f.impact.gpu_hours == pytest.approx(1.0)
    assert str(f.evidence["gpu_memory_used_max_mib"]).startswith("not measured")
