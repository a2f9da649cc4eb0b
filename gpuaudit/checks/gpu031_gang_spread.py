"""GPU031 gang spread too wide: a multi-GPU job spread over more nodes or NVLink domains than it
needs, or put on PCIe-only GPUs while NVLink GPUs had room.

What it finds
    - Gangs (PodGroups, Kueue Workloads, training jobs, JobSets ...) whose members hold GPUs on
      more nodes than their GPU count needs, while, as the gang started, the nodes had room to
      place it on fewer;
    - gangs spread over more NVLink domains (node label `nvidia.com/gpu.clique`, multi-node
      NVLink such as GB200 NVL72) while one domain had room for all of it;
    - multi-GPU jobs (a gang, or one pod with several GPUs) placed on PCIe-only GPUs while a
      node with NVLink-connected GPUs had room for the whole job.

Why it matters
    Collective operations run at the speed of the slowest link. Between nodes that is the
    network, an order of magnitude slower than NVLink inside a node or an NVLink domain; on
    PCIe-only boards every all-reduce crosses PCIe and often the CPU interconnect.

How it decides
    Members are the gang's pods holding whole GPUs (DCGM pod labels); a job's start is the
    first bucket any member held a GPU. Room at that bucket, per node, is the GPUs no pod held
    plus the job's own; the pods are packed largest first into the fewest nodes (best fit).
    - Nodes: the packing needs fewer nodes than the members use.
    - NVLink domains: every member node has a clique label, the members span several cliques,
      and the packing fits all pods into the nodes of one clique.
    - PCIe: every member node's GPUs lack NVLink (built-in table or `--topology` files, see
      GPU030), the job has two or more GPUs, no member pins its GPU product (nodeSelector or
      required node affinity on `nvidia.com/gpu.product`), and one node whose GPUs are all
      NVLink-connected had room for every pod.
    One finding per job, for the first rule that holds in this order: domains, nodes, PCIe.
    Impact: the job's GPU-hours x `checks.placement_slowdown` (default 0.10), an estimate.
    Severity: medium from 24 such GPU-hours held, low below.

What to do
    Use a topology-aware gang scheduler: Kueue Topology Aware Scheduling
    (`kueue.x-k8s.io/podset-required-topology` on the hostname or clique level), Volcano's
    network-topology-aware scheduling, or pod affinity on `nvidia.com/gpu.clique` (with DRA,
    a ComputeDomain). Size members to whole nodes (8 GPUs per pod on 8-GPU nodes), and pin
    communication-heavy jobs to NVLink products with a nodeSelector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.checks.base import MODEST_WASTE, gpu_word, pack, short_model
from gpuaudit.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Inventory, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.grouped import is_na
from gpuaudit.topology import Topology

CODE = "GPU031"
TITLE = "Gang spread too wide"
REQUIRES = (Capability.ACTIVITY, Capability.KUBERNETES_PODS)


@dataclass(frozen=True)
class Thresholds:
    placement_slowdown: float = 0.10
    """Share of a badly placed job's GPU-hours counted as lost to slower GPU-to-GPU links (an
    estimate; 0 ranks these findings by severity alone)."""


def _is_pcie_only(topo: Topology | None) -> bool:
    return topo is not None and len(topo.gpus) > 1 and not topo.any_nvlink


def _jobs(views: Views) -> list[dict[str, Any]]:
    """Gangs with GPU-holding members, and single pods holding several whole GPUs."""
    inv = views.inv
    per_pod, keys = views.pods_on_nodes
    if not per_pod:
        return []
    slots = keys[C.SLOT].to_numpy(dtype=object)
    # The first row of each (namespace, pod), as dropping duplicates keeps it.
    meta: dict[tuple[str, str], tuple[object, object]] = {}
    pods = inv.pods
    if not pods.empty:
        for ns, pod, gang, pinned in zip(
            pods[C.NAMESPACE].tolist(),
            pods[C.POD].tolist(),
            pods[C.GANG].tolist(),
            pods[C.SELECTOR_PRODUCTS].tolist(),
            strict=True,
        ):
            meta.setdefault((ns, pod), (gang, pinned))
    gangs: dict[str, tuple[object, object]] = {}
    if not inv.gangs.empty:
        for gid, kind, name in zip(
            inv.gangs[C.GANG_ID].tolist(),
            inv.gangs[C.GANG_KIND].tolist(),
            inv.gangs[C.GANG_NAME].tolist(),
            strict=True,
        ):
            gangs.setdefault(gid, (kind, name))
    jobs: dict[str, dict[str, Any]] = {}
    for row in per_pod:
        ns, pod = row.namespace, row.pod
        gang, pinned = "", ""
        if (ns, pod) in meta:
            gang = str(meta[(ns, pod)][0] or "")
            pinned = str(meta[(ns, pod)][1] or "")
        if gang and gang in gangs:
            kind, name = str(gangs[gang][0]), str(gangs[gang][1])
            key = gang
        else:
            kind, name, key = "Pod", pod, f"Pod/{ns}/{pod}"
        job = jobs.setdefault(
            key, {"kind": kind, "namespace": ns, "name": name, "members": [], "pinned": False}
        )
        # Distinct GPUs as pandas counts them: missing slots left out.
        gpus = len({slots[i] for i in row.holdings if not is_na(slots[i])})
        job["members"].append(
            {
                "pod": pod,
                "node": row.node,
                "gpus": gpus,
                "first": row.first,
                "gpu_hours": row.gpu_hours,
                "model": row.model,
            }
        )
        job["pinned"] = job["pinned"] or bool(pinned)
    out = []
    for job in jobs.values():
        members = job["members"]
        total = sum(m["gpus"] for m in members)
        if job["kind"] == "Pod" and total < 2:
            continue
        if job["kind"] != "Pod" and len(members) < 2 and total < 2:
            continue
        job["total"] = total
        job["start"] = min(m["first"] for m in members)
        out.append(job)
    return out


Reason = tuple[str, dict[str, Any]]
"""Why a job is spread too wide, in words for the message, and the evidence."""


def _tighter_domain(
    sizes: list[int], used: list[str], fitting: dict[str, int], cliques: dict[str, str]
) -> Reason | None:
    """The job spans several NVLink domains while one had room for all of it."""
    used_cliques = sorted({cliques.get(n, "") for n in used})
    if len(used) < 2 or not all(cliques.get(n) for n in used) or len(used_cliques) < 2:
        return None
    for clique in sorted(set(cliques.values())):
        inside = {n: r for n, r in fitting.items() if cliques.get(n) == clique}
        placed = pack(sizes, inside)
        if placed is not None:
            reason = (
                f"spans {len(used_cliques)} NVLink domains (gpu.clique "
                f"{', '.join(used_cliques)}) while domain {clique} had room for all of it"
            )
            evidence = {"cliques_used": used_cliques, "tighter_clique": clique}
            evidence["tighter_nodes"] = placed
            return reason, evidence
    return None


def _fewer_nodes(sizes: list[int], used: list[str], fitting: dict[str, int]) -> Reason | None:
    """The job runs on more nodes than packing it needs."""
    if len(used) < 2:
        return None
    placed = pack(sizes, fitting)
    if placed is None or len(placed) >= len(used):
        return None
    reason = (
        f"runs on {len(used)} nodes ({', '.join(used)}) while "
        f"{len(placed)} ({', '.join(sorted(placed))}) had room for all of it"
    )
    return reason, {"tighter_nodes": sorted(placed)}


def _nvlink_node(
    sizes: list[int], used: list[str], room: dict[str, int], topos: Mapping[str, Topology | None]
) -> Reason | None:
    """The job runs on PCIe-only GPUs while one all-NVLink node had room for it."""
    nvlink = {
        n: r
        for n, r in room.items()
        if n not in used and (t := topos.get(n)) is not None and t.all_nvlink
    }
    for node in sorted(nvlink, key=lambda n: (-nvlink[n], n)):
        if pack(sizes, {node: nvlink[node]}) is not None:
            reason = (
                f"runs on PCIe-only GPUs ({', '.join(used)}) while {node}, whose GPUs "
                f"are all NVLink-connected, had {nvlink[node]} free"
            )
            return reason, {"nvlink_node": node, "nvlink_node_free": nvlink[node]}
    return None


def _node_labels(inv: Inventory) -> tuple[set[str], dict[str, str]]:
    """Cordoned nodes, and node -> its NVLink domain (`nvidia.com/gpu.clique`) where known."""
    nodes = inv.nodes
    if nodes.empty:
        return set(), {}
    names = nodes[C.NODE].tolist()
    cordoned = {str(n) for n, c in zip(names, nodes[C.CORDONED].tolist(), strict=True) if c}
    cliques = {str(n): str(c) for n, c in zip(names, nodes[C.CLIQUE].tolist(), strict=True) if c}
    return cordoned, cliques


def _finding(
    views: Views, cfg: Thresholds, job: dict[str, Any], room: dict[str, int], why: Reason
) -> Finding:
    members = job["members"]
    used = sorted({m["node"] for m in members})
    model = members[0]["model"]
    gpu_hours = sum(m["gpu_hours"] for m in members)
    lost = gpu_hours * cfg.placement_slowdown
    kind, ns, name = job["kind"], job["namespace"], job["name"]
    pods_txt = "" if kind == "Pod" else f"{len(members)} pods, "
    message = (
        f"{kind} {ns}/{name} ({pods_txt}{gpu_word(job['total'])}, {short_model(model)}) {why[0]}."
    )
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(gpu_hours),
        resource=Resource(kind, ns, name, used[0] if len(used) == 1 else "", job["total"]),
        message=message,
        impact=Impact(gpu_hours=lost, cost=lost * views.price(model)),
        recommendation=(
            "Schedule it topology-aware: Kueue Topology Aware Scheduling or Volcano's "
            "network-topology plugin, or pod affinity on nvidia.com/gpu.clique; size "
            "members to whole nodes, and pin communication-heavy jobs to NVLink GPUs "
            "with a nodeSelector on nvidia.com/gpu.product."
        ),
        evidence={
            "members": [f"{m['pod']}@{m['node']}" for m in members],
            "gpus_per_member": [m["gpus"] for m in members],
            "nodes_used": used,
            "room_at_start": {n: room[n] for n in sorted(room) if room[n] > 0},
            **why[1],
            "gpu_hours_held": round(gpu_hours, 2),
            "placement_slowdown": cfg.placement_slowdown,
        },
    )


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    if inv.holdings.empty or inv.hourly.empty:
        return []
    jobs = _jobs(views)
    if not jobs:
        return []
    topos = inv.topologies
    cordoned, cliques = _node_labels(inv)
    free_at = {
        ts: {n: k for n, k in counts.items() if n not in cordoned}
        for ts, counts in views.free_counts({j["start"] for j in jobs}).items()
    }
    out: list[Finding] = []
    for job in sorted(jobs, key=lambda j: (j["namespace"], j["name"])):
        members = job["members"]
        sizes = [m["gpus"] for m in members]
        used = sorted({m["node"] for m in members})
        pcie = not job["pinned"] and all(_is_pcie_only(topos.get(n)) for n in used)
        if len(used) == 1 and not pcie:
            continue  # one node, not PCIe-only: no rule below can hold
        room = dict(free_at.get(job["start"], {}))
        for m in members:
            room[m["node"]] = room.get(m["node"], 0) + m["gpus"]
        # Nodes with less room than the smallest pod: packing never opens them.
        fitting = {n: r for n, r in room.items() if r >= min(sizes)}
        # The first rule that holds, in this order: domains, nodes, PCIe.
        why = _tighter_domain(sizes, used, fitting, cliques) or _fewer_nodes(sizes, used, fitting)
        if why is None and pcie:
            why = _nvlink_node(sizes, used, room, topos)
        if why is not None:
            out.append(_finding(views, cfg, job, room, why))
    return out
