"""Changes for warm idle nodes (GPU060): the node pool setting that lets an idle node go.

- A node of a Karpenter NodePool (its `karpenter.sh/nodepool` label) whose NodePool was read: a
  merge patch of the NodePool's `spec.disruption`, `consolidationPolicy:
  WhenEmptyOrUnderutilized` (Karpenter removes a node that is empty, or whose pods fit on other
  nodes, and replaces one with a cheaper) and, where `consolidateAfter` was `Never` (which turns
  consolidation off), `consolidateAfter: 1h` (a node waits an hour, the audit's step, after its
  last pod came or went). One patch per NodePool, for all its idle nodes. None when the NodePool
  consolidates already (`WhenEmptyOrUnderutilized` or `Balanced`, `consolidateAfter` not
  `Never`): what keeps the node is elsewhere (its idle pods, GPU001; a disruption budget; a
  `karpenter.sh/do-not-disrupt` annotation), nor for a static NodePool (`replicas` set: Karpenter
  ignores its consolidation settings).
- A node of a NodePool that was not read: the patch as a command, commented out (the NodePool's
  settings are not known).
- Otherwise, the cluster autoscaler's: where the node carries
  `cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`, the command that removes the
  annotation; else the settings to check, as comments (`--scale-down-enabled`,
  `--scale-down-gpu-utilization-threshold`, `--scale-down-unneeded-time`, the node group's
  minimum size): the autoscaler removes a node whose pods' GPU requests are below the threshold
  of its GPUs, so idle pods that hold its GPUs keep it (stop them first: GPU001).

Every change names the nodes it releases (`Finding.releases`), which the plan checks against
the work other findings place (`gpuaudit.fix.plans`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import (
    Change,
    ChangeKind,
    FindingFix,
    Target,
    answer,
    file_name,
    one_line,
)
from gpuaudit.fix.context import Context, node_key

CODES = ("GPU060",)
POOL_LABEL = "karpenter.sh/nodepool"
KEY = "karpenter_nodepools"
API = "karpenter.sh/v1"
CONSOLIDATE = "WhenEmptyOrUnderutilized"
CONSOLIDATING = frozenset({CONSOLIDATE, "Balanced"})
AFTER = "1h"
DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
COMMANDS = "commands.sh"


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """A NodePool patch per Karpenter pool, else the cluster autoscaler's command, for the
    GPU060 findings; and what each gets."""
    fixes: dict[str, FindingFix] = {}
    out: list[Change] = []
    # Keyed by (cluster, pool): a NodePool is one cluster's, as its nodes are.
    pools: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        node, missing = ctx.node(f.resource.name)
        labels = _map(node, "metadata", "labels")
        pool = labels.get(POOL_LABEL)
        if isinstance(pool, str) and pool:
            pools.setdefault((node_key(f.resource.name)[0], pool), []).append(f)
            continue
        change, why = _autoscaler(f, node, missing, ctx)
        answer(fixes, (f,), change, why)
        if change is not None:
            out.append(change)
    for (_, pool), group in pools.items():
        change, why = _nodepool(pool, group, ctx)
        answer(fixes, group, change, why)
        if change is not None:
            out.append(change)
    return out, fixes


def _map(obj: Mapping[str, Any] | None, *path: str) -> Mapping[str, Any]:
    here: Any = obj
    for k in path:
        here = here.get(k) if isinstance(here, Mapping) else None
    return here if isinstance(here, Mapping) else {}


def _nodes(group: list[Finding]) -> list[str]:
    return list(dict.fromkeys(n for f in group for n in f.releases or (f.resource.name,)))


def _nodepool(pool: str, group: list[Finding], ctx: Context) -> tuple[Change | None, str]:
    nodes = _nodes(group)
    read = ctx.inv.owners.named.get((KEY, "", pool))
    target = Target(API, "NodePool", "", pool, "nodepools")
    patch = {
        "spec": {"disruption": {"consolidationPolicy": CONSOLIDATE, "consolidateAfter": AFTER}}
    }
    if read is None:
        state = ctx.inv.owners.states.get(KEY) or "not in the snapshot"
        why = (
            f"NodePool {pool} was not read ({state}): its consolidation settings are not known, "
            "so commands.sh holds the patch, commented out"
        )
        lines = (
            f"# Nodes {one_line(', '.join(nodes), 400)} of Karpenter NodePool "
            f"{one_line(pool, 200)}, which was not read: if it does not consolidate, let it:",
            f"# k patch nodepools.karpenter.sh {shlex.quote(pool)} --type merge -p "
            f"{shlex.quote(json.dumps(patch, separators=(',', ':')))}",
        )
        return _command(
            group, ctx, f"Let NodePool {pool} consolidate its idle nodes", target, lines
        ), why
    spec = _map(read, "spec")
    if spec.get("replicas") is not None:
        return None, (
            f"NodePool {pool} is static (replicas {spec.get('replicas')}): Karpenter ignores its "
            "consolidation settings; lower its replicas to release nodes"
        )
    disruption = _map(read, "spec", "disruption")
    policy = str(disruption.get("consolidationPolicy") or CONSOLIDATE)
    after = disruption.get("consolidateAfter")
    if policy in CONSOLIDATING and after != "Never":
        return None, (
            f"NodePool {pool} consolidates already (consolidationPolicy {policy}, "
            f"consolidateAfter {after or 'unset'}): what keeps the node is elsewhere (its idle "
            "pods, GPU001; a disruption budget; a karpenter.sh/do-not-disrupt annotation)"
        )
    body_after = AFTER if after in (None, "", "Never") else str(after)
    patch["spec"]["disruption"]["consolidateAfter"] = body_after
    # Named, as kustomize needs a merge patch to be (the names change nothing).
    named = {"apiVersion": str(read.get("apiVersion") or API), "kind": "NodePool"}
    body = {**named, "metadata": {"name": pool}, **patch}
    said = [f"consolidationPolicy {policy} to {CONSOLIDATE}"]
    if body_after != after:
        said.append(f"consolidateAfter {after or 'unset'} to {body_after}")
    change = Change(
        kind=ChangeKind.PATCH,
        file=file_name(group[0], f"nodepool-{pool}"),
        title=f"Let NodePool {pool} consolidate its idle nodes: {'; '.join(said)}",
        findings=tuple(group),
        savings=ctx.per_week(tuple(group)),
        risk=(
            f"Karpenter may now remove any node of NodePool {pool} that is empty, or whose pods "
            "fit on other nodes, once it has had no pod come or go for consolidateAfter "
            f"({body_after}), and replace a node with a cheaper one: the pods on it are evicted "
            "(as their PodDisruptionBudgets and the NodePool's disruption budgets allow) and "
            f"start again elsewhere. Idle now: {', '.join(nodes[:6])}."
        ),
        target=target,
        patch_type="merge",
        body=body,
        read=read,
    )
    return change, f"NodePool {pool}: {'; '.join(said)}"


def _autoscaler(
    f: Finding, node: Mapping[str, Any] | None, missing: str, ctx: Context
) -> tuple[Change | None, str]:
    if node is None:
        return None, missing
    name = node_key(f.resource.name)[1]
    target = Target("v1", "Node", "", name, "nodes")
    q = shlex.quote(name)
    lines: tuple[str, ...]
    if str(_map(node, "metadata", "annotations").get(DISABLED, "")).lower() == "true":
        lines = (
            f"# Node {one_line(name, 200)} is annotated {DISABLED}=true: the cluster autoscaler "
            "never removes it. Remove the annotation:",
            f"k annotate node {q} {DISABLED}-",
        )
        why = f"node {name} carries {DISABLED}=true; commands.sh removes the annotation"
        return _command(
            (f,), ctx, f"Let the cluster autoscaler remove node {name}", target, lines
        ), why
    lines = (
        f"# Node {one_line(name, 200)} has no Karpenter NodePool and no {DISABLED} annotation.",
        "# The cluster autoscaler removes a node whose pods' GPU requests are below",
        "# --scale-down-gpu-utilization-threshold (default 0.5) of its GPUs for",
        "# --scale-down-unneeded-time (default 10m), with --scale-down-enabled=true (the",
        "# default), down to its node group's minimum size. Check those in its command line:",
        "# k -n kube-system get deployment cluster-autoscaler \\",
        "#   -o jsonpath='{.spec.template.spec.containers[0].command}'",
    )
    if f.pods:
        lines += (
            f"# Its idle GPU pods hold its GPUs and keep it: stop them first (GPU001): "
            f"{one_line(', '.join(f.pods[:6]), 400)}",
        )
    why = (
        f"node {name} is not in a Karpenter NodePool and not annotated {DISABLED}: commands.sh "
        "says which cluster autoscaler settings to check"
    )
    return _command(
        (f,),
        ctx,
        f"Check what keeps the cluster autoscaler from removing node {name}",
        target,
        lines,
    ), why


def _command(
    group: Sequence[Finding], ctx: Context, title: str, target: Target, lines: tuple[str, ...]
) -> Change:
    return Change(
        kind=ChangeKind.COMMAND,
        file=COMMANDS,
        title=title,
        findings=tuple(group),
        savings=ctx.per_week(tuple(group)),
        risk=(
            "Once the autoscaler may remove the node, it evicts the pods on it (as their "
            "PodDisruptionBudgets allow), which start again elsewhere if there is room, and the "
            "node's GPUs are gone until the autoscaler adds a node again."
        ),
        target=target,
        commands=lines,
    )
