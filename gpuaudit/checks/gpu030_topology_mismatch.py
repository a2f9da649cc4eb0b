"""GPU030 topology mismatch: a multi-GPU pod got poorly connected GPUs while better ones were free.

What it finds
    Pods holding several whole GPUs of one node whose GPUs are not all joined by NVLink (or,
    on PCIe-only boards, sit on different NUMA nodes or PCIe switches) when, as the pod
    started, the node had a better-connected set of that size free, for pods whose GPUs
    exchange data.

Why it matters
    Tensor-parallel inference and data-parallel training exchange data between their GPUs all
    the time. Over NVLink that costs little; across PCIe host bridges or the CPU interconnect
    (`SYS`) it can cost a large share of the GPUs' time, for as long as the pod runs.

How it decides
    The node's GPU links come from, most specific first: a `nvidia-smi topo -m` file in the
    `--topology` directory named `<node>.txt` or `<nvidia.com/gpu.product>.txt`; the built-in
    table by product (HGX/DGX SXM boards such as H100, H200, A100-SXM, B200 and GB200 are
    all-to-all NVSwitch, so a mismatch is impossible there; H100/H200 NVL cards are bridged in
    pairs; PCIe-only L4/L40/L40S/A10/T4 boards get an assumed layout of switch pairs on two NUMA
    nodes); and `DCGM_EXP_P2P_STATUS` where it is collected (status 0 means NVLink P2P).
    Links rank NVLink, then PIX, PXB, PHB, NODE, SYS; a set ranks by its worst pair. GPU
    indices come from the DCGM `gpu` label.
    Only pods whose GPUs exchange data are judged: where dcgm-exporter's link traffic
    (`DCGM_FI_PROF_NVLINK_TX_BYTES`/`_RX_BYTES`, `DCGM_FI_PROF_PCIE_TX_BYTES`/`_RX_BYTES`) was
    collected for the pod's GPUs, when its mean TX + RX per GPU over NVLink or over PCIe
    reaches `checks.link_traffic_min_gb_s` (default 1 GB/s); where none was, when a
    distributed-training job owns it (a PyTorchJob, MPIJob, TFJob, JobSet or LeaderWorkerSet, a
    Ray worker group, a Volcano job with several tasks). A
    tensor-parallel server shows up through its traffic.
    For each such pod holding two or more whole GPUs of one node: the GPUs available as it
    started are its own plus those no pod held in its first bucket (the pod stays on its node,
    so nothing about other nodes is assumed). It is a mismatch when the best set of the same
    size among them ranks better than the pod's. Nodes whose product is in no table and has no
    file are not judged. The better set is on the pod's own node and product, as many GPUs as
    it leaves: the restart has no price to weigh (GPU031 prices moves to other GPUs against
    the idle capacity they use).
    Impact: the pod's GPU-hours x `checks.placement_slowdown` (default 0.10), an estimate of
    the time lost to the slower links, not a measurement (the evidence says so and shows the
    setting). Severity: medium when NVLink was available and not used, or the pod crosses NUMA
    nodes (`SYS`) while a set within one was free; low otherwise.

What to do
    Restart the pod so it lands on the better set, and make it stick: keep the NVIDIA device
    plugin's preferred allocation on (it picks NVLink-connected GPUs), turn on the kubelet
    Topology Manager with policy `single-numa-node` or `restricted` on PCIe boards, or, with DRA,
    request the GPUs with a `matchAttribute` constraint on their PCIe root or NVLink domain.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit.checks.base import gpu_word, short_model
from gpuaudit.checks.contract import fraction, rate
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.domain.topology import Topology
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.comms import Communication
from gpuaudit.inventory.views import PodOnNode

CODE = "GPU030"
TITLE = "Topology mismatch in a node"
REQUIRES = (Capability.ACTIVITY,)
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


def multi_gpu_pods(views: Views) -> list[tuple[PodOnNode, tuple[str, ...]]]:
    """Per holder pod and node, sorted: its whole GPUs and their indices (distinct, sorted as
    text), for pods holding two or more whole GPUs (from `views.pods_on_nodes`)."""
    pods, keys = views.pods_on_nodes
    index = keys[C.GPU_INDEX].to_numpy(dtype=object)
    out = []
    for p in pods:
        indices = tuple(sorted({str(index[i]) for i in p.holdings}))
        if len(indices) >= 2:
            out.append((p, indices))
    return out


def _medium(own_code: str, best_rank: int, own_rank: int) -> bool:
    return (best_rank == 0 and own_rank > 0) or (own_code == "SYS" and best_rank < 5)


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    inv = views.inv
    if inv.holdings.empty or inv.hourly.empty:
        return []
    pods = multi_gpu_pods(views)
    if not pods:
        return []
    topos = inv.topologies
    # Pods that may be misplaced: judged on a node's links, with some pair worse than NVLink.
    judged: list[tuple[PodOnNode, Topology, list[int], tuple[int, str], Communication]] = []
    for p, indices in pods:
        topo = topos.get(p.node)
        # An all-NVLink board has no worse pair to find (any pair not NVLink is unknown).
        if topo is None or topo.all_nvlink or not all(i.isdigit() for i in indices):
            continue
        own = [int(i) for i in indices]
        mine = topo.worst(own)
        if mine is None or mine[0] == 0:
            continue
        comm = views.comms.judge([(p.namespace, p.pod)], "", cfg.link_traffic_min_gb_s)
        if comm.communicates:
            judged.append((p, topo, own, mine, comm))
    if not judged:
        return []
    free = views.free_sets({p.first for p, *_ in judged}, {p.node for p, *_ in judged})
    out: list[Finding] = []
    for p, topo, own, mine, comm in judged:
        node, first = p.node, p.first
        avail = set(own) | {int(i) for i in free.get((node, first), set()) if i.isdigit()}
        best = topo.best(avail, len(own))
        if best is None or best[1] >= mine[0]:
            continue
        better, best_rank, best_code = best
        ns, pod = p.namespace, p.pod
        model = p.model
        gpus = float(len(own))
        held_hours = float(p.gpu_hours)
        lost = held_hours * cfg.placement_slowdown
        cost = lost * views.price(model)
        own_txt = ", ".join(str(i) for i in own)
        better_txt = ", ".join(str(i) for i in better)
        message = (
            f"Pod {ns}/{pod} holds {gpu_word(gpus)} ({short_model(model)}) on {node} joined at "
            f"worst by {mine[1]} (GPUs {own_txt}), while GPUs {better_txt}, joined at worst by "
            f"{best_code}, were free when it started."
        )
        out.append(
            Finding(
                code=CODE,
                severity=Severity.MEDIUM if _medium(mine[1], best_rank, mine[0]) else Severity.LOW,
                resource=Resource("Pod", ns, pod, node, gpus),
                message=message,
                impact=Impact(gpu_hours=lost, cost=cost),
                recommendation=(
                    f"Restart {ns}/{pod} so it gets GPUs {better_txt} (or another set joined "
                    f"by {best_code}); keep the device plugin's preferred allocation on, and on "
                    "PCIe boards set the kubelet Topology Manager policy to single-numa-node."
                ),
                evidence={
                    "gpu_indices": own,
                    "worst_link": mine[1],
                    "better_indices": list(better),
                    "better_worst_link": best_code,
                    "free_at_start": sorted(avail - set(own)),
                    "topology_source": topo.source,
                    "topology_assumed": topo.assumed,
                    **comm.evidence(),
                    "gpu_hours_held": round(held_hours, 2),
                    "placement_slowdown": cfg.placement_slowdown,
                    "impact_basis": (
                        f"{held_hours:.1f} GPU-hours held x placement_slowdown "
                        f"{cfg.placement_slowdown:g}: an estimate of the time lost to slower "
                        "links, not a measurement"
                    ),
                },
            )
        )
    return out
