"""GPU004 restarting holders, on hand-computed inventories (buckets of 1 h, a sample a minute)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu004_restarting_holders as gpu004
from gpuaudit.checks.findings import Finding, Severity
from gpuaudit.inventory import Inventory, build
from gpuaudit.inventory.crashes import down_spans
from gpuaudit.inventory.kube import containers
from gpuaudit.snapshot.fields import keep_object
from tests.support.factories import (
    START,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_pod,
    run_check,
    snapshot,
)

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


GIB = 2**30


def _oom_inventory(
    limit: str | None,
    used: float | None,
    answered: bool = True,
    container: str = "c",
    window: tuple[float, float] | None = None,
) -> Inventory:
    """An OOM-killed pod (5 restarts, down 1 h) whose container `c` has the memory `limit`
    and cAdvisor's most working set `used` (bytes) for `container`."""
    last = _term("OOMKilled", END - 8 * 3600, END - 2 * 3600)
    pod = _pod(5, last, {"running": {"startedAt": iso(END - 3600)}})
    if limit is not None:
        pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = limit
    s = Series(gpu_labels(pod="trainer-0", namespace="ml"), act=[0.5] * HOURS)
    snap = snapshot([s], HOURS, pods=[pod])
    if answered:
        result = []
        if used is not None:
            who = {"namespace": "ml", "pod": "trainer-0", "container": container}
            result.append({"metric": who, "value": [END, repr(used)]})
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        snap.prometheus["memory_working_set_max"] = [
            {"query": "memory_working_set_max", "params": {}, "body": body}
        ]
    else:
        del snap.prometheus["memory_working_set_max"]
    return build(snap, None, window)


def test_an_oom_kill_states_the_memory_used_against_the_limit_and_recommends_one() -> None:
    # Used 15.5 GiB of a 16 GiB limit (97 %): the larger, 16 GiB, x 1.25 = 20 GiB.
    (f,) = run_check(gpu004, _oom_inventory("16Gi", 15.5 * GIB))
    assert f.message.endswith(
        "1.0 GPU-hours held with its container down since its last termination. Container c "
        "used at most 15.5 GiB of memory against its 16.0 GiB limit (97 %)."
    )
    ev = f.evidence
    assert ev["oom_container"] == "c"
    assert ev["memory_working_set_max_bytes"] == round(15.5 * GIB)
    assert ev["memory_limit_bytes"] == 16 * GIB
    assert ev["memory_recommended_limit"] == "20Gi"
    assert ev["memory_recommended_limit_bytes"] == 20 * GIB
    assert "host_memory_needed" not in ev
    assert "raise container c's memory limit (and request) to 20Gi" in f.recommendation
    assert "to 20Gi (25 % over its 16.0 GiB limit, above the 15.5 GiB cAdvisor saw it use at " in (
        f.recommendation
    )


def test_a_peak_missed_between_scrapes_never_lowers_the_limit() -> None:
    # Seen at 9 GiB of a 16 GiB limit (the kill's peak fell between scrapes): 16 x 1.25 = 20.
    (f,) = run_check(gpu004, _oom_inventory("16Gi", 9 * GIB))
    assert f.evidence["memory_recommended_limit"] == "20Gi"
    assert "its 16.0 GiB limit, above the 9.0 GiB cAdvisor saw" in f.recommendation
    assert "(56 %)" in f.message


def test_without_a_limit_and_with_another_headroom() -> None:
    # 10 GiB x 1.5 = 15 GiB; 10.1 GiB x 1.25 = 12.625 -> 13 GiB (whole GiB, rounded up).
    (f,) = run_check(gpu004, _oom_inventory(None, 10 * GIB), oom_memory_headroom=0.5)
    assert f.evidence["memory_recommended_limit"] == "15Gi"
    assert "to 15Gi (50 % over the most it used, 10.0 GiB)" in f.recommendation
    assert f.evidence["memory_limit_bytes"] is None
    assert f.message.endswith("Container c used at most 10.0 GiB of memory, with no limit.")
    (f,) = run_check(gpu004, _oom_inventory("5000Mi", 10.1 * GIB))
    assert f.evidence["memory_recommended_limit"] == "13Gi"


@pytest.mark.parametrize(
    ("answered", "container", "why"),
    [
        (False, "c", "the snapshot holds no cAdvisor memory answer"),
        (True, "sidecar", "no cAdvisor container_memory_working_set_bytes series"),
    ],
)
def test_the_memory_not_measured_says_why(answered: bool, container: str, why: str) -> None:
    (f,) = run_check(gpu004, _oom_inventory("16Gi", 9 * GIB, answered, container))
    assert f.evidence["host_memory_needed"].startswith("not measured: ")
    assert why in f.evidence["host_memory_needed"]
    assert "memory_recommended_limit" not in f.evidence
    assert f.message.endswith("since its last termination.")
    assert "what it needs plus headroom" in f.recommendation


def test_the_snapshot_keeps_a_containers_memory_limit() -> None:
    pod = make_pod("trainer-0", namespace="ml", gpus=1)
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "16Gi"
    pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "secret"}]
    kept = keep_object("pods", pod)
    (c,) = kept["spec"]["containers"]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "1", "memory": "16Gi"}
    assert "env" not in c


def test_a_window_narrowed_in_time_does_not_measure_the_memory() -> None:
    # The answer is the most over the recorded window: it says nothing of its last 12 hours.
    inv = _oom_inventory("16Gi", 15.5 * GIB, window=(END - 12 * 3600, END))
    (f,) = run_check(gpu004, inv)
    assert f.evidence["host_memory_needed"].startswith("not measured: the window was narrowed")
    assert "memory_recommended_limit" not in f.evidence
