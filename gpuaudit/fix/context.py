"""What every change maker reads: the inventory (its owners and objects as read), the window's
length, the currency, the schema version changes are validated against and the cluster's time
zone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import HOURS_PER_WEEK, Savings
from gpuaudit.inventory import Inventory
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.owners import ObjectRef, Outcome
from gpuaudit.inventory.prom import cluster_of


def node_key(name: str) -> tuple[str, str]:
    """A node as a finding names it (`cluster/node` in a scan of every cluster, where node names
    repeat from cluster to cluster) as (cluster, the node's own name): how `gpuaudit.fix` keys
    nodes, so that two clusters' nodes of one name never meet."""
    return cluster_of(name), name.rpartition("/")[2]


@dataclass(frozen=True)
class Context:
    inv: Inventory
    currency: str
    version: str
    """The Kubernetes schema version changes are validated against (`1.34`)."""
    timezone: str = "UTC"
    """The cluster's time zone, an IANA name (`--timezone`): a schedule is written in it."""

    def per_week(self, findings: tuple[Finding, ...]) -> Savings:
        """What answering `findings` saves per week at the window's rate: each pod's (resource's)
        largest impact once (GPU001 and GPU002 of one pod count the same GPU-hours)."""
        best: dict[tuple[str, str, str], tuple[float, float]] = {}
        for f in findings:
            r = f.resource
            k = (r.kind, r.namespace, r.name)
            if k not in best or f.impact.gpu_hours > best[k][0]:
                best[k] = (f.impact.gpu_hours, f.impact.cost)
        hours = max(self.inv.window_hours, 1e-9)
        scale = HOURS_PER_WEEK / hours
        return Savings(
            gpu_hours=sum(h for h, _ in best.values()) * scale,
            cost=sum(c for _, c in best.values()) * scale,
            currency=self.currency,
        )

    def node(self, name: str) -> tuple[Mapping[str, Any] | None, str]:
        """The node `name` (as a finding names it) as read, else None and why. The nodes read
        are those of the one Kubernetes API the scan read, whose names carry no cluster: a node
        of a scan of every cluster (`cluster/node`) is never looked up among them by its own
        name, which another cluster's node may have."""
        cluster, own = node_key(name)
        if cluster:
            return None, (
                f"node {own} of cluster {cluster}: a scan of every cluster reads no cluster's "
                "nodes, and a node read of that name may be another cluster's"
            )
        got = self.inv.owners.named.get(("nodes", "", own))
        if got is not None:
            return got, ""
        state = self.inv.owners.states.get("nodes") or "not in the snapshot"
        return None, f"node {own} is not among the nodes read ({state})"

    def members(self, targets: set[str]) -> dict[str, list[tuple[str, str]]]:
        """The running pods holding GPUs whose owners lead to each of `targets` (by uid)."""
        pods = self.inv.pods
        out: dict[str, list[tuple[str, str]]] = defaultdict(list)
        if pods.empty or not targets:
            return out
        gpu = (pods[C.GPU_REQUEST].astype("float64") > 0) | (pods[C.MIG_REQUEST].astype(str) != "")
        running = pods[gpu & (pods[C.PHASE].astype(str) == "Running")]
        names = zip(running[C.NAMESPACE].astype(str), running[C.POD].astype(str), strict=True)
        for ns, pod in names:
            t = self.inv.owners.walk(ns, pod).target
            if t is not None and t.uid in targets:
                out[t.uid].append((ns, pod))
        return out

    def top(self, f: Finding, bare: str, unread: str) -> tuple[ObjectRef | None, str]:
        """The object a team edits for the pod `f` names; else None and why, ending in `bare`
        for a bare pod and starting with `unread` where an owner was not read."""
        walk = self.inv.owners.walk(f.resource.namespace, f.resource.name)
        if walk.target is not None:
            return walk.target, ""
        if walk.outcome is Outcome.BARE:
            pod = f"{f.resource.namespace}/{f.resource.name}"
            return None, f"pod {pod} is a bare pod (no owner): {bare}"
        return None, f"{unread}: {walk.why}, so the object a team edits is not known"
