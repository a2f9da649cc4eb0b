"""Node pool cases (issue 33): idle L40S nodes whose fix is the node pool setting that lets them
go (`gpuaudit.fix.warm_nodes`), planted last so that every case before stays as it was. No pod
holds a GPU of them all window (GPU060 finds each); a taint no other case tolerates keeps their
free GPUs out of the cases before (a pod waiting for GPUs, a move).

- the first of three L40S nodes added: a node of Karpenter NodePool `gpu-burst`, whose disruption is
  `consolidationPolicy: WhenEmpty`, `consolidateAfter: Never` (consolidation off): the fix is a
  merge patch of the NodePool, `WhenEmptyOrUnderutilized` after `1h`.
- the second: a node annotated `cluster-autoscaler.kubernetes.io/scale-down-disabled:
  "true"`: the fix is the command that removes the annotation.
- near-miss, the third: a node of NodePool `gpu-steady`, which consolidates already
  (`WhenEmptyOrUnderutilized` after `5m`): no change (what keeps the node is not the pool's
  setting).

The truth of each is under `node_fixes` (node, `fix`: patch, command or none, and the target a
patch changes), besides GPU060's.
"""

from __future__ import annotations

from typing import Any

from gpuaudit.scenario.builder import Builder

POOL_LABEL = "karpenter.sh/nodepool"
DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
NODECLASS = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}
TAINT = {"key": "gpu-burst", "value": "reserved", "effect": "NoSchedule"}
"""On every node of these cases: no pending pod of the cases before tolerates it, so that their
free GPUs change no other case (a waiting pod that would fit there, a move onto them)."""


def _nodepool(name: str, policy: str, after: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"nodepool-{name}"},
        "spec": {
            "disruption": {
                "consolidationPolicy": policy,
                "consolidateAfter": after,
                "budgets": [{"nodes": "10%"}],
            },
            "template": {
                "spec": {
                    "nodeClassRef": NODECLASS,
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": ["g6e"],
                        }
                    ],
                }
            },
        },
    }


def plant_nodepools(b: Builder) -> None:
    """Place the node pool cases (see the module's docstring) and record their truth."""
    if b.H < 24:
        return
    pools = b.api.setdefault("karpenter_nodepools", [])
    burst = b.add_node("l40s", len(b.of_kind("l40s")))
    burst.labels[POOL_LABEL] = "gpu-burst"
    pools.append(_nodepool("gpu-burst", "WhenEmpty", "Never"))
    pinned = b.add_node("l40s", len(b.of_kind("l40s")))
    pinned.annotations[DISABLED] = "true"
    steady = b.add_node("l40s", len(b.of_kind("l40s")))
    steady.labels[POOL_LABEL] = "gpu-steady"
    pools.append(_nodepool("gpu-steady", "WhenEmptyOrUnderutilized", "5m"))
    for node in (burst, pinned, steady):
        node.taints = [dict(TAINT)]
        b.plant_name("GPU060", "Node", "", node.name)  # no pod holds its GPUs all window
    fixes = b.truth.setdefault("node_fixes", [])
    fixes += [
        {"node": burst.name, "fix": "patch", "target": "NodePool gpu-burst"},
        {"node": pinned.name, "fix": "command", "target": f"Node {pinned.name}"},
        {"node": steady.name, "fix": "none", "why": "NodePool gpu-steady consolidates already"},
    ]
    b.free_rest()
