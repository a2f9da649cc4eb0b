from __future__ import annotations

from pathlib import Path

import pytest

from gpuaudit.core.errors import ConfigError
from gpuaudit.domain import topology

SAMPLES = Path(__file__).parent / "data" / "topology"
"""`nvidia-smi topo -m` samples (synthetic, in the format of published outputs)."""

L40S_TOPO = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tPXB\tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU1\tPXB\t X \tSYS\tSYS\t0-31,64-95\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tPXB\t32-63,96-127\t1\t\tN/A\n"
    "GPU3\tSYS\tSYS\tPXB\t X \t32-63,96-127\t1\t\tN/A\n"
    "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP link\n"
)


def test_every_sample_parses() -> None:
    files = sorted(SAMPLES.glob("nvidia-smi_topo_*.txt"))
    assert len(files) == 4
    parsed = {p.name: topology.parse_topo(p.read_text(), p.name) for p in files}
    hgx = parsed["nvidia-smi_topo_hgx-h100-8gpu_SYNTHETIC.txt"]
    assert hgx.gpus == tuple(range(8)) and hgx.all_nvlink
    assert hgx.link(0, 7) == "NV18"
    dgx = parsed["nvidia-smi_topo_dgx-a100-8gpu_SYNTHETIC.txt"]
    assert dgx.all_nvlink and dgx.link(3, 6) == "NV12"
    bridged = parsed["nvidia-smi_topo_pcie-4xA100-nvlink-bridge-pairs_SYNTHETIC.txt"]
    assert bridged.link(0, 1) == "NV12" and bridged.link(1, 2) == "SYS"
    assert bridged.best([0, 1, 2, 3], 2) == ((0, 1), 0, "NV12")
    l40s = parsed["nvidia-smi_topo_pcie-4xL40S_SYNTHETIC.txt"]
    assert not l40s.any_nvlink
    assert l40s.worst([0, 2]) == (5, "SYS")
    assert l40s.best([0, 1, 2], 2) == ((0, 1), 2, "PXB")


def test_parse_tabs_or_spaces_and_ignores_nics() -> None:
    text = (
        "        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity\n"
        "GPU0     X      PIX     NODE    0-11            N/A\n"
        "GPU1    PIX      X      NODE    0-11            N/A\n"
        "NIC0    NODE    NODE     X\n"
        "\nLegend:\n"
    )
    t = topology.parse_topo(text)
    assert t.gpus == (0, 1)
    assert t.links == {(0, 1): "PIX"}


@pytest.mark.parametrize(
    "text, why",
    [
        ("hello\nworld\n", "no header"),
        ("\tGPU0\tGPU1\n", "no GPU rows"),
        ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n", "unknown link"),
        ("\tGPU0\tGPU1\nGPU0\tPIX\tPIX\n", "not X"),
    ],
)
def test_parse_rejects_what_is_not_topo_output(text: str, why: str) -> None:
    with pytest.raises(topology.TopologyError, match=why):
        topology.parse_topo(text)


def test_ranks_and_best_sets() -> None:
    t = topology.parse_topo(L40S_TOPO)
    assert [topology.link_rank(c) for c in ("NV4", "PIX", "PXB", "PHB", "NODE", "SYS")] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]
    assert topology.link_rank("bogus") is None
    assert t.worst([1]) == (0, "")
    assert t.best([1, 3], 2) == ((1, 3), 5, "SYS")
    assert t.best([0, 1, 2, 3], 3) is not None


@pytest.mark.parametrize(
    "product, count, kind",
    [
        ("NVIDIA-H100-80GB-HBM3", 8, "nvswitch"),
        ("NVIDIA H100 80GB HBM3", 8, "nvswitch"),
        ("NVIDIA-H200", 8, "nvswitch"),
        ("NVIDIA-A100-SXM4-80GB", 8, "nvswitch"),
        ("NVIDIA-GB200", 4, "nvswitch"),
        ("NVIDIA-H100-NVL", 4, "bridged"),
        ("NVIDIA-L40S", 4, "pcie"),
        ("NVIDIA L4", 8, "pcie"),
        ("NVIDIA-A10G", 4, "pcie"),
        ("Tesla-T4", 4, "pcie"),
        ("NVIDIA-A100-PCIE-40GB", 4, None),
        ("NVIDIA-H100-PCIe", 2, None),
        ("Some-Other-GPU", 4, None),
    ],
)
def test_builtin_table(product: str, count: int, kind: str | None) -> None:
    t = topology.builtin(product, count)
    if kind is None:
        assert t is None
        return
    assert t is not None and t.gpus == tuple(range(count))
    if kind == "nvswitch":
        assert t.all_nvlink and not t.assumed
    elif kind == "bridged":
        assert t.link(0, 1) == "NV12" and t.link(2, 3) == "NV12"
        assert t.link(1, 2) == "SYS" and t.assumed
    else:
        assert not t.any_nvlink and t.assumed
        assert t.link(0, 1) == "PXB"
        assert t.link(0, count - 1) == "SYS"


def test_pcie_layout_of_eight_gpus_has_host_bridge_pairs() -> None:
    t = topology.builtin("NVIDIA-L4", 8)
    assert t is not None
    assert (t.link(0, 1), t.link(0, 2), t.link(3, 4)) == ("PXB", "NODE", "SYS")


def test_p2p_status_overrides_the_table_and_stands_alone() -> None:
    table = topology.builtin("NVIDIA-H100-NVL", 4)
    # The bridge of pair (2, 3) is missing; pair (0, 2) reports NVLink P2P.
    p2p = {(2, 3): 5.0, (3, 2): 5.0, (0, 2): 0.0}
    t = topology.with_p2p(table, p2p)
    assert t is not None and "DCGM_EXP_P2P_STATUS" in t.source
    assert t.link(2, 3) == "PCIe" and t.link(0, 2) == "NV" and t.link(0, 1) == "NV12"
    alone = topology.with_p2p(None, {(0, 1): 0.0, (0, 2): 3.0, (1, 2): 3.0})
    assert alone is not None and alone.gpus == (0, 1, 2)
    assert alone.best([0, 1, 2], 2) == ((0, 1), 0, "NV")
    assert topology.with_p2p(table, {}) is table


def test_load_dir_by_node_then_product_and_caches(tmp_path: Path) -> None:
    (tmp_path / "node-7.txt").write_text(L40S_TOPO)
    (tmp_path / "NVIDIA-L40S.txt").write_text(L40S_TOPO.replace("PXB", "PIX"))
    (tmp_path / "notes.md").write_text("ignored")
    files = topology.load_dir(tmp_path)
    assert files is topology.load_dir(tmp_path)
    assert set(files.by_name) == {"node-7", "NVIDIA-L40S"}
    by_node = topology.for_node("node-7", "NVIDIA-L40S", 4, files)
    by_product = topology.for_node("node-8", "NVIDIA-L40S", 4, files)
    assert by_node is not None and by_node.link(0, 1) == "PXB"
    assert by_product is not None and by_product.link(0, 1) == "PIX"
    assert "NVIDIA-L40S.txt" in by_product.source
    builtin = topology.for_node("node-9", "NVIDIA-H100-80GB-HBM3", 8, files)
    assert builtin is not None and builtin.all_nvlink


def test_load_dir_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the directory"):
        topology.load_dir(tmp_path / "missing")
    (tmp_path / "bad.txt").write_text("not a topology\n")
    with pytest.raises(ConfigError, match=r"bad\.txt.*no header"):
        topology.load_dir(tmp_path)
