"""A HAMi pod whose GPU has no DCGM series (issue 32), on an L40S node HAMi shares as on
`hami_cases`' nodes (registered, split 10 ways, tainted so that no other case's pod lands
there), `l40s-hami-002`, whose dcgm-exporter does not run; HAMi's own vGPU monitor does:

- GPU 0: `hami-dark`, a Deployment's pod with 25 % of the cores and of the memory, and
  `hami-dark-half`, one with 50 %, both all window at about 20 % and 40 % of the GPU. No DCGM
  series measures the GPU: each is charged its share of it for every hour of the window (0.25
  and 0.5 GPU, on the attribution ledger's unattributed side, reason `no_exporter`), never the
  whole GPU (opencost #3828) nor its one `nvidia.com/gpu` over the split count (0.1); their
  activity is unknown (truth `hami_dark`: each pod's GPU-hours, share and reason). GPU080
  finds the node; the pods are near-misses of GPU001 (unknown activity is not idle) and of
  GPU080 (the node's finding names them). HAMi's monitor measures them within their cores.
- GPUs 1 to 3 are free.

Placed last of all, so that no earlier case or truth changes. Windows shorter than a day are
left without the case.
"""

from __future__ import annotations

import numpy as np

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.hami_cases import hami_node, tenants

NODE = "l40s-hami-002"


def plant_hami_dark(b: Builder) -> None:
    """The node, pods and truth of the case (see the module's docstring)."""
    if b.H < 24:
        return
    node = hami_node(b, NODE)
    node.exporter = False
    slot = b.free_slots(node)[0]
    quarter, half = slot.mem_mib // 4, slot.mem_mib // 2
    low = np.rint(b.pattern("level", b.H, 0, x=0.2, jitter=0.03) * 100)
    high = np.rint(b.pattern("level", b.H, 0, x=0.4, jitter=0.03) * 100)
    grants = [("hami-dark", 25, quarter, np.minimum(low, 25)), ("hami-dark-half", 50, half, high)]
    pods = tenants(b, node, slot, grants)
    b.plant_name("GPU080", "Node", "", node.name)
    b.truth["hami_dark"] = {
        "node": node.name,
        "reason": "no_exporter",
        "pods": {
            f"{p.namespace}/{p.name}": {"share": share, "gpu_hours": share * b.H}
            for p, share in zip(pods, (0.25, 0.5), strict=True)
        },
    }
    for p in pods:
        b.plant("GPU001", p, "its GPU has no DCGM series: its activity is unknown, not idle")
        b.plant("GPU080", p, "the node's finding names it")
    # The node's other GPUs free, and the new pods labelled by team, as for every other case.
    b.free_rest()
    teams.label(b)
