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
      NVLink-connected, had room for every pod. It is reported only when the move saves
      money, priced as below: the job's GPU-hours G at the price here exceed what the move
      costs beyond the GPUs paid for already (the work assumed to run as fast per GPU apart
      from the links); the node that saves the most is named (the first by name among
      equals).
    One finding per job, for the first rule that holds in this order: domains, nodes, PCIe.
    The price of a move: GPUs no pod held are paid for already, so a move onto them costs
    nothing extra; GPUs another pod held are not free, even held idle (freeing those is
    GPU001's advice, and its pod may want them back). Bucket by bucket over the hours the
    moving pods held their GPUs (the pods on nodes the domain or node rule keeps stay), the
    GPUs no pod held on the target nodes (a GPU without data in a bucket is not counted,
    never more than a node's allocatable `nvidia.com/gpu`) cover at most the GPUs the moving
    pods held then: those GPU-hours U of the G' the move needs cost nothing. The rest, G' - U,
    held by other pods or without data, is priced at list at the target's GPU product x (1 -
    `checks.placement_slowdown`); against it stand the G' GPU-hours it leaves, at their
    price. A move a finding advises takes the unheld GPUs it uses, so no two findings count
    the same idle GPU-hours as free: the moves within the job's product first (the domain and
    node rules, advised whatever their price, as they leave as many GPUs of the product as
    they take), then the moves to NVLink GPUs, each in job order (by namespace, then name).
    The message says what share sat unheld and
    what the rest costs at list; the evidence (`move_cost`) has the GPU-hours, prices, the
    cost beyond the idle capacity and the saving. The nodes a finding moves work onto are its
    `targets`: where another finding advises releasing one of them (GPU060), both say so
    (see In reports).
    Impact: the job's GPU-hours x `checks.placement_slowdown` (default 0.10), an estimate of
    the time lost to slower links (not a measurement), priced at the job's GPU product; for a
    move to NVLink GPUs (the PCIe rule), the estimated saving. Severity: medium from 24 such
    GPU-hours held, low below.

What to do
    Use a topology-aware gang scheduler: Kueue Topology Aware Scheduling
    (`kueue.x-k8s.io/podset-required-topology` on the hostname or clique level), Volcano's
    network-topology-aware scheduling, or pod affinity on `nvidia.com/gpu.clique` (with DRA,
    a ComputeDomain). Size members to whole nodes (8 GPUs per pod on 8-GPU nodes), and pin
    communication-heavy jobs to NVLink products with a nodeSelector.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.checks.base import MODEST_WASTE, gpu_word, pack, short_model
from gpuaudit.checks.contract import fraction, rate
from gpuaudit.checks.findings import Finding, Impact, Resource
from gpuaudit.checks.movecost import Capacity, MoveCost
from gpuaudit.domain.topology import Topology
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.comms import Communication
from gpuaudit.inventory.feasibility import Placement
from gpuaudit.inventory.grouped import is_na

CODE = "GPU031"
TITLE = "Gang spread too wide"
REQUIRES = (Capability.ACTIVITY, Capability.KUBERNETES_PODS)
VIEWS = ("whole_rows", "pods_on_nodes")
"""The row-long shared views it reads (see `gpuaudit.checks.contract`)."""


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
    holdings: tuple[int, ...] = ()
    """Its holding positions (`PodOnNode.holdings`): what it held, bucket by bucket."""


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
                holdings=row.holdings,
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
    sizes: list[int], used: list[str], at: RoomAt, own: dict[str, int], products: set[str]
) -> Reason | None:
    """The job spans several NVLink domains while one had room for all of it."""
    cliques = at.cliques
    used_cliques = sorted({cliques.get(n, "") for n in used})
    if len(used) < 2 or not all(cliques.get(n) for n in used) or len(used_cliques) < 2:
        return None
    # Domains without a fitting node place nothing: only those with one are tried, in order.
    for clique in sorted(at.domains(own, min(sizes), products)):
        placed = pack(sizes, at.fitting(own, len(sizes), min(sizes), products, clique))
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
    cost: MoveCost

    @property
    def saving(self) -> float:
        """Estimated money saved over the job's GPU-hours (see the module docstring)."""
        return self.cost.saving


Cover = Callable[[list[str]], tuple[list[float], list[float]]]
"""Nodes -> the GPU-hours of a job's hours the unheld GPUs of each alone cover: less what
moves advised before it take, and as they sat unheld (`Capacity.each`)."""


def _nvlink_move(
    views: Views,
    cfg: Thresholds,
    job: Job,
    at: RoomAt,
    gpu_hours: float,
    cover: Cover | None = None,
) -> Move | None:
    """The NVLink node with room for the whole job that saves the most, if any saves (among
    equal savings, the first by name), priced against the GPUs that sat unheld there over the
    job's hours (`cover`; without it, none did)."""
    total = sum(m.gpus for m in job.members)
    here_model = job.members[0].model
    price_here = views.price(here_model)
    # One node holds the whole job when its room covers every pod (how `pack` fills it).
    fits = [(node, r, model) for node, r, model in at.nvlink_nodes() if r >= total]
    if not fits:
        return None
    names = [node for node, _, _ in fits]
    now, raw = cover(names) if cover is not None else ([0.0] * len(fits), [0.0] * len(fits))
    best: Move | None = None
    for (node, r, model), unheld, before in zip(fits, now, raw, strict=True):
        price_there = views.price(model) if model else price_here
        cost = MoveCost(
            nodes=(node,),
            model=model or here_model,
            gpus=total,
            needed=gpu_hours,
            unheld=min(unheld, gpu_hours),
            taken=max(0.0, before - unheld),
            price_here=price_here,
            price_there=price_there,
            slowdown=cfg.placement_slowdown,
        )
        if cost.saving > 0 and (best is None or cost.saving > best.saving):
            best = Move(node, r, cost)
    return best


def _move_reason(job: Job, move: Move) -> Reason:
    reason = (
        f"runs on PCIe-only GPUs ({', '.join(job.used)}) while {move.node}, whose GPUs are all "
        f"NVLink-connected, had {move.room} free; {move.cost.words(job.members[0].model)}"
    )
    evidence = {
        "nvlink_node": move.node,
        "nvlink_node_free": move.room,
        "price_per_gpu_hour": {"here": move.cost.price_here, "there": move.cost.price_there},
        "estimated_saving": round(move.saving, 2),
    }
    return reason, evidence


def _candidates(
    views: Views, job: Job, memo: dict[frozenset[frozenset[str]], frozenset[str]]
) -> tuple[frozenset[str], str]:
    """The nodes offering whole GPUs that every member may run on (see the module docstring;
    the nodes the job runs on come on top of them), and in words where they come from.
    `memo`: pods of one spec share their set of allowed nodes, so each distinct combination
    of sets is intersected and filtered once, not once per job."""
    pl = views.placement
    if not pl.nodes:
        return frozenset(), "only the nodes it runs on (node objects were not read)"
    keys = [(job.namespace, m.pod) for m in job.members]
    sets = frozenset(pl.allowed(key) for key in keys if key in pl.pods)
    if not sets:
        return frozenset(), "only the nodes it runs on (its pods' specs are unknown)"
    if sets not in memo:
        allowed = frozenset.intersection(*sets)
        memo[sets] = frozenset(n for n in allowed if pl.nodes[n].whole_gpus > 0)
    return memo[sets], "the nodes every member may run on (taints, selectors, affinity)"


FreeAt = Mapping[float, Mapping[str, set[str]]]
"""Bucket end -> node -> GPU indices no pod held in that bucket."""

UNCAPPED = 2**31 - 1
"""Room on a node no object describes: its unheld GPUs, with no allocatable to cap them."""

Ranked = list[tuple[int, str]]
"""(room, node), descending: the order in which `pack` opens unused nodes."""


def _capped(pl: Placement, node: str, count: int) -> int:
    """`count` GPUs of room on `node`, never more than its allocatable whole GPUs."""
    facts = pl.nodes.get(node)
    if facts is None:
        return count
    cap = facts.allocatable.get("nvidia.com/gpu", 0.0) / max(1, facts.replicas)
    return min(count, int(cap))


class RoomAt:
    """Room at one bucket end on the nodes of one candidate set that had free GPUs then,
    made once for all the jobs starting then with that set: per node its free GPU indices
    counted and capped at its allocatable whole GPUs, ranked per GPU product and per (product,
    NVLink domain). `pack` opens the roomiest unused node first and at most one node per pod,
    so a job of k pods packs exactly as on all the nodes when given the k roomiest of those
    that fit: a job reads those, not every node."""

    def __init__(
        self,
        views: Views,
        free_at: Mapping[str, set[str]],
        capped: Mapping[str, int],
        allowed: frozenset[str],
        cliques: Mapping[str, str],
    ) -> None:
        self.views, self.free_at, self.cliques = views, free_at, cliques
        few, many = (allowed, capped) if len(allowed) < len(capped) else (capped, allowed)
        self.room = {n: capped[n] for n in few if n in many}
        """Room per candidate node with free GPUs, not counting any job's own GPUs."""
        products = views.node_products
        self.by_product: dict[str, Ranked] = {}
        self.by_domain: dict[tuple[str, str], Ranked] = {}
        for r, n in sorted(((r, n) for n, r in self.room.items()), reverse=True):
            p = products.get(n, "")
            self.by_product.setdefault(p, []).append((r, n))
            if cliques.get(n):
                self.by_domain.setdefault((p, cliques[n]), []).append((r, n))
        self._nvlink: list[tuple[str, int, str]] | None = None

    def own(self, job: Job) -> dict[str, int]:
        """Room on the nodes the job runs on: the free GPU indices and its own, each once."""
        held: dict[str, set[str]] = {}
        for m in job.members:
            held.setdefault(m.node, set()).update(m.indices)
        pl, free_at = self.views.placement, self.free_at
        return {n: _capped(pl, n, len(free_at.get(n, set()) | idx)) for n, idx in held.items()}

    def every(self, own: Mapping[str, int]) -> dict[str, int]:
        """Room on every node the job could use (see the module docstring)."""
        return {**self.room, **own}

    def fitting(
        self, own: Mapping[str, int], k: int, least: int, products: set[str], domain: str = ""
    ) -> dict[str, int]:
        """The `k` roomiest nodes, by room then name, with room for `least` GPUs or more, of
        `products` (and in NVLink `domain`, when given); `own`: room on the job's nodes."""
        ranked: Ranked = []
        for p in products:
            rows = self.by_domain.get((p, domain), []) if domain else self.by_product.get(p, [])
            taken = 0
            for r, n in rows:
                if r < least or taken == k:
                    break
                if n not in own:
                    ranked.append((r, n))
                    taken += 1
        products_of = self.views.node_products
        for n, r in own.items():
            if r >= least and products_of.get(n, "") in products:
                if not domain or self.cliques.get(n) == domain:
                    ranked.append((r, n))
        ranked.sort(reverse=True)
        return {n: r for r, n in ranked[:k]}

    def domains(self, own: Mapping[str, int], least: int, products: set[str]) -> set[str]:
        """NVLink domains with a node of `products` that may have room for `least` GPUs."""
        out = {
            c for (p, c), rows in self.by_domain.items() if p in products and rows[0][0] >= least
        }
        return out | {self.cliques[n] for n in own if self.cliques.get(n)}

    def nvlink_nodes(self) -> list[tuple[str, int, str]]:
        """(node, room, GPU product) of the nodes whose GPUs are all NVLink-connected, by
        name. A job judged for the PCIe rule runs on PCIe-only nodes, none of them here, so its
        own GPUs never count."""
        if self._nvlink is None:
            topos, products = self.views.inv.topologies, self.views.node_products
            self._nvlink = [
                (n, r, products.get(n, ""))
                for n, r in sorted(self.room.items())
                if (topo := topos.get(n)) is not None and topo.all_nvlink
            ]
        return self._nvlink


class Rooms:
    """The `RoomAt` of each (bucket end, candidate set) a job asks for, each made once."""

    def __init__(self, views: Views, free: FreeAt, cliques: Mapping[str, str]) -> None:
        self.views, self.free, self.cliques = views, free, cliques
        self._capped: dict[float, dict[str, int]] = {}
        self._at: dict[tuple[float, frozenset[str]], RoomAt] = {}

    def at(self, ts: float, allowed: frozenset[str]) -> RoomAt:
        if (ts, allowed) not in self._at:
            free_at = self.free.get(ts, {})
            if ts not in self._capped:
                pl = self.views.placement
                self._capped[ts] = {n: _capped(pl, n, len(i)) for n, i in free_at.items()}
            self._at[(ts, allowed)] = RoomAt(
                self.views, free_at, self._capped[ts], allowed, self.cliques
            )
        return self._at[(ts, allowed)]


def _finding(
    views: Views,
    cfg: Thresholds,
    p: Proposal,
    why: Reason,
    cost: MoveCost,
    move: Move | None,
) -> Finding:
    job, comm, room = p.judged.job, p.judged.comm, p.room
    members = job.members
    used = job.used
    model = members[0].model
    gpu_hours = sum(m.buckets for m in members) * (views.inv.step_s / 3600.0)
    lost = gpu_hours * cfg.placement_slowdown
    impact_cost = move.saving if move is not None else lost * views.price(model)
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
        basis += "; cost: the estimated saving of the move (see move_cost)"
    return Finding(
        code=CODE,
        severity=MODEST_WASTE(gpu_hours),
        resource=Resource(kind, ns, name, used[0] if len(used) == 1 else "", job.total),
        message=message,
        impact=Impact(gpu_hours=lost, cost=impact_cost),
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
            "candidate_nodes": p.judged.where,
            **why[1],
            **comm.evidence(),
            "move_cost": cost.evidence(),
            "gpu_hours_held": round(gpu_hours, 2),
            "placement_slowdown": cfg.placement_slowdown,
            "impact_basis": basis,
        },
        targets=cost.nodes,
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
    allowed: frozenset[str]
    """Nodes it could have gone to besides its own (see `_candidates`)."""
    where: str


def _prepare(
    views: Views, cfg: Thresholds, job: Job, memo: dict[frozenset[frozenset[str]], frozenset[str]]
) -> Judged | None:
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
    allowed, where = _candidates(views, job, memo)
    return Judged(job, pcie, comm, allowed, where)


@dataclass
class Proposal:
    """A job a rule holds for, before its move is priced."""

    judged: Judged
    at: RoomAt
    room: dict[str, int]
    """Room at its start on every node it could use (`RoomAt.every`)."""
    why: Reason | None
    """The NVLink-domain or node rule that holds; None for the PCIe rule."""
    targets: tuple[str, ...]
    """Where the domain or node rule packs it; for the PCIe rule, every NVLink node with room
    for all of it."""
    movers: list[Member]
    """Its members that move: those on none of the nodes the rule packs it into."""


def _propose(views: Views, j: Judged, rooms: Rooms) -> Proposal | None:
    job, used = j.job, j.job.used
    at = rooms.at(job.start, j.allowed)
    own = at.own(job)
    sizes = [m.gpus for m in job.members]
    # Tighter placements on the job's own GPU product only (another product is a move with a
    # price, the PCIe rule's); nodes with less room than the smallest pod: packing never opens
    # them.
    products = views.node_products
    mine = {products.get(n, "") for n in used}
    fitting = at.fitting(own, len(sizes), min(sizes), mine)
    # The first rule that holds, in this order: domains, nodes, PCIe.
    why = _tighter_domain(sizes, used, at, own, mine) or _fewer_nodes(sizes, used, fitting)
    if why is not None:
        placed = tuple(sorted(why[1]["tighter_nodes"]))
        movers = [m for m in job.members if m.node not in placed]
        return Proposal(j, at, at.every(own), why, placed, movers)
    if not j.pcie:
        return None
    total = sum(sizes)
    nvlink = tuple(n for n, r, _ in at.nvlink_nodes() if r >= total)
    return Proposal(j, at, at.every(own), None, nvlink, list(job.members)) if nvlink else None


def _settle(
    views: Views, cfg: Thresholds, p: Proposal, i: int, capacity: Capacity
) -> Finding | None:
    """The finding of proposal `i`, its move priced against the unheld GPUs left (see
    `gpuaudit.checks.movecost`); a move it advises takes those it uses."""
    job = p.judged.job
    step_h = views.inv.step_s / 3600.0
    model = job.members[0].model
    if p.why is None:
        gpu_hours = sum(m.buckets for m in job.members) * step_h
        move = _nvlink_move(views, cfg, job, p.at, gpu_hours, lambda n: capacity.each(i, n))
        if move is None:
            return None
        capacity.take(i, move.cost.nodes)
        return _finding(views, cfg, p, _move_reason(job, move), move.cost, move)
    needed = sum(m.buckets for m in p.movers) * step_h
    unheld, before = capacity.together(i, p.targets)
    price = views.price(model)
    cost = MoveCost(
        nodes=p.targets,
        model=model,
        gpus=sum(m.gpus for m in p.movers),
        needed=needed,
        unheld=min(unheld, needed),
        taken=max(0.0, before - unheld),
        price_here=price,
        price_there=price,
        slowdown=cfg.placement_slowdown,
    )
    capacity.take(i, p.targets)
    return _finding(views, cfg, p, (f"{p.why[0]}; {cost.words(model)}", p.why[1]), cost, None)


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    if inv.holdings.empty or inv.hourly.empty:
        return []
    memo: dict[frozenset[frozenset[str]], frozenset[str]] = {}
    judged = [
        j
        for job in sorted(_jobs(views), key=lambda j: (j.namespace, j.name))
        if (j := _prepare(views, cfg, job, memo)) is not None
    ]
    if not judged:
        return []
    # The free GPUs at every job's start on every node any of them could use, in one pass.
    free: dict[float, dict[str, set[str]]] = {}
    every: set[str] = set().union(*{j.allowed for j in judged}, *(j.job.used for j in judged))
    for (node, ts), idx in views.free_sets({j.job.start for j in judged}, every).items():
        free.setdefault(ts, {})[node] = idx
    rooms = Rooms(views, free, _cliques(views))
    proposals = [p for j in judged if (p := _propose(views, j, rooms)) is not None]
    if not proposals:
        return []
    nodes = sorted({n for p in proposals for n in p.targets})
    movers = [sorted({h for m in p.movers for h in m.holdings}) for p in proposals]
    caps = [_capped(views.placement, n, UNCAPPED) for n in nodes]
    capacity = Capacity(views, movers, nodes, caps)
    # Moves within the job's GPU product first: they are advised whatever their price (they
    # leave as many GPUs of the product as they take) and need the very room their rule found;
    # then moves to NVLink GPUs of another product, advised only where the unheld GPUs left
    # make them worth it. In job order within each; each advised move takes the unheld GPUs
    # it uses.
    out: list[Finding] = []
    for i in sorted(range(len(proposals)), key=lambda i: proposals[i].why is None):
        f = _settle(views, cfg, proposals[i], i, capacity)
        if f is not None:
            out.append(f)
    return out
