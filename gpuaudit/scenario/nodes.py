"""The node kinds of a scenario: their GPUs, labels, capacity and slots, and the base cluster's
mix of kinds for a number of GPUs.

Pure functions of their arguments: the caller (`Builder.add_node`) draws the random names and
UUIDs, so that the order of the draws stays in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit.scenario.cluster import NodeSpec, SlotSpec

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L40S = "NVIDIA L40S"
GB200 = "NVIDIA GB200"
MEM = {H100: 81559, A100: 81920, L40S: 46068, GB200: 189471}
"""Framebuffer size in MiB, by model."""
TDP = {H100: 700.0, A100: 400.0, L40S: 350.0, GB200: 1200.0}
"""Board power limit in watts, by model."""
LIMIT_EXPORTED = frozenset({H100})
"""Models whose exporters export `DCGM_FI_DEV_POWER_MGMT_LIMIT` (at `TDP`): it is not a default
counter, so scans of a scenario see both a GPU's own limit and the model-table fallback."""
MIG_LAYOUT = (
    ("3g.40gb", "2", 40192),
    ("2g.20gb", "3", 19968),
    ("1g.10gb", "9", 9856),
    ("1g.10gb", "10", 9856),
)
"""The `all-balanced` MIG layout of an A100 80GB: (profile, GPU instance id, MiB) per slice."""


@dataclass(frozen=True)
class Kind:
    """A node kind: its GPU model as DCGM names it, as GPU feature discovery labels it, the
    number of GPUs per node and the GPU family label."""

    model: str
    product: str
    count: int
    family: str
    mig: str
    """The `nvidia.com/mig.strategy` label: `mixed` for the MIG-partitioned kind."""


KINDS = {
    "h100": Kind(H100, "NVIDIA-H100-80GB-HBM3", 8, "hopper", "single"),
    "a100-mig": Kind(A100, "NVIDIA-A100-SXM4-80GB", 8, "ampere", "mixed"),
    "l40s": Kind(L40S, "NVIDIA-L40S", 4, "ada-lovelace", "none"),
    "gb200": Kind(GB200, "NVIDIA-GB200", 4, "blackwell", "single"),
}


LINKS = {"l40s": ("pcie",), "gb200": ("nvlink", "pcie")}
"""Link traffic the kind's dcgm-exporter exports: PCIe (in its default counters) on the L40S
nodes, NVLink as well on the GB200 trays; the H100 and A100 nodes' exporters run a CSV without
them, so work there is judged by its owner."""


def base_layout(gpus: int) -> list[tuple[str, int]]:
    """The (kind, number) of each node of the base cluster for about `gpus` GPUs: 60 % in H100
    nodes, 20 % in MIG-partitioned A100 nodes, the rest in L40S nodes, at least one of each."""
    n_h100 = max(1, round(gpus * 0.6 / 8))
    n_a100 = max(1, round(gpus * 0.2 / 8))
    n_l40s = max(1, round((gpus - 8 * (n_h100 + n_a100)) / 4))
    return [
        *(("h100", i) for i in range(n_h100)),
        *(("a100-mig", i) for i in range(n_a100)),
        *(("l40s", i) for i in range(n_l40s)),
    ]


def node_spec(kind: str, i: int, position: int, exporter_pod: str) -> NodeSpec:
    """The `i`-th node of a kind, the `position`-th node of the cluster, with its labels and
    capacity as GPU feature discovery and the device plugin set them."""
    k = KINDS[kind]
    name = f"{kind}-node-{i:03d}"
    node = NodeSpec(
        name=name,
        kind=kind,
        model=k.model,
        product=k.product,
        gpu_count=k.count,
        ip=f"10.{position // 250 % 250}.{position % 250}.{(i % 200) + 10}",
        exporter_pod=exporter_pod,
    )
    node.labels, node.capacity = _labels(kind, name), _capacity(kind)
    node.links = LINKS.get(kind, ())
    return node


def _labels(kind: str, name: str) -> dict[str, str]:
    k = KINDS[kind]
    labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": k.product,
        "nvidia.com/gpu.count": str(k.count),
        "nvidia.com/gpu.memory": str(MEM[k.model]),
        "nvidia.com/gpu.family": k.family,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/mig.capable": "false" if kind == "l40s" else "true",
    }
    if k.mig == "mixed":
        labels.update(
            {
                "nvidia.com/mig.strategy": "mixed",
                "nvidia.com/mig.config": "all-balanced",
                "nvidia.com/mig.config.state": "success",
                **{f"nvidia.com/mig-{p}.count": n for p, n in _mig_counts(k.count).items()},
            }
        )
    else:
        labels["nvidia.com/mig.strategy"] = k.mig
    if kind == "h100":
        labels["nvidia.com/gpu.machine"] = "HGX-H100"
    return labels


def _capacity(kind: str) -> dict[str, str]:
    k = KINDS[kind]
    capacity = {"cpu": "96", "memory": "1056Gi", "pods": "110"}
    if k.mig == "mixed":
        capacity.update({f"nvidia.com/mig-{p}": n for p, n in _mig_counts(k.count).items()})
    else:
        capacity["nvidia.com/gpu"] = str(k.count)
    return capacity


def _mig_counts(gpus: int) -> dict[str, str]:
    """MIG slices per profile on a node of `all-balanced` GPUs."""
    return {"1g.10gb": str(2 * gpus), "2g.20gb": str(gpus), "3g.40gb": str(gpus)}


def slots(node: NodeSpec, uuids: list[str]) -> list[SlotSpec]:
    """The GPUs of a node (one UUID each), or their MIG slices on the MIG-partitioned kind."""
    out: list[SlotSpec] = []
    for g, uuid in enumerate(uuids):
        pci = f"00000000:{(0x18 + g * 0x11) & 0xFF:02X}:00.0"
        if KINDS[node.kind].mig == "mixed":
            for prof, gid, mem in MIG_LAYOUT:
                frac = int(prof[0]) / 7.0
                out.append(SlotSpec(node, g, uuid, pci, gid, prof, mem, frac))
        else:
            out.append(SlotSpec(node, g, uuid, pci, "", "", MEM[node.model], 1.0))
    return out
