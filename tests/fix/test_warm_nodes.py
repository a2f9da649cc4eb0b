"""GPU060's changes: the Karpenter NodePool's disruption settings as a patch where the NodePool
was read, else the cluster autoscaler's command; near-misses that say why; and the plan's rule
that no change releases a node another finding places work on, nor places work on a drained
node."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.fix import warm_nodes
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, Savings, key
from gpuaudit.fix.context import Context, node_key
from gpuaudit.fix.plans import _validated, coherent
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, lists, page, pods_table, sick
from tests.fix.kubectl import kubectl_patch

DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def _node(name: str, pool: str = "", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}}
    if pool:
        meta["labels"]["karpenter.sh/nodepool"] = pool
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {}}


def _pool(name: str, policy: str, after: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "disruption": {"consolidationPolicy": policy, "consolidateAfter": after},
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "gpu",
                    },
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        }
                    ],
                }
            },
            **spec,
        },
    }


def _ctx(pools_state: str = "ok") -> Context:
    kube = lists() | {
        "nodes": [
            page(
                "v1",
                "Node",
                _node("burst-1", "gpu-burst"),
                _node("burst-2", "gpu-burst"),
                _node("steady-1", "gpu-steady"),
                _node("static-1", "gpu-static"),
                _node("lost-1", "gpu-lost"),
                _node("pinned-1", annotations={DISABLED: "true"}),
                _node("plain-1"),
            )
        ],
    }
    if pools_state == "ok":
        kube["karpenter_nodepools"] = [
            page(
                "karpenter.sh/v1",
                "NodePool",
                _pool("gpu-burst", "WhenEmpty", "Never"),
                _pool("gpu-steady", "WhenEmptyOrUnderutilized", "5m"),
                _pool("gpu-static", "WhenEmpty", "0s", replicas=2),
            )
        ]
    states = STATES | {"nodes": "ok", "karpenter_nodepools": pools_state}
    inv = SimpleNamespace(
        owners=build(kube, {"objects": states}), pods=pods_table([]), window_hours=168.0
    )
    return Context(inv, "USD", "1.34")  # type: ignore[arg-type]


def warm(node: str, hours: float = 48.0, pods: tuple[str, ...] = ()) -> Finding:
    return Finding(
        code="GPU060",
        severity=Severity.MEDIUM,
        resource=Resource("Node", "", node, node, 4.0),
        message=f"Node {node} (4 GPUs, L40S) had no GPU pod at work for {hours:.0f} h.",
        impact=Impact(gpu_hours=4 * hours, cost=8 * hours),
        recommendation="Let the autoscaler remove it.",
        evidence={"gpus": 4.0, "idle_hours": hours},
        releases=(node,),
        pods=pods,
    )


def _valid(change: Change) -> Change:
    kept, why = _validated(change, "1.34")
    assert kept is not None, why
    return kept


@pytest.mark.server
def test_a_karpenter_pool_that_does_not_consolidate_is_patched_once_for_its_nodes(
    tmp_path: Path,
) -> None:
    one, two = warm("burst-1"), warm("burst-2", 24.0)
    [change], fixes = warm_nodes.changes([one, two], _ctx())
    assert change.kind is ChangeKind.PATCH and change.patch_type == "merge"
    assert change.body == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu-burst"},
        "spec": {
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "1h",
            }
        },
    }
    assert change.title == (
        "Let NodePool gpu-burst consolidate its idle nodes: consolidationPolicy WhenEmpty to "
        "WhenEmptyOrUnderutilized; consolidateAfter Never to 1h"
    )
    assert change.findings == (one, two)
    assert change.savings.gpu_hours == pytest.approx(4 * 48 + 4 * 24)
    assert "burst-1, burst-2" in change.risk
    assert change.target is not None and change.target.resource() == "nodepools.karpenter.sh"
    assert fixes[key(one)].file == fixes[key(two)].file == change.file
    kept = _valid(change)
    assert kept.validated == "Karpenter v1.14.1 CRD"
    got = kubectl_patch(kept, tmp_path)
    assert got["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert got["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "gpu"


def test_the_cluster_autoscaler_gets_a_command_by_what_keeps_the_node() -> None:
    pinned, plain = warm("pinned-1"), warm("plain-1", pods=("ml/idle-0",))
    made, fixes = warm_nodes.changes([pinned, plain], _ctx())
    annotate, check = made
    assert annotate.kind is check.kind is ChangeKind.COMMAND
    assert annotate.commands[-1] == f"k annotate node pinned-1 {DISABLED}-"
    assert fixes[key(pinned)].file == "commands.sh"
    text = "\n".join(check.commands)
    assert all(line.startswith("#") for line in check.commands)
    assert "--scale-down-gpu-utilization-threshold (default 0.5)" in text
    assert "stop them first (GPU001): ml/idle-0" in text
    assert fixes[key(plain)].reason.startswith("node plain-1 is not in a Karpenter NodePool")


def test_near_misses_get_no_change_and_say_why() -> None:
    steady, static, gone = warm("steady-1"), warm("static-1"), warm("nowhere-1")
    made, fixes = warm_nodes.changes([steady, static, gone], _ctx())
    assert made == []
    assert fixes[key(steady)].reason.startswith(
        "NodePool gpu-steady consolidates already (consolidationPolicy WhenEmptyOrUnderutilized, "
        "consolidateAfter 5m)"
    )
    assert fixes[key(static)].reason.startswith("NodePool gpu-static is static (replicas 2)")
    assert fixes[key(gone)].reason == "node nowhere-1 is not among the nodes read (ok)"


def test_a_pool_not_read_gets_the_patch_as_a_command_commented_out() -> None:
    f = warm("lost-1")
    [change], fixes = warm_nodes.changes([f], _ctx("forbidden (403)"))
    assert change.kind is ChangeKind.COMMAND
    assert change.commands[-1] == (
        "# k patch nodepools.karpenter.sh gpu-lost --type merge -p "
        '\'{"spec":{"disruption":{"consolidationPolicy":"WhenEmptyOrUnderutilized",'
        '"consolidateAfter":"1h"}}}\''
    )
    assert fixes[key(f)].reason.startswith("NodePool gpu-lost was not read (forbidden (403))")


def _placing(node: str, code: str = "GPU031") -> Finding:
    return Finding(
        code=code,
        severity=Severity.MEDIUM,
        resource=Resource("PyTorchJob", "ml", "moe-train", "", 8.0),
        message="PyTorchJob ml/moe-train spans a slow link.",
        impact=Impact(gpu_hours=10.0, cost=20.0),
        recommendation="Move it.",
        targets=(node,),
    )


def test_no_change_releases_a_node_work_is_placed_on_nor_places_work_on_a_drained_one() -> None:
    ctx = _ctx()
    release = warm("plain-1")
    [release_change], _ = warm_nodes.changes([release], ctx)
    move = _placing("plain-1")
    onto = _placing("sick-1", "GPU050")
    drained = sick("sick-1")
    elsewhere = Change(
        kind=ChangeKind.PATCH,
        file="x.yaml",
        title="Give it a class",
        findings=(onto,),
        savings=Savings(0.0, 0.0, "USD"),
        risk="",
    )
    fine = warm("burst-1")
    [fine_change], _ = warm_nodes.changes([fine], ctx)
    fixes: dict[str, FindingFix] = {}
    kept = coherent(
        [release_change, elsewhere, fine_change], [release, move, onto, drained, fine], fixes
    )
    assert kept == [fine_change]
    assert fixes[key(release)].reason == (
        "the change was not written: it would release node plain-1, where GPU031 places work "
        "(PyTorchJob ml/moe-train): keep the node until that work has moved, then release what "
        "it leaves"
    )
    assert fixes[key(onto)].reason == (
        "the change was not written: it would place work on node sick-1, which GPU070 takes out "
        "of service: wait until the node is back"
    )
    assert key(fine) not in fixes


def test_nodes_are_keyed_by_cluster_and_name_so_clusters_sharing_names_stay_apart() -> None:
    """A scan of every cluster names nodes `cluster/node`, and clusters repeat node names
    (`tests/support/multicluster.py`): neither `east/burst-1` nor `west/burst-1` is taken for
    the node `burst-1` read from the one Kubernetes API (whose cluster the scan cannot tell),
    each says so for its own cluster, and the plan's coherence keeps them apart too."""
    ctx = _ctx()
    east, west, own = warm("east/burst-1"), warm("west/burst-1"), warm("burst-1")
    made, fixes = warm_nodes.changes([east, west, own], ctx)
    [patch] = made
    assert patch.findings == (own,) and patch.target is not None
    assert patch.target.describe() == "NodePool gpu-burst"
    for f, cluster in ((east, "east"), (west, "west")):
        assert fixes[key(f)].kind is None
        assert fixes[key(f)].reason.startswith(
            f"node burst-1 of cluster {cluster}: a scan of every cluster reads no cluster's nodes"
        )
    # east's release meets work placed on west's node of the same name: both stand.
    release = warm("plain-1")
    [change], _ = warm_nodes.changes([release], ctx)
    placed_elsewhere = Finding(**{**release.__dict__, "releases": ("east/plain-1",)})
    kept = coherent(
        [dataclasses.replace(change, findings=(placed_elsewhere,))],
        [placed_elsewhere, _placing("west/plain-1")],
        {},
    )
    assert len(kept) == 1
    fixes = {}
    assert (
        coherent(
            [dataclasses.replace(change, findings=(placed_elsewhere,))],
            [placed_elsewhere, _placing("east/plain-1")],
            fixes,
        )
        == []
    )
    assert (
        "release node east/plain-1, where GPU031 places work" in fixes[key(placed_elsewhere)].reason
    )


def test_node_key_splits_the_cluster_from_the_nodes_own_name() -> None:
    assert node_key("gpu-1") == ("", "gpu-1")
    assert node_key("prod/gpu-1") == ("prod", "gpu-1")
    assert node_key("a/b/gpu-1") == ("a/b", "gpu-1")
