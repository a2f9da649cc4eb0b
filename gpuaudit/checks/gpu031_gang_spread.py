"""GPU031 gang spread too wide: a job whose GPUs exchange data spread over more nodes or NVLink
domains than it needs, or on PCIe-only GPUs where NVLink GPUs had room.

What it finds
    - Gangs (PodGroups, Kueue Workloads, training jobs, JobSets ...) whose members hold GPUs on
      more nodes than their GPU count needs, while, as the gang started, nodes it may run on
      had room to place it on fewer;
    - gangs spread over more NVLink domains (node label `nvidia.com/gpu.clique`, multi-node
      NVLink such as GB200 NVL72) while one domain had room for all of it;
    - multi-GPU jobs (a gang, or one pod with several GPUs) placed on PCIe-only GPUs while a
      node it may run on, whose GPUs are NVLink-connected, had room for the whole job, and
      moving there would cost less than the slower links lose.
    Only work that exchanges data between its GPUs is judged.

Why it matters
    Collective operations run at the speed of the slowest link. Between nodes that is the
    network, an order of magnitude slower than NVLink inside a node or an NVLink domain; on
    PCIe-only boards every all-reduce crosses PCIe and often the CPU interconnect. Work whose
    GPUs do not talk to each other (a render farm, an embedding batch) loses nothing.

How it decides
    Communication: the job's GPUs exchange data when dcgm-exporter's link traffic
    (`DCGM_FI_PROF_NVLINK_TX_BYTES`/`_RX_BYTES`, `DCGM_FI_PROF_PCIE_TX_BYTES`/`_RX_BYTES`) was
    collected for them and its mean TX + RX per GPU over NVLink or over PCIe reaches
    `checks.link_traffic_min_gb_s` (default 1 GB/s); where none was collected, when it is a
    distributed-training job (a PyTorchJob, MPIJob, TFJob, JobSet or LeaderWorkerSet, a Ray
    worker group, a Volcano job with several tasks). Anything
    else is not judged.
    Members are the job's pods holding whole GPUs (DCGM pod labels); a job's start is the first
    bucket any member held a GPU. Where it could have gone: the nodes every member's spec
    allows, as the scheduler decides it (the feasibility model: taints, cordons,
    node selector and required node affinity, allocatable `nvidia.com/gpu`; nodes whose GPUs
    are shared by replicas offer no whole GPU), plus the nodes it runs on; without node
    objects, or without any member's pod spec, only the nodes it runs on. Room at the start,
    per node: the GPUs no pod held in that bucket together with the job's own GPUs there,
    counted once each (as a set of GPU indices), and never more than the node's allocatable
    `nvidia.com/gpu`. The pods are packed largest first into the fewest nodes (best fit).
    - Nodes: the packing, on nodes of the GPU product the job runs on, needs fewer nodes than
      the members use.
    - NVLink domains: every member node has a clique label, the members span several cliques,
      and the packing fits all pods into the nodes of one clique (of the job's product).
    - PCIe: every member node's GPUs lack NVLink (built-in table or `--topology` files, see
      GPU030), the job has two or more GPUs, and one node it may run on, whose GPUs are all
      NVLink-connected, had room for every pod. On another GPU product it is reported only
      when the move saves money: the job's GPU-hours G at the price here exceed G x (1 -
      `checks.placement_slowdown`) at the price there (the work assumed to run as fast per GPU
      apart from the links); the prices and the estimated saving are in the evidence, and the
      cheapest such node is named.
    One finding per job, for the first rule that holds in this order: domains, nodes, PCIe.
    Impact: the job's GPU-hours x `checks.placement_slowdown` (default 0.10), an estimate of
    the time lost to slower links (not a measurement), priced at the job's GPU product; for a
    move to another product, the estimated saving. Severity: medium from 24 such GPU-hours
    held, low below.

What to do
    Use a topology-aware gang scheduler: Kueue Topology Aware Scheduling
    (`kueue.x-k8s.io/podset-required-topology` on the hostname or clique level), Volcano's
    network-topology-aware scheduling, or pod affinity on `nvidia.com/gpu.clique` (with DRA,
    a ComputeDomain). Size members to whole nodes (8 GPUs per pod on 8-GPU nodes), and pin
    communication-heavy jobs to NVLink products with a nodeSelector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.checks.base import MODEST_WASTE, gpu_word, pack, short_model
from gpuaudit.checks.contract import fraction, rate
from gpuaudit.findings import Finding, Impact, Resource
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.comms import Communication
from gpuaudit.inventory.grouped import is_na
from gpuaudit.topology import Topology

CODE = "GPU031"
TITLE = "Gang spread too wide"
REQUIRES = (Capability.ACTIVITY, Capability.KUBERNETES_PODS)


@dataclass(frozen=True)
class Thresholds:
    placement_slowdown: float = fraction(0.10)
    """Share of a badly placed job's GPU-hours counted as lost to slower GPU-to-GPU links (an
    estimate; 0 ranks these findings by severity alone)."""
    link_traffic_min_gb_s: float = rate(1.0)
    """Mean NVLink or PCIe traffic per GPU (TX + RX, GB/s) from which measured work counts as
    exchanging data between its GPUs."""


@dataclass
class Member:
    """One pod of a job and the whole GPUs it held on one node."""

    pod: str
    node: str
    gpus: int
    indices: frozenset[str]
    """The GPU indices (DCGM `gpu` label) it held there."""
    first: float
    buckets: int
    model: str


@dataclass
class Job:
    """A gang with GPU-holding members, or one pod holding several whole GPUs."""

    kind: str
    namespace: str
    name: str
    gang_kind: str
    members: list[Member] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(m.gpus for m in self.members)

    @property
    def start(self) -> float:
        return min(m.first for m in self.members)

    @property
    def used(self) -> list[str]:
        return sorted({m.node for m in self.members})


def _is_pcie_only(topo: Topology | None) -> bool:
    return topo is not None and len(topo.gpus) > 1 and not topo.any_nvlink


def _gangs_of(views: Views) -> tuple[dict[tuple[str, str], str], dict[str, tuple[str, str]]]:
    """Pod -> its gang id, and gang id -> (kind, name)."""
    inv = views.inv
    pod_gang: dict[tuple[str, str], str] = {}
    if not inv.pods.empty:
        cols = (C.NAMESPACE, C.POD, C.GANG)
        for ns, pod, gang in zip(*(inv.pods[c].tolist() for c in cols), strict=True):
            pod_gang.setdefault((str(ns), str(pod)), str(gang or ""))
    gangs: dict[str, tuple[str, str]] = {}
    if not inv.gangs.empty:
        cols = (C.GANG_ID, C.GANG_KIND, C.GANG_NAME)
        for gid, kind, name in zip(*(inv.gangs[c].tolist() for c in cols), strict=True):
            gangs.setdefault(str(gid), (str(kind), str(name)))
    return pod_gang, gangs


def _jobs(views: Views) -> list[Job]:
    """Gangs with GPU-holding members, and single pods holding several whole GPUs."""
    per_pod, keys = views.pods_on_nodes
    if not per_pod:
        return []
    slots = keys[C.SLOT].to_numpy(dtype=object)
    index = keys[C.GPU_INDEX].to_numpy(dtype=object)
    pod_gang, gangs = _gangs_of(views)
    jobs: dict[str, Job] = {}
    for row in per_pod:
        ns, pod = row.namespace, row.pod
        gang = pod_gang.get((ns, pod), "")
        if gang and gang in gangs:
            kind, name = gangs[gang]
            job = jobs.setdefault(gang, Job(kind, ns, name, kind))
        else:
            job = jobs.setdefault(f"Pod/{ns}/{pod}", Job("Pod", ns, pod, ""))
        held = [i for i in row.holdings if not is_na(slots[i])]
        job.members.append(
            Member(
                pod=pod,
                node=row.node,
                # Distinct GPUs as pandas counts them: missing slots left out.
                gpus=len({slots[i] for i in held}),
                indices=frozenset(str(index[i]) for i in held),
                first=row.first,
                buckets=row.buckets,
                model=row.model,
            )
        )
    out = []
    for job in jobs.values():
        total = job.total
        if job.kind == "Pod" and total < 2:
            continue
        if job.kind != "Pod" and len(job.members) < 2 and total < 2:
            continue
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


@dataclass(frozen=True)
class Move:
    """A move of a job to an NVLink node: where, and what it is estimated to cost and save."""

    node: str
    room: int
    model: str
    price_here: float
    price_there: float
    saving: float
    """Estimated money saved over the job's GPU-hours (see the module docstring)."""


def _nvlink_move(
    views: Views, cfg: Thresholds, job: Job, room: dict[str, int], gpu_hours: float
) -> Move | None:
    """The NVLink node with room for the whole job that saves the most, if any saves."""
    topos = views.inv.topologies
    sizes = [m.gpus for m in job.members]
    here_model = job.members[0].model
    price_here = views.price(here_model)
    products = views.node_products
    best: Move | None = None
    for node in sorted(room):
        topo = topos.get(node)
        if node in job.used or topo is None or not topo.all_nvlink:
            continue
        if pack(sizes, {node: room[node]}) is None:
            continue
        model = products.get(node, "")
        price_there = views.price(model) if model else price_here
        saving = gpu_hours * price_here - gpu_hours * (1 - cfg.placement_slowdown) * price_there
        if saving <= 0:
            continue
        if best is None or saving > best.saving:
            best = Move(node, room[node], model, price_here, price_there, saving)
    return best


def _move_reason(job: Job, move: Move) -> Reason:
    here = short_model(job.members[0].model)
    there = short_model(move.model) if move.model else here
    reason = (
        f"runs on PCIe-only GPUs ({', '.join(job.used)}) while {move.node}, whose GPUs are all "
        f"NVLink-connected, had {move.room} free"
    )
    if there != here:
        reason += (
            f" ({there} at {move.price_there:.2f} per GPU-hour against {move.price_here:.2f} "
            f"for {here}: about {move.saving:.0f} saved over the job's GPU-hours)"
        )
    evidence = {
        "nvlink_node": move.node,
        "nvlink_node_free": move.room,
        "price_per_gpu_hour": {"here": move.price_here, "there": move.price_there},
        "estimated_saving": round(move.saving, 2),
    }
    return reason, evidence


def _candidates(views: Views, job: Job) -> tuple[set[str], str]:
    """The nodes the job could have gone to (see the module docstring), and in words where
    they come from."""
    pl = views.placement
    used = set(job.used)
    if not pl.nodes:
        return used, "only the nodes it runs on (node objects were not read)"
    allowed: set[str] | None = None
    for m in job.members:
        key = (job.namespace, m.pod)
        if key not in pl.pods:
            continue
        ok = pl.allowed(key)
        allowed = set(ok) if allowed is None else allowed & ok
    if allowed is None:
        return used, "only the nodes it runs on (its pods' specs are unknown)"
    whole = {n for n in allowed if pl.nodes[n].whole_gpus > 0}
    return whole | used, "the nodes every member may run on (taints, selectors, affinity)"


FreeAt = Mapping[float, Mapping[str, set[str]]]
"""Bucket end -> node -> GPU indices no pod held in that bucket."""


def _room(views: Views, job: Job, nodes: set[str], free: FreeAt) -> dict[str, int]:
    """Room at the job's start per node with any: free GPU indices and the job's own, each
    once, capped at the node's allocatable whole GPUs."""
    pl = views.placement
    own: dict[str, set[str]] = {}
    for m in job.members:
        own.setdefault(m.node, set()).update(m.indices)
    at = free.get(job.start, {})
    room: dict[str, int] = {}
    for node in (nodes & at.keys()) | own.keys():
        count = len(at.get(node, set()) | own.get(node, set()))
        facts = pl.nodes.get(node)
        if facts is not None:
            cap = facts.allocatable.get("nvidia.com/gpu", 0.0) / max(1, facts.replicas)
            count = min(count, int(cap))
        room[node] = count
    return room


def _finding(
    views: Views,
    cfg: Thresholds,
    job: Job,
    room: dict[str, int],
    why: Reason,
    comm: Communication,
    where: str,
    move: Move | None,
) -> Finding:
    members = job.members
    used = job.used
    model = members[0].model
    gpu_hours = sum(m.buckets for m in members) * (views.inv.step_s / 3600.0)
    lost = gpu_hours * cfg.placement_slowdown
    cost = move.saving if move is not None else lost * views.price(model)
    kind, ns, name = job.kind, job.namespace, job.name
    pods_txt = "" if kind == "Pod" else f"{len(members)} pods, "
    message = (
        f"{kind} {ns}/{name} ({pods_txt}{gpu_word(job.total)}, {short_model(model)}) {why[0]}."
    )
    basis = (
        f"{gpu_hours:.1f} GPU-hours held x placement_slowdown {cfg.placement_slowdown:g}: "
        "an estimate of the time lost to slower links, not a measurement"
    )
    if move is not None:
        basis += "; cost: the estimated saving of the move"
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(gpu_hours),
        resource=Resource(kind, ns, name, used[0] if len(used) == 1 else "", job.total),
        message=message,
        impact=Impact(gpu_hours=lost, cost=cost),
        recommendation=(
            "Schedule it topology-aware: Kueue Topology Aware Scheduling or Volcano's "
            "network-topology plugin, or pod affinity on nvidia.com/gpu.clique; size "
            "members to whole nodes, and pin communication-heavy jobs to NVLink GPUs "
            "with a nodeSelector on nvidia.com/gpu.product."
        ),
        evidence={
            "members": [f"{m.pod}@{m.node}" for m in members],
            "gpus_per_member": [m.gpus for m in members],
            "nodes_used": used,
            "room_at_start": {n: room[n] for n in sorted(room) if room[n] > 0},
            "candidate_nodes": where,
            **why[1],
            **comm.evidence(),
            "gpu_hours_held": round(gpu_hours, 2),
            "placement_slowdown": cfg.placement_slowdown,
            "impact_basis": basis,
        },
    )


def _cliques(views: Views) -> dict[str, str]:
    """Node -> its NVLink domain (`nvidia.com/gpu.clique`) where known."""
    nodes = views.inv.nodes
    if nodes.empty:
        return {}
    pairs = zip(nodes[C.NODE].tolist(), nodes[C.CLIQUE].tolist(), strict=True)
    return {str(n): str(c) for n, c in pairs if c}


@dataclass
class Judged:
    """A job some rule may hold for: what it runs on, how its GPUs talk, where it could go."""

    job: Job
    pcie: bool
    comm: Communication
    nodes: set[str]
    where: str


def _prepare(views: Views, cfg: Thresholds, job: Job) -> Judged | None:
    """The job, when a rule can hold for it: it exchanges data between its GPUs, and it spans
    several nodes or runs on PCIe-only GPUs."""
    topos = views.inv.topologies
    pcie = all(_is_pcie_only(topos.get(n)) for n in job.used)
    if len(job.used) == 1 and not pcie:
        return None  # one node, not PCIe-only: no rule below can hold
    keys = [(job.namespace, m.pod) for m in job.members]
    comm = views.comms.judge(keys, job.gang_kind, cfg.link_traffic_min_gb_s)
    if not comm.communicates:
        return None
    nodes, where = _candidates(views, job)
    return Judged(job, pcie, comm, nodes, where)


def _judge(
    views: Views, cfg: Thresholds, j: Judged, free: FreeAt, cliques: Mapping[str, str]
) -> Finding | None:
    job, used = j.job, j.job.used
    room = _room(views, job, j.nodes, free)
    sizes = [m.gpus for m in job.members]
    # Tighter placements on the job's own GPU product only (another product is a move with a
    # price, the PCIe rule's); nodes with less room than the smallest pod: packing never opens
    # them.
    products = views.node_products
    own = {products.get(n, "") for n in used}
    fitting = {n: r for n, r in room.items() if r >= min(sizes) and products.get(n, "") in own}
    # The first rule that holds, in this order: domains, nodes, PCIe.
    why = _tighter_domain(sizes, used, fitting, dict(cliques)) or _fewer_nodes(sizes, used, fitting)
    move = None
    if why is None and j.pcie:
        gpu_hours = sum(m.buckets for m in job.members) * (views.inv.step_s / 3600.0)
        move = _nvlink_move(views, cfg, job, room, gpu_hours)
        why = _move_reason(job, move) if move is not None else None
    if why is None:
        return None
    return _finding(views, cfg, job, room, why, j.comm, j.where, move)


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    if inv.holdings.empty or inv.hourly.empty:
        return []
    judged = [
        j
        for job in sorted(_jobs(views), key=lambda j: (j.namespace, j.name))
        if (j := _prepare(views, cfg, job)) is not None
    ]
    if not judged:
        return []
    # The free GPUs at every job's start on every node any of them could use, in one pass.
    free: dict[float, dict[str, set[str]]] = {}
    every = set().union(*(j.nodes for j in judged))
    for (node, ts), idx in views.free_sets({j.job.start for j in judged}, every).items():
        free.setdefault(ts, {})[node] = idx
    cliques = _cliques(views)
    out: list[Finding] = []
    for j in judged:
        f = _judge(views, cfg, j, free, cliques)
        if f is not None:
            out.append(f)
    return out
