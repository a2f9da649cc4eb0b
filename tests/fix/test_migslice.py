"""GPU021's and GPU020's change: the owner's pod template moved to a MIG profile a node offers
(a strategic merge patch, containers merged by name), applied with the real kubectl; and the
near-misses that get none, each saying why."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from gpuaudit.checks.findings import Category, Finding, Impact, Resource, Severity
from gpuaudit.fix import migslice
from gpuaudit.fix.changes import ChangeKind, FindingFix, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.plans import _validated, coherent
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, lists, pods_table, sick
from tests.fix.kubectl import kubectl_patch

A100 = "NVIDIA A100-SXM4-80GB"
LLM = [("ml", "llm-5d9f-a"), ("ml", "llm-5d9f-b")]


def node(name: str, product: str, config: str = "", **alloc: float) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product}
    if config:
        labels["nvidia.com/mig.config"] = config
    return {
        C.NODE: name,
        C.PRODUCT: product,
        C.ALLOCATABLE: {f"nvidia.com/mig-{k.replace('_', '.')}": v for k, v in alloc.items()},
        C.NODE_LABELS: labels,
    }


MIG_NODES = [
    node("a100-mig-0", "NVIDIA-A100-SXM4-80GB", "all-balanced", **{"3g_40gb": 2, "1g_10gb": 2}),
    node("a100-mig-1", "NVIDIA-A100-SXM4-80GB", "custom", **{"3g_40gb": 2, "2g_20gb": 3}),
    node("h100-mig-0", "NVIDIA-H100-80GB-HBM3", "all-1g.20gb", **{"1g_20gb": 7}),
]


def context(
    running: list[tuple[str, str]],
    nodes: list[dict[str, Any]] | None = None,
    kube: dict[str, list[dict[str, Any]]] | None = None,
) -> Context:
    inv = SimpleNamespace(
        owners=build(kube or lists(), {"objects": STATES}),
        pods=pods_table(running),
        nodes=pd.DataFrame(MIG_NODES if nodes is None else nodes),
        window_hours=168.0,
    )
    return Context(inv, "USD", "1.34")  # type: ignore[arg-type]


def oversized(pod: str, fits: str, share: float, model: str = A100, hours: float = 96.0) -> Finding:
    return Finding(
        code="GPU021",
        severity=Severity.MEDIUM,
        resource=Resource("Pod", "ml", pod, "node-1", 1.0),
        message=f"Pod ml/{pod} held a whole GPU but {fits} fits it.",
        impact=Impact(gpu_hours=hours, cost=hours * 2.0),
        recommendation=f"Request nvidia.com/mig-{fits}.",
        evidence={"fits": fits, "share_of_gpu": share, "gpu_model": model, "headroom": 0.2},
    )


def pressure(pod: str, profile: str, peak_mib: float | None, model: str = A100) -> Finding:
    return Finding(
        code="GPU020",
        severity=Severity.HIGH,
        resource=Resource("Pod", "ml", pod, "node-1", 1.0),
        message=f"Pod ml/{pod} used 99 % of the memory of its {profile} MIG slice.",
        impact=Impact(gpu_hours=0.0, cost=0.0),
        recommendation="Move it to the next profile up.",
        evidence={
            "mig_profile": profile,
            "gpu_model": model,
            "fb_used_max_mib": peak_mib,
            "headroom": 0.2,
        },
        category=Category.RISK,
    )


def _mig_kube(profile: str = "1g.10gb") -> dict[str, list[dict[str, Any]]]:
    """`lists()` with StatefulSet ml/embed's container on a MIG slice, beside a sidecar."""
    kube = copy.deepcopy(lists())
    sts = kube["statefulsets"][0]["items"][0]
    res = {f"nvidia.com/mig-{profile}": "1"}
    sts["spec"]["template"]["spec"]["containers"] = [
        {"name": "proxy"},
        {"name": "server", "resources": {"limits": dict(res), "requests": dict(res)}},
    ]
    return kube


@pytest.mark.server
def test_an_oversized_deployment_moves_to_the_largest_profile_its_pods_fit(
    tmp_path: Path,
) -> None:
    a = oversized("llm-5d9f-a", "3g.40gb", 3 / 7)
    b = oversized("llm-5d9f-b", "1g.10gb", 1 / 7)
    made, fixes = migslice.changes([a, b], context(LLM))
    [change] = made
    assert change.kind is ChangeKind.PATCH and change.patch_type == "strategic"
    assert change.title == "Move Deployment ml/llm from a whole GPU to MIG 3g.40gb"
    swap = {"nvidia.com/gpu": None, "nvidia.com/mig-3g.40gb": "1"}
    assert change.body["spec"] == {
        "template": {
            "spec": {
                "containers": [{"name": "server", "resources": {"limits": swap, "requests": swap}}],
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            }
        }
    }
    # b fit 1g.10gb; on 3g.40gb it frees (1 - 3/7) / (1 - 1/7) of what its finding counted.
    assert change.savings.gpu_hours == pytest.approx((96.0 + 96.0 * (4 / 7) / (6 / 7)) * 168 / 168)
    assert fixes[key(a)].reason == "2 nodes offer 3g.40gb"
    got = kubectl_patch(change, tmp_path)
    [container] = got["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": "1"}
    assert container["resources"]["requests"] == {"nvidia.com/mig-3g.40gb": "1"}
    kept, why = _validated(change, "1.34")
    assert kept is not None and kept.validated == "Kubernetes 1.34", why


@pytest.mark.server
def test_pressure_on_a_slice_moves_to_the_next_profile_a_node_offers(tmp_path: Path) -> None:
    # 9.8 GiB peak + 20 % fits 1g.20gb, which no A100 node offers: the next offered is 2g.20gb.
    f = pressure("embed-0", "1g.10gb", 9800.0)
    [change], fixes = migslice.changes([f], context([("ml", "embed-0")], kube=_mig_kube()))
    assert change.title == "Move StatefulSet ml/embed from MIG 1g.10gb to MIG 2g.20gb"
    assert change.savings.gpu_hours == 0.0
    # One node offers it: the selector is its product, which the 2 A100 nodes share.
    pod_spec = change.body["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    got = kubectl_patch(change, tmp_path)
    proxy, server = got["spec"]["template"]["spec"]["containers"]
    assert proxy == {"name": "proxy"}
    assert server["resources"]["limits"] == {"nvidia.com/mig-2g.20gb": "1"}
    assert fixes[key(f)].reason == "1 node offers 2g.20gb"


@pytest.mark.server
def test_a_cronjobs_job_template_is_patched(tmp_path: Path) -> None:
    f = oversized("nightly-29000-x", "3g.40gb", 3 / 7)
    [change], _ = migslice.changes([f], context([]))
    assert change.target is not None and change.target.describe() == "CronJob ml/nightly"
    inner = change.body["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert inner["containers"][0]["name"] == "server"
    kubectl_patch(change, tmp_path)


def test_the_selector_falls_back_to_the_mig_layout_label_then_to_none() -> None:
    mixed = [
        node("a", "NVIDIA-A100-SXM4-80GB", "all-3g", **{"3g_40gb": 2}),
        node("b", "NVIDIA A100-SXM4-80GB", "all-3g", **{"3g_40gb": 2}),
    ]
    f = oversized("llm-5d9f-a", "3g.40gb", 3 / 7)
    g = oversized("llm-5d9f-b", "3g.40gb", 3 / 7)
    [change], _ = migslice.changes([f, g], context(LLM, mixed))
    spec = change.body["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/mig.config": "all-3g"}
    mixed[1][C.NODE_LABELS]["nvidia.com/mig.config"] = "other"
    [change], _ = migslice.changes([f, g], context(LLM, mixed))
    assert "nodeSelector" not in change.body["spec"]["template"]["spec"]
    assert "none: the offering nodes share no product or MIG layout label" in change.notes[1]


def test_near_misses_get_no_change_and_say_why() -> None:
    h100 = oversized("llm-5d9f-a", "1g.10gb", 1 / 7, model="NVIDIA H100 80GB HBM3")
    busy = oversized("llm-5d9f-a", "3g.40gb", 3 / 7)
    sliced = oversized("embed-0", "a half of a time-sliced GPU", 0.5)
    job = oversized("train-x", "3g.40gb", 3 / 7)
    notebook = oversized("nb-0", "3g.40gb", 3 / 7)
    whole = pressure("embed-0", "", 79000.0)
    bare = oversized("scratch", "3g.40gb", 3 / 7)
    _, fixes = migslice.changes([h100], context([("ml", "llm-5d9f-a")]))
    ctx = context(LLM)
    assert fixes[key(h100)].reason == (
        "no node offers 1g.10gb of the NVIDIA H100 80GB HBM3 (its nodes offer 1g.20gb)"
    )
    made, fixes = migslice.changes([busy, sliced, job, notebook, whole, bare], ctx)
    assert made == []
    why = {f.resource.name: fixes[key(f)].reason for f in (busy, job, notebook, bare)}
    assert why["llm-5d9f-a"].startswith("1 of the 2 pods of Deployment ml/llm holding GPUs")
    assert "a Job's pod template cannot be changed" in why["train-x"]
    assert "no change of a Notebook's pod template yet" in why["nb-0"]
    assert why["scratch"].startswith("pod ml/scratch is a bare pod")
    assert "time-sliced share" in fixes[key(sliced)].reason
    assert "whole GPU, which has no larger MIG profile" in fixes[key(whole)].reason


def test_no_node_offers_the_profile_within_the_templates_selector() -> None:
    kube = copy.deepcopy(lists())
    dep = kube["deployments"][0]["items"][0]
    dep["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "gpu-a"}
    a, b = oversized("llm-5d9f-a", "3g.40gb", 3 / 7), oversized("llm-5d9f-b", "3g.40gb", 3 / 7)
    made, fixes = migslice.changes([a, b], context(LLM, kube=kube))
    assert made == []
    assert fixes[key(a)].reason.startswith("no node offers 3g.40gb of the NVIDIA A100-SXM4-80GB")


def test_no_larger_profile_that_fits_or_is_offered() -> None:
    f = pressure("embed-0", "3g.40gb", 78000.0)
    _, fixes = migslice.changes([f], context([("ml", "embed-0")], kube=_mig_kube("3g.40gb")))
    assert fixes[key(f)].reason == (f"no profile of the {A100} above 3g.40gb fits 91.4 GiB")
    g = pressure("embed-0", "1g.10gb", 50000.0)
    _, fixes = migslice.changes([g], context([("ml", "embed-0")], kube=_mig_kube()))
    assert fixes[key(g)].reason.startswith(f"no node offers 7g.80gb of the {A100}")


def test_pressure_on_a_part_of_a_split_series_without_a_peak_gets_no_change() -> None:
    f = pressure("embed-0", "3g.40gb", None)  # GPU020 on a part: its fullest hour, no peak
    made, fixes = migslice.changes([f], context([("ml", "embed-0")], kube=_mig_kube("3g.40gb")))
    assert made == []
    assert fixes[key(f)].reason.startswith("its peak framebuffer use, which the profile must fit")


def test_a_slice_is_not_placed_only_on_nodes_a_finding_drains() -> None:
    """The change names the nodes that offer its profile (`lands`): where GPU070 drains one of
    two, the change stands and its note says the pods land on the other (a cordoned node takes
    no new pod); where it drains both, the change is not written and says why."""
    a = oversized("llm-5d9f-a", "3g.40gb", 3 / 7)
    b = oversized("llm-5d9f-b", "3g.40gb", 3 / 7)
    [change], _ = migslice.changes([a, b], context(LLM))
    assert change.lands == ("a100-mig-0", "a100-mig-1")
    fixes: dict[str, FindingFix] = {}
    [kept] = coherent([change], [a, b, sick("a100-mig-0")], fixes)
    assert kept.notes[-1] == (
        "taken out of service by another finding: a100-mig-0 (GPU070); cordoned, they take no "
        "new pod, so the pods land on a100-mig-1"
    )
    assert fixes == {}
    both = [a, b, sick("a100-mig-0"), sick("a100-mig-1", "GPU-2")]
    assert coherent([change], both, fixes) == []
    assert (
        fixes[key(a)].reason
        == fixes[key(b)].reason
        == (
            "the change was not written: every node it may be placed on is taken out of service "
            "(a100-mig-0 (GPU070), a100-mig-1 (GPU070)): its pods would wait Pending; wait until "
            "one is back"
        )
    )
    # Another cluster's node of the same name drains nothing here.
    assert coherent([change], [a, b, sick("east/a100-mig-0"), sick("east/a100-mig-1")], {}) == [
        change
    ]
