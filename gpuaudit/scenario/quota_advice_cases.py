"""GPU090's quota advice: a Kueue ResourceFlavor whose ClusterQueues' nominal quotas together
exceed what its nodes allocate, where the finding names the queues to lower and to what.

Planted: flavor `gb200-shared` (one GB200 node of 4 GPUs, pool `shared`) is promised 8 GPUs by
`shared-a-cq` and `shared-b-cq` (4 each, cohort `shared`, no limits). `shared-a-cq` admits 3 GPUs
until a third of the window, `shared-b-cq` 3 GPUs from two thirds of it: their own peaks add up
to 6, above the node's 4, but they never admitted more than 3 at once. The finding lowers each
to 2 (each borrows 1 from the other's idle quota at its peak; together 4, at or above the 3
admitted at once), where lowering each to its own peak would have asked for nodes. The truth
entry carries the figures (`expect`).

Near-miss: flavor `gb200-lent` (one GB200 node of 4 GPUs, pool `lent`): `lent-a-cq` and
`lent-b-cq` (cohort `lent`) hold 2 GPUs of nominal quota each, what the node allocates
together, and a `borrowingLimit` of 2 each, which is no quota: quiet. Each admits its 2 GPUs
all window.

Placed after every other case on GB200 nodes added here (4 GPUs each: no pending pod of the
other cases can use them), so every earlier case stays as it was. Windows under 24 hours plant
nothing (GPU090 judges flavor totals in any window, but the two halves need room apart).
"""

from __future__ import annotations

from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec
from gpuaudit.scenario.quota_cases import (
    CODE,
    GPU,
    _cluster_queue,
    _cluster_queue_status,
    _gb200_flavor,
    _job_pod,
    _local_queue,
    _pool_node,
    _workload,
)

PLANTED = "gb200-shared"
NEAR_MISS = "gb200-lent"


def plant_quota_advice(b: Builder) -> None:
    """The planted flavor and its near-miss, their queues, Workloads and pods, and the truth."""
    if b.H < 24:
        return
    for key in ("kueue_resourceflavors", "kueue_clusterqueues", "kueue_localqueues"):
        b.api.setdefault(key, [])
    b.api.setdefault("kueue_workloads", [])  # `plant_queues` made them; a test may not have
    first = len(b.of_kind("gb200"))
    _apart(b, _pool_node(b, first, "shared"))
    _lent(b, _pool_node(b, first + 1, "lent"))
    _cluster_queue_status(b)


def _job(
    b: Builder,
    ns: str,
    cq: str,
    flavor: str,
    node: NodeSpec,
    gpus: int,
    hours: tuple[int, int],
) -> None:
    """A Job in `ns` (LocalQueue `ns` of ClusterQueue `cq`) admitted `gpus` GPUs of `flavor`
    from hour `hours[0]` to `hours[1]`, its pod holding the node's first `gpus` GPUs then
    (admitted from before the window when it starts at 0)."""
    h0, h1 = hours
    job = (f"{ns}-train", b.ids.uuid())
    admitted = (-2.0 if h0 == 0 else h0 - 0.1, None if h1 >= b.H else float(h1))
    _workload(b, ns, job, (ns, cq), flavor, GPU, gpus, 1, admitted)
    slots = b.slots_by_node[node.name][:gpus]
    _job_pod(b, ns, job, node, slots, h0, h1)


def _apart(b: Builder, node: NodeSpec) -> None:
    """Two queues that peak a third of the window apart on a flavor their quota overcommits."""
    flavor = _gb200_flavor(b, "shared")
    third = b.H // 3
    for ns, cq, hours in (
        ("forecast", "shared-a-cq", (0, third)),
        ("ranking", "shared-b-cq", (b.H - third, b.H)),
    ):
        _cluster_queue(b, cq, flavor, GPU, 4, "shared")
        _local_queue(b, ns, ns, cq)
        _job(b, ns, cq, flavor, node, 3, hours)
    b.plant_name(CODE, "ResourceFlavor", "", flavor)
    b.truth["planted"][CODE][-1]["expect"] = {
        "quota_changes": [
            {"queue": "shared-a-cq", "from": 4, "to": 2, "borrows_at_peak": 1},
            {"queue": "shared-b-cq", "from": 4, "to": 2, "borrows_at_peak": 1},
        ],
        "peak_admitted_together": 3,
        "queue_peaks_admitted": {"shared-a-cq": 3, "shared-b-cq": 3},
        "flavor_allocatable": 4,
    }
    for cq in ("shared-a-cq", "shared-b-cq"):
        b.plant_name(CODE, "ClusterQueue", "", cq, "named by its flavor's finding, not its own")


def _lent(b: Builder, node: NodeSpec) -> None:
    """Two queues whose nominal quota equals their flavor's node, with borrowing limits."""
    flavor = _gb200_flavor(b, "lent")
    for ns, cq in (("pricing", "lent-a-cq"), ("risk", "lent-b-cq")):
        _cluster_queue(b, cq, flavor, GPU, 2, "lent", borrowingLimit=2)
        _local_queue(b, ns, ns, cq)
        job = (f"{ns}-train", b.ids.uuid())
        _workload(b, ns, job, (ns, cq), flavor, GPU, 2, 1, (-2.0, None))
        _job_pod(b, ns, job, node, b.free_slots(node)[:2], 0, b.H)
    b.plant_name(
        CODE,
        "ResourceFlavor",
        "",
        flavor,
        "its queues' nominal quota equals its node; only their borrowingLimits go beyond",
    )
