"""Each node's GPU-to-GPU links, resolved once while the inventory is built (`--topology` files
are read here, never by a check)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpuaudit.core import limits
from gpuaudit.core.numbers import index_label, json_number
from gpuaudit.domain import topology
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import node_products

if TYPE_CHECKING:
    import pandas as pd


def _p2p_pairs(p2p: pd.DataFrame, limit: int) -> dict[str, dict[tuple[int, int], float]]:
    """Node -> (GPU index, peer index) -> worst `DCGM_EXP_P2P_STATUS`; indices that are not
    ASCII numbers below `limit` (GPUs one node can hold) are left out."""
    out: dict[str, dict[tuple[int, int], float]] = {}
    for row in p2p.itertuples(index=False):
        g, peer = index_label(getattr(row, C.GPU_INDEX)), index_label(getattr(row, C.PEER_INDEX))
        if g is not None and peer is not None and g < limit and peer < limit:
            pairs = out.setdefault(str(getattr(row, C.NODE)), {})
            pairs[(g, peer)] = float(getattr(row, C.P2P_STATUS))
    return out


def node_topologies(
    holdings: pd.DataFrame,
    nodes: pd.DataFrame,
    p2p: pd.DataFrame,
    files: topology.TopologyFiles | None = None,
) -> Mapping[str, topology.Topology | None]:
    """Every node with whole GPUs in DCGM or P2P status -> its best-known GPU topology (None
    when it cannot be known): its file or its product's file among `files`, else the built-in
    table, with DCGM P2P status applied on top. A node has as many GPUs as the larger of its
    highest DCGM GPU index plus one and its `nvidia.com/gpu.count` label."""
    if holdings.empty and p2p.empty:
        return {}
    h = holdings
    limit = limits.NODE_GPUS.value()
    whole = h[(h[C.MIG_ID] == "") & (h[C.GPU_INDEX] != "") & (h[C.NODE] != "")]
    highest: dict[str, int] = {}
    for node, gpu in zip(whole[C.NODE].tolist(), whole[C.GPU_INDEX].tolist(), strict=True):
        i = index_label(gpu)
        if i is not None and i < limit:
            highest[node] = max(i, highest.get(node, -1))
    # The node's label count, as `inventory.kube` read it: bounded, 0 when it was unreadable.
    labelled = (
        dict(zip(nodes[C.NODE].tolist(), nodes[C.GPU_COUNT].tolist(), strict=True))
        if not nodes.empty
        else {}
    )
    pairs = _p2p_pairs(p2p, limit)
    products = node_products(holdings, nodes)
    out: dict[str, topology.Topology | None] = {}
    for node in sorted(set(whole[C.NODE].tolist()) | set(pairs)):
        count = max(
            highest.get(node, -1) + 1, min(int(json_number(labelled.get(node)) or 0), limit)
        )
        out[node] = topology.for_node(node, products.get(node, ""), count, files, pairs.get(node))
    return out
