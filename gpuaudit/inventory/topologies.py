"""Each node's GPU-to-GPU links, resolved once while the inventory is built (`--topology` files
are read here, never by a check)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpuaudit import topology
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.derived import node_products

if TYPE_CHECKING:
    import pandas as pd


def _p2p_pairs(p2p: pd.DataFrame) -> dict[str, dict[tuple[int, int], float]]:
    """Node -> (GPU index, peer index) -> worst `DCGM_EXP_P2P_STATUS`."""
    out: dict[str, dict[tuple[int, int], float]] = {}
    for row in p2p.itertuples(index=False):
        g, peer = str(getattr(row, C.GPU_INDEX)), str(getattr(row, C.PEER_INDEX))
        if g.isdigit() and peer.isdigit():
            pairs = out.setdefault(str(getattr(row, C.NODE)), {})
            pairs[(int(g), int(peer))] = float(getattr(row, C.P2P_STATUS))
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
    whole = h[(h[C.MIG_ID] == "") & (h[C.GPU_INDEX] != "") & (h[C.NODE] != "")]
    idx = whole[C.GPU_INDEX].astype(str)
    highest = idx[idx.str.isdigit()].astype(int).groupby(whole[C.NODE]).max().to_dict()
    labelled = (
        dict(zip(nodes[C.NODE].tolist(), nodes[C.GPU_COUNT].tolist(), strict=True))
        if not nodes.empty
        else {}
    )
    pairs = _p2p_pairs(p2p)
    products = node_products(holdings, nodes)
    out: dict[str, topology.Topology | None] = {}
    for node in sorted(set(whole[C.NODE].tolist()) | set(pairs)):
        count = max(int(highest.get(node, -1)) + 1, int(float(labelled.get(node, 0) or 0)))
        out[node] = topology.for_node(node, products.get(node, ""), count, files, pairs.get(node))
    return out
