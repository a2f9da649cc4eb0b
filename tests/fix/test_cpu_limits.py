"""GPU041's changes: each CPU-starved container's CPU limit and request set in its owner's pod
template to the finding's recommended ones, validated; near-misses that say why."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.fix import cpu_limits
from gpuaudit.fix.changes import ChangeKind, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.plans import _validated
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, lists


def _ctx(limit: str = "") -> Context:
    kube = lists()
    for resource in ("deployments", "statefulsets", "cronjobs"):
        for item in kube[resource][0]["items"]:
            spec = item["spec"]
            tpl = (
                spec["jobTemplate"]["spec"]["template"]
                if "jobTemplate" in spec
                else spec["template"]
            )
            if limit:
                tpl["spec"]["containers"][0]["resources"]["limits"]["cpu"] = limit
    inv = SimpleNamespace(
        owners=build(kube, {"objects": STATES}), pods=pd.DataFrame(), window_hours=168.0
    )
    return Context(inv, "USD", "1.34")  # type: ignore[arg-type]


def _starved(pod: str, container: str = "server", limit: str | None = "3") -> Finding:
    advice = {"recommended_cpu_limit": limit, "recommended_cpu_request": "2"}
    return Finding(
        code="GPU041",
        severity=Severity.MEDIUM,
        resource=Resource("Pod", "ml", pod, "", 2.0),
        message=f"Pod ml/{pod} held 2 GPUs (H100) at 20 % ... while CPU-starved ...",
        impact=Impact(gpu_hours=38.4, cost=264.0),
        recommendation="Give it the CPU it needs.",
        evidence={"containers": [{"container": container, "cpu_limit_cores": 2.0, **advice}]},
    )


@pytest.mark.parametrize(
    ("pod", "owner", "path"),
    [
        ("embed-0", "StatefulSet ml/embed", ("template",)),
        ("llm-5d9f-a", "Deployment ml/llm", ("template",)),
        ("nightly-29000-x", "CronJob ml/nightly", ("jobTemplate", "spec", "template")),
    ],
)
def test_the_starved_containers_cpu_is_set_in_its_owners_template(
    pod: str, owner: str, path: tuple[str, ...]
) -> None:
    f = _starved(pod)
    [patch], fixes = cpu_limits.changes([f], _ctx("2"))
    assert patch.kind is ChangeKind.PATCH and patch.patch_type == "strategic"
    assert patch.title == f"Give container(s) server in {owner} the CPU they need"
    spec: Any = patch.body["spec"]
    for k in path:
        spec = spec[k]
    resources = {"limits": {"cpu": "3"}, "requests": {"cpu": "2"}}
    assert spec == {"spec": {"containers": [{"name": "server", "resources": resources}]}}
    assert "container server's CPU limit goes from 2 to 3 (request 2)" in patch.risk
    kept, why = _validated(patch, "1.34")
    assert kept is not None, why
    assert fixes[key(f)].kind is ChangeKind.PATCH and fixes[key(f)].file == patch.file


@pytest.mark.parametrize(
    ("pod", "container", "limit", "held", "why"),
    [
        ("train-x", "server", "3", "2", "Job ml/train's pod template cannot be changed"),
        ("scratch", "server", "3", "2", "pod ml/scratch is a bare pod"),
        ("nb-0", "server", "3", "2", "gpuaudit writes no template patch for Notebook ml/nb"),
        ("embed-0", "sidecar", "3", "2", "has no container sidecar"),
        ("embed-0", "server", "3", "4", "at least the recommended CPU limits already"),
        ("embed-0", "server", None, "2", "recommends no CPU for any container"),
    ],
)
def test_no_change_and_why(
    pod: str, container: str, limit: str | None, held: str, why: str
) -> None:
    f = _starved(pod, container, limit)
    made, fixes = cpu_limits.changes([f], _ctx(held))
    assert made == []
    assert fixes[key(f)].kind is None and why in fixes[key(f)].reason


def test_one_patch_per_owner() -> None:
    a, b = _starved("llm-5d9f-a"), _starved("llm-5d9f-b")
    made, fixes = cpu_limits.changes([a, b], _ctx("2"))
    assert len(made) == 1
    assert "patched by another GPU041 change already" in fixes[key(b)].reason


def test_a_template_without_a_cpu_limit_gets_one() -> None:
    [patch], _ = cpu_limits.changes([_starved("embed-0")], _ctx())
    assert "goes from none to 3" in patch.risk
    assert _validated(patch, "1.34")[0] is not None
