from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu010_partial_gang as gpu010
from gpuaudit.checks.findings import Severity
from tests.support.factories import START, STEP, Series, gpu_labels, inventory, make_pod, run_check

HOURS = 10
END = START + HOURS * STEP
VOLCANO = {"scheduling.k8s.io/group-name": "pg"}


def _held(pod: str, gpu: int, start_h: int = 0) -> Series:
    lab = gpu_labels(uuid=f"G{gpu}", gpu=str(gpu), pod=pod, namespace="ml")
    return Series(lab, act=[None] * start_h + [0.3] * (HOURS - start_h))


def _pg(
    phase: str, min_member: int, key: str = "volcano_podgroups"
) -> dict[str, list[dict[str, Any]]]:
    return {
        key: [
            {
                "metadata": {"name": "pg", "namespace": "ml"},
                "spec": {"minMember": min_member},
                "status": {"phase": phase},
            }
        ]
    }


def _member(name: str, started: float | None = START, **kw: Any) -> dict[str, Any]:
    return make_pod(name, annotations=VOLCANO, started=started, created=START, **kw)


def _pending(name: str, created: float = START, **kw: Any) -> dict[str, Any]:
    return make_pod(
        name,
        node="",
        phase="Pending",
        created=created,
        unschedulable="pod group is not ready, 2 Pending, 4 minAvailable",
        pending_since=created,
        **kw,
    )


def test_volcano_gang_with_half_its_members_running() -> None:
    pods = [
        _member("w-0"),
        _member("w-1"),
        _pending("w-2", annotations=VOLCANO),
        _pending("w-3", annotations=VOLCANO),
    ]
    inv = inventory([_held("w-0", 0), _held("w-1", 1)], HOURS, pods=pods, lists=_pg("Unknown", 4))
    (f,) = run_check(gpu010, inv)
    assert f.code == "GPU010" and f.severity is Severity.LOW
    assert (f.resource.kind, f.resource.namespace, f.resource.name) == ("PodGroup", "ml", "pg")
    assert f.message == (
        "PodGroup ml/pg runs 2 of the 4 members it needs (2 missing, 2 pending) while the "
        "running ones hold 2 GPUs (H100 80GB HBM3): 20 GPU-hours held over 10.0 h with the gang "
        "incomplete; its scheduler reports it: Volcano PodGroup phase Unknown: some members run, "
        "the rest cannot be scheduled."
    )
    assert f.impact.gpu_hours == pytest.approx(20)
    assert f.impact.cost == pytest.approx(20 * 6.88)
    assert f.evidence["pending"] == ["w-2", "w-3"]
    assert "scheduleTimeoutSeconds" in f.recommendation


def test_incomplete_only_since_the_newest_pending_member_was_created() -> None:
    pods = [_member("w-0"), _pending("w-1", created=START + 6 * STEP, annotations=VOLCANO)]
    inv = inventory([_held("w-0", 0)], HOURS, pods=pods, lists=_pg("Running", 2))
    (f,) = run_check(gpu010, inv)
    assert f.impact.gpu_hours == pytest.approx(4)
    assert f.evidence["incomplete_hours"] == pytest.approx(4)


def test_kueue_pod_group_from_labels_and_short_waits() -> None:
    meta = {
        "labels": {"kueue.x-k8s.io/pod-group-name": "grp"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
    }
    pods = [
        make_pod("g-0", started=START, **meta),
        make_pod("g-1", started=START, **meta),
        make_pod("g-2", node="", phase="Pending", created=END - 600, **meta),
    ]
    series = [_held("g-0", 0), _held("g-1", 1)]
    assert run_check(gpu010, inventory(series, HOURS, pods=pods)) == []  # 10 minutes only
    (f,) = run_check(gpu010, inventory(series, HOURS, pods=pods), gang_partial_min_minutes=5)
    assert (f.resource.kind, f.resource.name) == ("Workload", "grp")
    assert "waitForPodsReady" in f.recommendation


def test_complete_gang_and_gpu_less_members_stay_quiet() -> None:
    complete = [_member("w-0"), _member("w-1")]
    inv = inventory(
        [_held("w-0", 0), _held("w-1", 1)], HOURS, pods=complete, lists=_pg("Running", 2)
    )
    assert run_check(gpu010, inv) == []
    launcher_only = [_member("w-0", gpus=0), _pending("w-1", annotations=VOLCANO)]
    inv = inventory(
        [Series(gpu_labels(), act=[0.0] * HOURS)],
        HOURS,
        pods=launcher_only,
        lists=_pg("Unknown", 2),
    )
    assert run_check(gpu010, inv) == []


def test_members_started_hours_apart() -> None:
    pods = [_member("w-0", started=START), _member("w-1", started=START + 3 * STEP)]
    series = [_held("w-0", 0), _held("w-1", 1, start_h=3)]
    inv = inventory(series, HOURS, pods=pods, lists=_pg("Running", 2, "coscheduling_podgroups"))
    # The coscheduling group is found through its label, not the Volcano annotation: none here.
    assert run_check(gpu010, inv) == []
    pods = [
        make_pod(n, started=s, labels={"scheduling.x-k8s.io/pod-group": "pg"})
        for n, s in (("w-0", START), ("w-1", START + 3 * STEP))
    ]
    inv = inventory(series, HOURS, pods=pods, lists=_pg("Running", 2, "coscheduling_podgroups"))
    (f,) = run_check(gpu010, inv)
    assert f.message == (
        "PodGroup ml/pg's 2 members started 3.0 h apart: the early ones held their GPUs 3.0 "
        "GPU-hours waiting for the last."
    )
    assert f.impact.gpu_hours == pytest.approx(3)
    assert f.evidence["start_spread_minutes"] == 180


def test_members_started_minutes_apart_stay_quiet() -> None:
    pods = [_member("w-0", started=START), _member("w-1", started=START + 600)]
    inv = inventory([_held("w-0", 0), _held("w-1", 1)], HOURS, pods=pods, lists=_pg("Running", 2))
    assert run_check(gpu010, inv) == []


def test_pytorchjob_missing_a_worker() -> None:
    job = {
        "metadata": {"name": "ft", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}},
    }
    labels = {"training.kubeflow.org/job-name": "ft"}
    pods = [
        make_pod("ft-master-0", owner=("PyTorchJob", "ft"), labels=labels, started=START, gpus=8),
        make_pod("ft-worker-0", owner=("PyTorchJob", "ft"), labels=labels, started=START, gpus=8),
    ]
    series = [_held("ft-master-0", i) for i in range(8)] + [
        _held("ft-worker-0", i + 8) for i in range(8)
    ]
    inv = inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [job]})
    (f,) = run_check(gpu010, inv)
    assert "runs 2 of the 3 members it needs (1 missing, 0 pending)" in f.message
    assert f.impact.gpu_hours == pytest.approx(160) and f.severity is Severity.HIGH
