from __future__ import annotations

import pytest

from gpuaudit.checks import gpu080_unmonitored_gpus as gpu080
from gpuaudit.checks.findings import Finding, Severity
from tests.support.factories import (
    START,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_node,
    make_pod,
    run_check,
)

HOURS = 10


def _run(pods: list[dict[str, object]]) -> list[Finding]:
    seen = Series(gpu_labels(host="node-a", pod="seen-0", namespace="ml"), act=[0.5] * HOURS)
    nodes = [make_node("node-a"), make_node("node-b")]
    return run_check(gpu080, inventory([seen], HOURS, pods=pods, nodes=nodes))  # type: ignore[arg-type]


def _pod(name: str, node: str, gpus: int = 1, **kw: object) -> dict[str, object]:
    return make_pod(name, "ml", node=node, gpus=gpus, started=START - 3600, **kw)  # type: ignore[arg-type]


def test_a_node_without_any_dcgm_series_is_one_finding() -> None:
    found = _run([_pod("seen-0", "node-a"), _pod("train-0", "node-b", 8)])
    (f,) = found
    assert f.code == "GPU080" and f.severity is Severity.MEDIUM
    assert (f.resource.kind, f.resource.name) == ("Node", "node-b")
    assert f.impact.gpu_hours == pytest.approx(80)
    assert f.impact.cost == pytest.approx(80 * 6.88)
    assert f.message == (
        "Node node-b has 8 GPUs held by 1 pod (ml/train-0) but no DCGM series at all: 80 "
        "GPU-hours could not be audited."
    )
    assert "Run dcgm-exporter on node-b" in f.recommendation
    assert f.pods == ("ml/train-0",)


def test_a_pod_the_exporter_does_not_map_on_a_monitored_node() -> None:
    (f,) = _run([_pod("seen-0", "node-a"), _pod("hidden-0", "node-a", 2)])
    assert (f.resource.kind, f.resource.name, f.resource.node) == ("Pod", "hidden-0", "node-a")
    assert f.impact.gpu_hours == pytest.approx(20)
    assert f.message == (
        "Pod ml/hidden-0 holds 2 GPUs on node-a but no DCGM series names it: 20 GPU-hours "
        "could not be audited."
    )
    assert "NVIDIA_RESOURCE_NAMES" in f.recommendation


def test_hours_count_from_the_pods_start() -> None:
    late = make_pod("late-0", "ml", node="node-b", started=START + 6 * 3600)
    (f,) = _run([late])
    assert f.impact.gpu_hours == pytest.approx(4)


def _ended(name: str, finished: float | None) -> dict[str, object]:
    pod = _pod(name, "node-b", 2, phase="Succeeded")
    end = {"finishedAt": iso(finished)} if finished is not None else {}
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": end}}]  # type: ignore[index]
    return pod


def test_a_pod_that_ended_counts_to_its_end() -> None:
    # Succeeded 3 hours into the window: 2 GPUs for 3 hours (issue 32).
    (f,) = _run([_ended("done-0", START + 3 * 3600)])
    assert f.impact.gpu_hours == pytest.approx(6)
    # Ended before the window, or at a time no container says: nothing to count.
    assert _run([_ended("old-0", START - 60), _ended("unknown-0", None)]) == []


def test_near_miss_monitored_pending_or_gpu_less_pods_stay_quiet() -> None:
    pods = [
        _pod("seen-0", "node-a"),
        _pod("waiting-0", "", phase="Pending"),
        _pod("cpu-0", "node-b", 0),
    ]
    assert _run(pods) == []


def test_near_miss_a_holding_under_an_hour_stays_quiet() -> None:
    just = make_pod("just-0", "ml", node="node-b", started=START + HOURS * 3600 - 1800)
    assert _run([just]) == []
