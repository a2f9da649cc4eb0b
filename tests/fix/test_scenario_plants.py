"""`gpuaudit fix` on a generated scenario writes the Volcano and KAI queue patches, the
PriorityClass changes and the node pool changes where the generator plants such cases
(`gpuaudit.scenario.quota_cases`, `kai_cases`, `cases.plant_pending`, `nodepool_cases`)."""

from __future__ import annotations

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import ChangeKind, FindingFix
from tests.fix.test_scenario_fix import _scenario


def _by(code: str, name: str) -> tuple[Finding, FindingFix, AuditResult]:
    _, result = _scenario()
    f = next(f for f in result.findings if f.code == code and f.resource.name == name)
    got = result.fixes.of(f)
    assert got is not None, (code, name)
    return f, got, result


def test_the_planted_queues_get_their_patches() -> None:
    _, volcano, result = _by("GPU090", "vision-reserved")
    assert volcano.kind is ChangeKind.PATCH and volcano.target is not None
    assert volcano.target.api_version == "scheduling.volcano.sh/v1beta1"
    _, kai, _ = _by("GPU090", "kai-train")
    assert kai.kind is ChangeKind.PATCH
    queues = {
        c.target.name: c
        for c in result.fixes.changes
        if c.target is not None and c.target.api_version == "scheduling.run.ai/v2"
    }
    # the idle queue's quota moves to the one queue that waited next to it
    assert queues["kai-train"].body[-1]["value"] == 0
    assert queues["kai-infer"].title.startswith("Raise the quota of KAI Queue kai-infer")
    assert all(c.validated.endswith("CRD") for c in queues.values())


def test_the_inversion_gets_a_class_that_may_preempt_and_the_other_wait_none() -> None:
    _, never, result = _by("GPU050", "eval-llm-0")
    assert never.kind is ChangeKind.OBJECT
    [obj] = [c for c in result.fixes.changes if c.file == never.file]
    assert obj.body["metadata"]["name"] == "research-high-preempt"
    assert obj.body["value"] == 5000 and obj.body["preemptionPolicy"] == "PreemptLowerPriority"
    assert obj.validated.startswith("Kubernetes")
    _, may, _ = _by("GPU050", "queued-train-0")
    assert may.kind is None and may.reason.startswith("its priority is above the holders'")


def test_the_planted_node_pools_get_what_their_truth_says() -> None:
    sc, result = _scenario()
    by_node = {f.resource.name: f for f in result.findings if f.code == "GPU060"}
    want = {"patch": ChangeKind.PATCH, "command": ChangeKind.COMMAND, "none": None}
    for entry in sc.truth["node_fixes"]:
        got = result.fixes.of(by_node[entry["node"]])
        assert got is not None and got.kind is want[entry["fix"]], (entry, got)
        if "target" in entry:
            assert got.target is not None and got.target.describe() == entry["target"]
        else:
            assert got.reason.startswith("NodePool gpu-steady consolidates already"), got


def test_a_node_another_finding_moves_work_onto_is_not_released() -> None:
    _, result = _scenario()
    released_in_use = [
        f
        for f in result.findings
        if f.code == "GPU060" and "released_in_use" in (f.evidence.get("coherence") or {})
    ]
    assert released_in_use  # the move cases place work on an idle GB200 node
    for f in released_in_use:
        got = result.fixes.of(f)
        assert got is not None and got.kind is None
        assert got.reason.startswith("the change was not written: it would release node")
