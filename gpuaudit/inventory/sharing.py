"""GPUs shared by time-slicing or MPS: which nodes share their GPUs, into how many replicas,
and how many pods held one device at once.

The signs (`docs/domain.md`, GPU sharing), each stated in the evidence:

- GPU Feature Discovery's node labels `nvidia.com/gpu.replicas` (above 1) and
  `nvidia.com/gpu.sharing-strategy` (`time-slicing` or `mps`), and the product's `-SHARED`
  suffix;
- the device plugin advertising `nvidia.com/gpu` at a multiple of the physical GPUs (8 GPUs x
  4 replicas: 32), or `nvidia.com/gpu.shared` (`renameByDefault`); MIG's single strategy, which
  advertises slices as `nvidia.com/gpu`, is not sharing;
- several pods on one device in one bucket (dcgm-exporter's `--kubernetes-virtual-gpus`
  copies the device's series to every pod holding a replica of it).

A device's replicas are the node's (the label, else the advertised multiple), or the most pods
seen on it at once when that is more: its GPU-hours are split by them, so its holders never
count more than the device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.inventory import columns as C

if TYPE_CHECKING:
    import pandas as pd

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
SHARED_SUFFIX = "-SHARED"
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MAX_REPLICAS = 1024
"""Most replicas one device is taken to be shared into (a larger figure is ignored)."""


@dataclass(frozen=True)
class Sharing:
    """How a node shares its GPUs."""

    replicas: int
    """Replicas per physical GPU (1: not shared, or shared into an unknown number)."""
    evidence: tuple[str, ...]
    """The signs read, a phrase each (`label nvidia.com/gpu.replicas=4`)."""

    @property
    def shared(self) -> bool:
        return bool(self.evidence)


NONE = Sharing(1, ())
"""A node that does not share its GPUs."""


def _int(raw: Any) -> int | None:
    text = str(raw).strip() if isinstance(raw, str | int | float) else ""
    if not text.isdigit():
        return None
    n = int(text)
    return n if 1 <= n <= MAX_REPLICAS else None


def _node(row: Mapping[Any, Any], physical: int) -> Sharing:
    labels = row[C.NODE_LABELS] if isinstance(row[C.NODE_LABELS], Mapping) else {}
    alloc = row[C.ALLOCATABLE] if isinstance(row[C.ALLOCATABLE], Mapping) else {}
    evidence: list[str] = []
    replicas = 1
    label = _int(labels.get(REPLICAS_LABEL, ""))
    if label is not None and label > 1:
        replicas = label
        evidence.append(f"label {REPLICAS_LABEL}={label}")
    strategy = str(labels.get(STRATEGY_LABEL, ""))
    if strategy in ("time-slicing", "mps"):
        evidence.append(f"label {STRATEGY_LABEL}={strategy}")
    product = str(row[C.PRODUCT])
    if product.endswith(SHARED_SUFFIX):
        evidence.append(f"product {product}")
    single_mig = str(labels.get(MIG_STRATEGY_LABEL, "")) == "single"
    for resource in (GPU_RESOURCE, SHARED_RESOURCE):
        if resource == GPU_RESOURCE and single_mig:
            continue  # MIG slices advertised as whole GPUs
        have = float(alloc.get(resource, 0.0) or 0.0)
        if physical <= 0 or have <= physical and resource == GPU_RESOURCE or have <= 0:
            continue
        ratio = have / physical
        if ratio == int(ratio) and 1 < ratio <= MAX_REPLICAS:
            evidence.append(f"allocatable {resource} {have:g} on {physical} GPUs")
            replicas = max(replicas, int(ratio)) if label is None else replicas
    return Sharing(replicas, tuple(evidence))


def by_node(nodes: pd.DataFrame, holdings: pd.DataFrame) -> dict[str, Sharing]:
    """The nodes that share their GPUs, by name. Physical GPUs per node: the largest of the
    node's `nvidia.com/gpu.count` label, the devices DCGM reported on it, and the GPUs HAMi
    registered on it (allocatable `nvidia.com/gpu` over their split count, `GPU_REPLICAS`,
    see `with_split_devices`)."""
    seen: dict[str, int] = {}
    if not holdings.empty:
        whole = holdings[holdings[C.UUID] != ""]
        seen = {str(k): int(v) for k, v in whole.groupby(C.NODE)[C.UUID].nunique().items()}
    out: dict[str, Sharing] = {}
    for row in nodes.to_dict("records"):
        name = str(row[C.NODE])
        split = float(row.get(C.GPU_REPLICAS) or 1.0)
        registered = int(float(row[C.ALLOCATABLE_GPU] or 0) / split) if split > 1 else 0
        physical = max(int(float(row[C.GPU_COUNT] or 0)), seen.get(name, 0), registered)
        found = _node(row, physical)
        if found.shared:
            out[name] = found
    return out


def with_split_devices(nodes: pd.DataFrame, registered: Mapping[str, int]) -> pd.DataFrame:
    """`nodes` with `GPU_REPLICAS` of each node whose device plugin advertises each of its
    `registered` GPUs (node -> physical GPUs, as HAMi's device plugin registers them in the
    node annotation `hami.io/node-nvidia-register`) several times over: its allocatable
    `nvidia.com/gpu` over them where that is a whole number above its replicas (HAMi
    advertises each GPU as many times as its split count: 4 GPUs split 10 ways are 40), so
    that every count of a node's physical GPUs (allocatable over replicas) counts its GPUs,
    not their splits."""
    if nodes.empty or not registered:
        return nodes
    reps = nodes[C.GPU_REPLICAS].to_numpy(dtype=np.float64).copy()
    alloc = nodes[C.ALLOCATABLE_GPU].to_numpy(dtype=np.float64)
    for i, node in enumerate(nodes[C.NODE].tolist()):
        devices = registered.get(str(node), 0)
        ratio = alloc[i] / devices if devices > 0 else 0.0
        if ratio == int(ratio) and reps[i] < ratio <= MAX_REPLICAS:
            reps[i] = ratio
    out: pd.DataFrame = nodes.assign(**{C.GPU_REPLICAS: reps})
    return out


def holders_at_once(
    holdings: pd.DataFrame, hid: Any, ts: Any, held_h: Any, step: float
) -> dict[str, int]:
    """Per device (slot) that more than one pod held at once: the most pods that held it
    together in one bucket, from the hourly table's holding ids `hid`, bucket ends `ts` and
    hours held `held_h`. Pods that followed each other within a bucket (one ends, the next
    starts) hold it one at a time: the bucket's held hours, summed, are then within the bucket;
    copies of one device's series to several pods (`--kubernetes-virtual-gpus`) each cover it."""
    import pandas as pd

    if holdings.empty:
        return {}
    held = holdings[holdings[C.HELD]]
    many = held[C.SLOT].value_counts()
    many = many[many > 1]
    if many.empty:
        return {}
    on_shared = holdings[C.HELD].to_numpy(dtype=bool) & holdings[C.SLOT].isin(many.index).to_numpy()
    hid_arr = np.asarray(hid)
    keep = on_shared[hid_arr]
    if not keep.any():
        return {}
    slots = holdings[C.SLOT].to_numpy(dtype=object)[hid_arr[keep]]
    rows = pd.DataFrame(
        {"slot": slots, "ts": np.asarray(ts)[keep], "h": np.asarray(held_h, dtype="float64")[keep]}
    )
    per_bucket = rows.groupby(["slot", "ts"])["h"].agg(["sum", "size"])
    # Pods at once: the held hours over the bucket's, rounded (a missed scrape is not a pod),
    # never more than the holdings in the bucket.
    together = np.minimum(np.rint(per_bucket["sum"] / (step / 3600.0)), per_bucket["size"])
    counts = together.groupby(level=0).max()
    return {str(k): int(v) for k, v in counts.items() if int(v) > 1}
