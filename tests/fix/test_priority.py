"""GPU050's changes: a PriorityClass where one is needed and the `priorityClassName` patches of
the owners' pod templates; never a priority lowered; near-misses that say why."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.fix import plans, priority
from gpuaudit.fix.changes import Change, ChangeKind, Plan, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.directory import About, files
from gpuaudit.fix.plans import _validated
from gpuaudit.fix.validate import check
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, lists, page, sick
from tests.fix.kubectl import kubectl_patch

RUNNING = [
    "llm-5d9f-a",
    "llm-5d9f-b",
    "embed-0",
    "train-x",
    "nightly-29000-x",
    "nb-0",
    "scratch",
]


def _class(name: str, value: int, policy: str = "", default: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name}, "value": value, "globalDefault": default}
    if policy:
        out["preemptionPolicy"] = policy
    return out


def _ctx(
    classes: list[dict[str, Any]] | None = None,
    prio: dict[str, int] | None = None,
    state: str = "ok",
) -> Context:
    kube = lists()
    if state == "ok":
        kube["priorityclasses"] = [
            page("scheduling.k8s.io/v1", "PriorityClass", *(classes or [])),
        ]
    rows = [
        {
            C.NAMESPACE: "ml",
            C.POD: p,
            C.PHASE: "Running",
            C.GPU_REQUEST: 1.0,
            C.MIG_REQUEST: "",
            C.PRIORITY: (prio or {}).get(p, 0),
        }
        for p in RUNNING
    ]
    owners = build(kube, {"objects": STATES | {"priorityclasses": state}})
    inv = SimpleNamespace(owners=owners, pods=pd.DataFrame(rows), window_hours=168.0)
    return Context(inv, "USD", "1.34")  # type: ignore[arg-type]


def _inversion(pod: str, policy: str = "Never", pclass: str = "research-high") -> Finding:
    return Finding(
        code="GPU050",
        severity=Severity.MEDIUM,
        resource=Resource("Pod", "ml", pod, "", 4.0),
        message=f"Pod ml/{pod} (priority 5000) has waited 3.0 h for 4 GPUs.",
        impact=Impact(gpu_hours=12.0, cost=24.0),
        recommendation="Let it preempt.",
        evidence={
            "priority": 5000,
            "priority_class": pclass,
            "preemption_policy": policy,
            "lower_priority_holders": [{"pod": "ml/nb-0", "priority": 0, "gpus": 1.0}],
        },
    )


def _pool(*pods: str) -> Finding:
    return Finding(
        code="GPU050",
        severity=Severity.LOW,
        resource=Resource("NodePool", "", "NVIDIA-H100", "", 0.0),
        message="Node pool NVIDIA-H100 runs ... without a PriorityClass.",
        impact=Impact(gpu_hours=0.0, cost=0.0),
        recommendation="Give every GPU workload a PriorityClass.",
        evidence={"pods_without_priority_class": [f"ml/{p}" for p in pods]},
        category=Category.RISK,
    )


def _valid(change: Change) -> Change:
    kept, why = _validated(change, "1.34")
    assert kept is not None, why
    return kept


@pytest.mark.server
def test_a_pod_that_may_not_preempt_gets_a_class_that_may_at_its_own_value(
    tmp_path: Path,
) -> None:
    ctx = _ctx([_class("research-high", 5000, "Never")])
    f = _inversion("llm-5d9f-a")
    made, fixes = priority.changes([f], ctx)
    new, patch = made
    assert new.kind is ChangeKind.OBJECT and new.body == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "research-high-preempt"},
        "value": 5000,
        "preemptionPolicy": "PreemptLowerPriority",
        "globalDefault": False,
        "description": "gpuaudit fix: research-high, allowed to preempt",
    }
    assert _valid(new).validated == "Kubernetes 1.34"
    assert patch.title == "Give Deployment ml/llm PriorityClass research-high-preempt"
    assert patch.body["spec"] == {
        "template": {"spec": {"priorityClassName": "research-high-preempt"}}
    }
    assert "may now preempt lower-priority pods" in patch.risk and "ml/nb-0" in patch.risk
    assert "No pod's priority is lowered" in patch.risk
    assert fixes[key(f)].kind is ChangeKind.PATCH and fixes[key(f)].file == patch.file
    got = kubectl_patch(_valid(patch), tmp_path)
    assert got["spec"]["template"]["spec"]["priorityClassName"] == "research-high-preempt"
    assert got["spec"]["template"]["spec"]["containers"][0]["name"] == "server"


def test_a_class_read_of_the_same_value_and_policy_is_used_and_no_object_made() -> None:
    ctx = _ctx(
        [
            _class("research-high", 5000, "Never"),
            _class("default-5000", 5000, default=True),  # the global default: not taken
            _class("urgent", 5000),  # PreemptLowerPriority when unset
        ]
    )
    [patch], _ = priority.changes([_inversion("embed-0")], ctx)
    assert patch.kind is ChangeKind.PATCH
    assert patch.body["spec"]["template"]["spec"]["priorityClassName"] == "urgent"


def test_a_jobs_template_cannot_change_so_only_the_class_is_written() -> None:
    f = _inversion("train-x")
    [new], fixes = priority.changes([f], _ctx([_class("research-high", 5000, "Never")]))
    assert new.kind is ChangeKind.OBJECT
    assert fixes[key(f)].kind is ChangeKind.OBJECT
    assert fixes[key(f)].reason.startswith(
        "Job ml/train's pod template cannot be changed once the Job exists: set "
        "priorityClassName research-high-preempt where the Job is made"
    )


def test_a_pool_without_classes_gets_serving_and_batch_classes_by_owner() -> None:
    f = _pool(
        "llm-5d9f-a", "llm-5d9f-b", "embed-0", "nightly-29000-x", "train-x", "nb-0", "scratch"
    )
    made, fixes = priority.changes([f], _ctx())
    objects = [c for c in made if c.kind is ChangeKind.OBJECT]
    assert [c.body["metadata"]["name"] for c in objects] == ["gpu-serving", "gpu-batch"]
    assert [(c.body["value"], c.body["preemptionPolicy"]) for c in objects] == [
        (10000, "PreemptLowerPriority"),
        (100, "Never"),
    ]
    for c in objects:
        check(c.body, "1.34")
    patches = {c.target.describe(): c for c in made if c.kind is ChangeKind.PATCH and c.target}
    assert sorted(patches) == ["CronJob ml/nightly", "Deployment ml/llm", "StatefulSet ml/embed"]
    cron = patches["CronJob ml/nightly"].body["spec"]
    assert cron == {
        "jobTemplate": {"spec": {"template": {"spec": {"priorityClassName": "gpu-batch"}}}}
    }
    assert "evict no one" in patches["CronJob ml/nightly"].risk
    for c in patches.values():
        _valid(c)
    why = fixes[key(f)].reason
    assert why.startswith("3 workloads given a PriorityClass; not: ")
    assert "Job ml/train's pod template cannot be changed" in why
    assert "gpuaudit writes no template patch for Notebook ml/nb yet" in why
    assert "pod ml/scratch: a bare pod" in why


def test_no_priority_is_ever_lowered_and_a_name_taken_is_not_reused() -> None:
    ctx = _ctx([_class("gpu-batch", 50, "Never")], prio={"embed-0": 20000})
    f = _pool("embed-0", "nightly-29000-x")
    made, fixes = priority.changes([f], ctx)
    assert made == []
    why = fixes[key(f)].reason
    assert (
        "StatefulSet ml/embed's pods run at priority 20000, above 10000: gpuaudit never lowers"
        in why
    )
    assert "a PriorityClass named gpu-batch exists with value 50" in why


def test_near_misses_a_pod_that_may_preempt_and_classes_not_read() -> None:
    may = _inversion("llm-5d9f-a", policy="PreemptLowerPriority")
    made, fixes = priority.changes([may], _ctx())
    assert made == [] and fixes[key(may)].reason.startswith("its priority is above the holders'")
    f = _inversion("llm-5d9f-a")
    made, fixes = priority.changes([f], _ctx(state="forbidden (403)"))
    assert made == []
    assert fixes[key(f)].reason.startswith("the PriorityClasses were not read (forbidden (403))")


def test_the_folder_creates_the_new_class_before_the_patch_that_names_it() -> None:
    ctx = _ctx([_class("research-high", 5000, "Never")])
    made, _ = priority.changes([_inversion("llm-5d9f-a")], ctx)
    kept = [_valid(c) for c in made]
    plan = Plan(tuple(sorted(kept, key=lambda c: c.kind is ChangeKind.OBJECT)), {}, "")
    texts = files(plan, About("prod-1", "a week", "the demo"))
    script = texts["apply.sh"]
    new, patch = kept
    assert script.index(f'k apply -f "$here/{new.file}"') < script.index(patch.file)
    kust = yaml.safe_load(texts["kustomization.yaml"])
    assert kust["resources"] == [new.file]
    assert [p["path"] for p in kust["patches"]] == [patch.file]
    assert "# validated: this object, against Kubernetes 1.34" in texts[new.file]


def test_a_system_priority_is_not_copied() -> None:
    f = _inversion("llm-5d9f-a", pclass="system-cluster-critical")
    f = Finding(**{**f.__dict__, "evidence": {**f.evidence, "priority": 2000000000}})
    made, fixes = priority.changes([f], _ctx())
    assert made == [] and "system class" in fixes[key(f)].reason


def test_a_new_class_is_not_written_when_every_patch_that_names_it_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two inversions share the new class (made by the first): the first's patch fails
    validation, the second's places work on a node a GPU070 finding drains (coherence). The
    class that no written template names is not written either; with the second kept, it is."""
    ctx = _ctx([_class("research-high", 5000, "Never")])
    first = _inversion("llm-5d9f-a")
    second = Finding(**{**_inversion("embed-0").__dict__, "targets": ("gpu-7",)})
    real = plans._validated

    def refuse(change: Change, version: str) -> tuple[Change | None, str]:
        if change.target is not None and change.target.kind == "Deployment":
            return None, "does not validate against the schema (a test's refusal)"
        return real(change, version)

    monkeypatch.setattr(plans, "_validated", refuse)
    got = plans.plan([first, second, sick("gpu-7")], ctx.inv, "USD")
    assert [c.kind for c in got.changes] == [ChangeKind.COMMAND]  # the drain alone
    assert got.fixes[key(first)].reason.startswith(
        "the change was not written: it does not validate against the schema"
    )
    assert got.fixes[key(second)].reason.startswith(
        "the change was not written: it would place work on node gpu-7, which GPU070 takes"
    )
    kept = plans.plan([first, second], ctx.inv, "USD")
    objects = [c for c in kept.changes if c.kind is ChangeKind.OBJECT]
    assert [c.body["metadata"]["name"] for c in objects] == ["research-high-preempt"]
    [patch] = [c for c in kept.changes if c.kind is ChangeKind.PATCH]
    assert patch.target is not None and patch.target.describe() == "StatefulSet ml/embed"
    assert objects[0].serves == (
        next(c.file for c in priority.changes([first], ctx)[0] if c.kind is ChangeKind.PATCH),
        patch.file,
    )


def test_a_class_made_for_a_job_stands_by_itself() -> None:
    """A Job's class is named where the Job is made: no patch of this plan needs to name it."""
    [new], _ = priority.changes(
        [_inversion("train-x")], _ctx([_class("research-high", 5000, "Never")])
    )
    assert new.serves == ()
    assert plans.used([new], {}) == [new]
