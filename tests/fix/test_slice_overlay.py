"""The Volcano and KAI Queue patches, the PriorityClass and its template patch, and the NodePool
patch, in one folder: the kustomize Component an overlay of the objects as read applies with
the real `kubectl kustomize`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaudit.fix import priority, queue_quota, warm_nodes
from gpuaudit.fix.changes import Change, Plan
from gpuaudit.fix.directory import About, files, write
from gpuaudit.fix.plans import _validated
from tests.fix import test_priority, test_queue_quota, test_warm_nodes
from tests.fix.kubectl import overlay


def _changes() -> list[Change]:
    made: list[Change] = []
    made += queue_quota.changes(
        [
            test_queue_quota._volcano_finding(
                "idle_quota", guarantee=8.0, quota=12.0, recommended_quota=3.0
            ),
            test_queue_quota._kai_finding(
                "kai_reclaimable_quota",
                "idle-team",
                quota=8.0,
                recommended_quota=5.0,
                reclaimable=3,
                waiting=[{"queue": "busy-team"}],
            ),
        ],
        test_queue_quota._ctx(),
    )[0]
    ctx = test_priority._ctx([test_priority._class("research-high", 5000, "Never")])
    made += priority.changes([test_priority._inversion("llm-5d9f-a")], ctx)[0]
    made += warm_nodes.changes([test_warm_nodes.warm("burst-1")], test_warm_nodes._ctx())[0]
    kept = [_validated(c, "1.34")[0] for c in made]
    assert all(kept)
    return [c for c in kept if c is not None]


@pytest.mark.server
def test_the_component_applies_every_change_of_the_slice(tmp_path: Path) -> None:
    changes = _changes()
    fix = tmp_path / "fix"
    write(files(Plan(tuple(changes), {}, "Kubernetes 1.34"), About("c", "w", "s")), fix)
    built = overlay(changes, fix, tmp_path)
    by = {(d["kind"], d["metadata"]["name"]): d for d in built}
    assert by[("Queue", "research")]["spec"]["guarantee"]["resource"]["nvidia.com/gpu"] == 3
    assert by[("Queue", "idle-team")]["spec"]["resources"]["gpu"]["quota"] == 5
    assert by[("Queue", "busy-team")]["spec"]["resources"]["gpu"]["quota"] == 7
    assert by[("PriorityClass", "research-high-preempt")]["value"] == 5000
    template = by[("Deployment", "llm")]["spec"]["template"]["spec"]
    assert template["priorityClassName"] == "research-high-preempt"
    disruption = by[("NodePool", "gpu-burst")]["spec"]["disruption"]
    assert disruption == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "1h",
    }
