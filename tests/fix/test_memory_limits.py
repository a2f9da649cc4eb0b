"""GPU004's changes: the OOM-killed container's memory limit raised in its owner's pod template
to the finding's recommended limit, validated; near-misses that say why."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.fix import memory_limits
from gpuaudit.fix.changes import ChangeKind, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.plans import _validated
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, lists


def _ctx(limit: str = "", request: str = "") -> Context:
    kube = lists()
    for resource in ("deployments", "statefulsets", "cronjobs"):
        for item in kube[resource][0]["items"]:
            spec = item["spec"]
            tpl = (
                spec["jobTemplate"]["spec"]["template"]
                if "jobTemplate" in spec
                else (spec["template"])
            )
            res = tpl["spec"]["containers"][0]["resources"]
            if limit:
                res["limits"]["memory"] = limit
            if request:
                res["requests"] = {"memory": request}
    inv = SimpleNamespace(
        owners=build(kube, {"objects": STATES}), pods=pd.DataFrame(), window_hours=168.0
    )
    return Context(inv, "USD", "1.34")  # type: ignore[arg-type]


def _oom(pod: str, **ev: Any) -> Finding:
    evidence: dict[str, Any] = {
        "restarts": 12,
        "last_reason": "OOMKilled",
        "oom_container": "server",
        "memory_working_set_max_bytes": round(15.5 * 2**30),
        "memory_limit_bytes": 16 * 2**30,
        "memory_recommended_limit": "20Gi",
        "memory_recommended_limit_bytes": 20 * 2**30,
    }
    evidence.update(ev)
    return Finding(
        code="GPU004",
        severity=Severity.MEDIUM,
        resource=Resource("Pod", "ml", pod, "", 1.0),
        message=f"Pod ml/{pod} is in CrashLoopBackOff (12 restarts, last OOMKilled) ...",
        impact=Impact(gpu_hours=5.0, cost=34.4),
        recommendation="Raise its memory limit.",
        evidence=evidence,
    )


@pytest.mark.parametrize(
    ("pod", "owner", "path"),
    [
        ("embed-0", "StatefulSet ml/embed", ("template",)),
        ("llm-5d9f-a", "Deployment ml/llm", ("template",)),
        ("nightly-29000-x", "CronJob ml/nightly", ("jobTemplate", "spec", "template")),
    ],
)
def test_the_oom_killed_containers_limit_is_raised_in_its_owners_template(
    pod: str, owner: str, path: tuple[str, ...]
) -> None:
    f = _oom(pod)
    [patch], fixes = memory_limits.changes([f], _ctx("16Gi"))
    assert patch.kind is ChangeKind.PATCH and patch.patch_type == "strategic"
    assert patch.title == f"Raise container server's memory limit in {owner} to 20Gi"
    spec: Any = patch.body["spec"]
    for k in path:
        spec = spec[k]
    memory = {"memory": "20Gi"}
    assert spec == {
        "spec": {
            "containers": [{"name": "server", "resources": {"limits": memory, "requests": memory}}]
        }
    }
    assert "goes from 16Gi to 20Gi, and its request from none to 20Gi" in patch.risk
    assert ("delete the crash-looping pod" in patch.risk) == owner.startswith("StatefulSet")
    kept, why = _validated(patch, "1.34")
    assert kept is not None, why
    assert fixes[key(f)].kind is ChangeKind.PATCH and fixes[key(f)].file == patch.file


@pytest.mark.parametrize(
    ("pod", "ev", "limit", "asked", "why"),
    [
        ("train-x", {}, "16Gi", "", "Job ml/train's pod template cannot be changed"),
        ("scratch", {}, "16Gi", "", "pod ml/scratch is a bare pod"),
        ("nb-0", {}, "16Gi", "", "gpuaudit writes no template patch for Notebook ml/nb"),
        ("embed-0", {"last_reason": "Error"}, "16Gi", "", "it was not OOM-killed"),
        (
            "embed-0",
            {"memory_recommended_limit": None, "host_memory_needed": "not measured: no series"},
            "16Gi",
            "",
            "the memory it needed is not measured (not measured: no series)",
        ),
        ("embed-0", {"oom_container": "sidecar"}, "16Gi", "", "has no container sidecar"),
        ("embed-0", {}, "24Gi", "", "a memory limit of 24Gi already, at least 20Gi"),
        ("embed-0", {}, "", "32Gi", "asks 32Gi of memory for container server, above 20Gi"),
    ],
)
def test_no_change_and_why(pod: str, ev: dict[str, Any], limit: str, asked: str, why: str) -> None:
    f = _oom(pod, **ev)
    made, fixes = memory_limits.changes([f], _ctx(limit, asked))
    assert made == []
    assert fixes[key(f)].kind is None and why in fixes[key(f)].reason


def test_one_patch_per_owner() -> None:
    a, b = _oom("llm-5d9f-a"), _oom("llm-5d9f-b")
    made, fixes = memory_limits.changes([a, b], _ctx("16Gi"))
    assert len(made) == 1
    assert "patched by another GPU004 change already" in fixes[key(b)].reason


def test_a_template_without_a_limit_gets_one() -> None:
    [patch], _ = memory_limits.changes([_oom("embed-0")], _ctx())
    assert "goes from none to 20Gi, and its request from none to 20Gi" in patch.risk
    assert _validated(patch, "1.34")[0] is not None
