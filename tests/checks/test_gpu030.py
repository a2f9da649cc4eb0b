from __future__ import annotations

from pathlib import Path

import pytest

from gpuaudit.checks import gpu030_topology_mismatch as gpu030
from gpuaudit.checks.findings import Severity
from gpuaudit.core.errors import ConfigError
from tests.support.factories import (
    SAMPLES_PER_HOUR,
    Series,
    gpu_labels,
    inventory,
    make_node,
    make_pod,
    run_check,
)

L40S = "NVIDIA L40S"
HOURS = 10
TALKS = 3e9
"""Bytes per second of PCIe traffic (TX and RX each) of a pod whose GPUs exchange data."""


def traffic(tx: float, hours: int = HOURS, link: str = "pcie") -> dict[str, float]:
    """Window answers of the link-traffic queries for a GPU at `tx` bytes/s each way."""
    n = SAMPLES_PER_HOUR * hours
    return {
        f"{link}_tx_sum": tx * n,
        f"{link}_tx_count": float(n),
        f"{link}_rx_sum": tx * n,
        f"{link}_rx_count": float(n),
    }


def _gpu(  # type: ignore[no-untyped-def]
    i: int,
    host: str,
    model: str,
    pod: str = "",
    hours: int = HOURS,
    start: int = 0,
    tx: float | None = None,
):
    act: list[float | None] = [None] * start + [0.5 if pod else 0.0] * (hours - start)
    lab = gpu_labels(
        uuid=f"{host}-{i}",
        gpu=str(i),
        host=host,
        model=model,
        pod=pod,
        namespace="ai" if pod else "",
    )
    return Series(lab, act=act, health=traffic(tx, hours) if tx is not None else {})


def _board(
    model: str, pods: dict[int, str], count: int = 4, host: str = "n1", tx: float | None = TALKS
) -> list[Series]:
    return [
        _gpu(i, host, model, pods.get(i, ""), tx=tx if i in pods else None) for i in range(count)
    ]


def test_pcie_pair_split_across_numa_while_a_switch_pair_was_free() -> None:
    inv = inventory(_board(L40S, {0: "tp2", 2: "tp2"}), HOURS)
    (f,) = run_check(gpu030, inv)
    assert f.code == "GPU030" and f.severity is Severity.MEDIUM
    assert (f.resource.namespace, f.resource.name, f.resource.node) == ("ai", "tp2", "n1")
    assert f.message == (
        "Pod ai/tp2 holds 2 GPUs (L40S) on n1 joined at worst by SYS (GPUs 0, 2), while GPUs "
        "0, 1, joined at worst by PXB, were free when it started."
    )
    assert f.impact.gpu_hours == pytest.approx(2 * HOURS * 0.10)
    assert f.impact.cost == pytest.approx(2 * HOURS * 0.10 * 2.70)
    assert f.evidence["free_at_start"] == [1, 3]
    assert f.evidence["topology_assumed"] is True
    assert f.evidence["communication_basis"] == "measured"
    assert f.evidence["pcie_gb_s_per_gpu"] == pytest.approx(6.0)
    assert f.evidence["placement_slowdown"] == 0.10
    assert "x placement_slowdown 0.1: an estimate" in f.evidence["impact_basis"]


@pytest.mark.parametrize(
    "tx, pods, found",
    [
        (None, None, False),  # no traffic, no pod objects: not known to communicate
        (0.2e9, None, False),  # measured, below 1 GB/s
        (
            None,
            [make_pod("tp2", namespace="ai", node="n1", gpus=2, owner=("PyTorchJob", "j"))],
            True,
        ),
        (
            0.2e9,
            [make_pod("tp2", namespace="ai", node="n1", gpus=2, owner=("PyTorchJob", "j"))],
            False,
        ),
        (
            None,
            [make_pod("tp2", namespace="ai", node="n1", gpus=2, owner=("StatefulSet", "r"))],
            False,
        ),
    ],
)
def test_only_pods_whose_gpus_exchange_data_are_judged(
    tx: float | None, pods: list[dict[str, object]] | None, found: bool
) -> None:
    """Measured traffic decides where it was collected (even against a training owner); a
    distributed-training owner decides where it was not."""
    inv = inventory(_board(L40S, {0: "tp2", 2: "tp2"}, tx=tx), HOURS, pods=pods)
    result = run_check(gpu030, inv)
    assert bool(result) is found
    if found:
        assert result[0].evidence["communication"] == "a distributed-training PyTorchJob"
        assert result[0].evidence["communication_basis"] == "owner"


def test_no_better_pair_free_stays_quiet() -> None:
    series = _board(L40S, {0: "tp2", 2: "tp2", 1: "other", 3: "other"})
    assert run_check(gpu030, inventory(series, HOURS)) == []


def test_a_pair_freed_only_later_does_not_count() -> None:
    # GPUs 1 and 3 are held by a pod that ends before the window does; tp2 started first.
    series = [
        _gpu(0, "n1", L40S, "tp2"),
        _gpu(2, "n1", L40S, "tp2"),
        Series(
            gpu_labels(uuid="n1-1", gpu="1", host="n1", model=L40S, pod="old", namespace="ai"),
            act=[0.5] * 4 + [None] * 6,
        ),
        Series(gpu_labels(uuid="n1-1", gpu="1", host="n1", model=L40S), act=[None] * 4 + [0.0] * 6),
        _gpu(3, "n1", L40S, "x"),
    ]
    assert run_check(gpu030, inventory(series, HOURS)) == []


def test_hgx_nvswitch_never_mismatches() -> None:
    series = _board("NVIDIA H100 80GB HBM3", {0: "tp2", 5: "tp2"}, count=8)
    assert run_check(gpu030, inventory(series, HOURS)) == []


def test_topology_file_for_the_product_overrides_the_table(tmp_path: Path) -> None:
    (tmp_path / "NVIDIA-L40S.txt").write_text(
        "\tGPU0\tGPU1\tGPU2\tGPU3\n"
        "GPU0\t X \tSYS\tPIX\tSYS\n"
        "GPU1\tSYS\t X \tSYS\tPIX\n"
        "GPU2\tPIX\tSYS\t X \tSYS\n"
        "GPU3\tSYS\tPIX\tSYS\t X \n"
    )
    nodes = [make_node("n1", "NVIDIA-L40S", 4)]
    inv = inventory(_board(L40S, {0: "tp2", 2: "tp2"}), HOURS, topology=tmp_path, nodes=nodes)
    assert run_check(gpu030, inv) == []
    inv = inventory(_board(L40S, {0: "tp2", 1: "tp2"}), HOURS, topology=tmp_path, nodes=nodes)
    (f,) = run_check(gpu030, inv)
    assert f.evidence["better_indices"] == [0, 2]
    assert "NVIDIA-L40S.txt" in f.evidence["topology_source"]


def test_p2p_status_reveals_nvlink_on_an_unknown_board() -> None:
    model = "NVIDIA A100 80GB PCIe"
    series = _board(model, {0: "tp2", 2: "tp2"})
    assert run_check(gpu030, inventory(series, HOURS)) == []  # not judged without data
    p2p = []
    for a in range(4):
        for b in range(4):
            if a != b:
                ok = {a, b} in ({0, 1}, {2, 3})
                p2p.append((series[a].labels, str(b), 0.0 if ok else 5.0))
    (f,) = run_check(gpu030, inventory(series, HOURS, p2p=p2p))
    assert f.evidence["better_worst_link"] == "NV" and f.severity is Severity.MEDIUM
    assert f.evidence["topology_source"] == "DCGM_EXP_P2P_STATUS"


def test_a_bad_topology_directory_is_one_line() -> None:
    """The inventory reads `--topology` files (checks read no files): a folder it cannot read
    fails the build, in one line."""
    with pytest.raises(ConfigError, match="--topology"):
        inventory(_board(L40S, {0: "tp2", 2: "tp2"}), HOURS, Path("/nonexistent/topology"))
