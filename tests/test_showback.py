"""The showback's cost model adds up (issue 35): on hand-computed small clusters (whole GPUs,
a MIG slice, a pod on a node without an exporter; a DRA-claimed GPU and time-sliced replicas)
and on a generated cluster with time-sliced GPUs, MIG, DRA claims, KAI fractions and HAMi
shares, every grouping's lines add up exactly, in the cents and hundredths the reports show, to
the cluster's cost and to the summary."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.audit.showback import (
    IDLE,
    IDLE_RULES,
    NO_OWNER,
    UNALLOCATED,
    Showback,
    apportion,
)
from gpuaudit.inventory import Inventory
from gpuaudit.inventory import columns as C
from gpuaudit.scenario import generate
from gpuaudit.scenario.emit import write_snapshot
from tests.support.factories import (
    START,
    Series,
    gpu_labels,
    inventory,
    make_node,
    make_pod,
)

HOURS = 4
PRICES = {"H100": 4.0, "L40S": 1.0}


def _hand() -> Inventory:
    """node-a: 2 H100 GPUs. GPU-0 whole, ml/a, busy 2 h then idle 2 h; GPU-1 in MIG, a 3g.40gb
    slice (3/7 of the GPU) held by team/b, busy all 4 h. node-b: 1 H100 without an exporter,
    ml/c holding it all 4 h (the ledger's no_exporter side). H100 at 4.00 per GPU-hour."""
    series = [
        Series(gpu_labels("GPU-0", "0", "node-a", pod="a", namespace="ml"), act=[0.5, 0.5, 0, 0]),
        Series(
            gpu_labels("GPU-1", "1", "node-a", pod="b", namespace="team", mig=("3g.40gb", "2")),
            act=[0.5] * HOURS,
        ),
    ]
    pods = [
        make_pod("a", "ml", "node-a", labels={"cost": "x", "owner": "alice"}, started=START),
        make_pod("b", "team", "node-a", labels={"cost": "x"}, started=START),
        make_pod("c", "ml", "node-b", started=START),
    ]
    pods[1]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": "1"}}
    nodes = [make_node("node-a", gpus=2), make_node("node-b", gpus=1)]
    return inventory(series, HOURS, pods=pods, nodes=nodes)


def _showback(inv: Inventory, rule: str = "none", label: str = "") -> Showback:
    result = run_checks(inv, Settings(prices=PRICES), group_label=label, idle_rule=rule)
    assert result.showback is not None
    return result.showback


def _line(sb: Showback, group: str, by: str = "namespace") -> Any:
    (found,) = [ln for g in sb.groupings if g.by == by for ln in g.lines if ln.group == group]
    return found


def D(x: str) -> Decimal:
    return Decimal(x)


def test_hand_computed_cluster_none() -> None:
    sb = _showback(_hand())
    (p,) = sb.products
    assert (p.gpus, p.price, p.capacity_gpu_hours, p.capacity_cost) == (3, D("4.0"), 12, 48)
    # Allocated: 4 (GPU-0) + 4 x 3/7 (the slice) + 4 (no exporter) = 9.714... GPU-hours.
    assert p.allocated_gpu_hours == D("9.71") and p.allocated_cost == D("38.86")
    assert (p.idle_gpu_hours, p.idle_cost) == (D("2.00"), D("8.00"))
    assert p.unmeasured_gpu_hours == D("4.00")  # node-b's pod: held, activity unknown
    assert p.unallocated_cost == D("9.14")
    ml, team = _line(sb, "ml"), _line(sb, "team")
    assert (ml.allocated_gpu_hours, ml.idle_gpu_hours, ml.used_gpu_hours) == (8, 2, 6)
    assert (ml.allocated_cost, ml.idle_cost, ml.used_cost) == (32, 8, 24)
    assert (team.allocated_gpu_hours, team.allocated_cost) == (D("1.71"), D("6.86"))
    assert _line(sb, UNALLOCATED).allocation_basis_cost == D("9.14")
    assert _line(sb, IDLE).usage_basis_cost == D("8.00")
    assert ml.allocation_basis_cost == 32 and ml.usage_basis_cost == 24


def test_hand_computed_cluster_proportional_and_even() -> None:
    inv = _hand()
    sb = _showback(inv, "proportional")
    ml, team = _line(sb, "ml"), _line(sb, "team")
    # 9.14 unallocated by allocated GPU-hours 8 : 12/7 (0.8235 : 0.1765): 7.53 and 1.61;
    # 8.00 idle: 6.59 and 1.41.
    assert (ml.shared_unallocated_cost, team.shared_unallocated_cost) == (D("7.53"), D("1.61"))
    assert (ml.shared_idle_cost, team.shared_idle_cost) == (D("6.59"), D("1.41"))
    assert ml.allocation_basis_cost == D("39.53") and ml.usage_basis_cost == D("38.12")
    assert not [ln for g in sb.groupings for ln in g.lines if ln.group in (IDLE, UNALLOCATED)]
    sb = _showback(inv, "even")
    ml, team = _line(sb, "ml"), _line(sb, "team")
    assert (ml.shared_unallocated_cost, team.shared_unallocated_cost) == (D("4.57"), D("4.57"))
    assert (ml.shared_idle_cost, team.shared_idle_cost) == (D("4.00"), D("4.00"))


def test_hand_computed_label_grouping() -> None:
    sb = _showback(_hand(), "none", "cost")
    x = _line(sb, "x", "label:cost")
    assert x.allocated_gpu_hours == D("5.71") and x.idle_gpu_hours == 2
    assert _line(sb, "(no label)", "label:cost").allocated_gpu_hours == 4


def test_hand_computed_owner_grouping() -> None:
    """ml/a carries the label owner=alice (`--owner-keys`' first default); team/b and ml/c
    name no owner."""
    sb = _showback(_hand(), "proportional")
    alice, unknown = _line(sb, "alice", "owner"), _line(sb, NO_OWNER, "owner")
    assert (alice.allocated_gpu_hours, alice.idle_gpu_hours, alice.allocated_cost) == (4, 2, 16)
    assert (unknown.allocated_gpu_hours, unknown.allocated_cost) == (D("5.71"), D("22.86"))
    assert alice.allocation_basis_cost + unknown.allocation_basis_cost == 48


def _assert_adds_up(sb: Showback, summary: Any) -> None:
    """Every grouping's lines sum to the products' totals, the products' totals to the
    cluster's cost and to the summary's rounded figures."""
    r = summary.rounded()
    assert sb.total("allocated_gpu_hours") == Decimal(repr(r.allocated_gpu_hours)).quantize(
        Decimal("0.01")
    )
    assert sb.total("idle_gpu_hours") == Decimal(repr(r.idle_gpu_hours)).quantize(Decimal("0.01"))
    assert sb.total("idle_cost") == Decimal(repr(r.wasted_cost)).quantize(Decimal("0.01"))
    assert sum(p.gpus for p in sb.products) == summary.gpus_total
    cluster = sb.total("capacity_cost")
    for p in sb.products:
        assert p.used_gpu_hours + p.idle_gpu_hours == p.allocated_gpu_hours
        assert p.used_cost + p.idle_cost == p.allocated_cost
        assert p.allocated_cost + p.unallocated_cost == p.capacity_cost
    for g in sb.groupings:
        assert sum(ln.allocation_basis_cost for ln in g.lines) == cluster, g.by
        assert sum(ln.usage_basis_cost for ln in g.lines) == cluster, g.by
        for field in ("allocated_gpu_hours", "idle_gpu_hours", "used_gpu_hours"):
            assert sum(getattr(ln, field) for ln in g.lines) == sb.total(field), (g.by, field)
        for field in ("allocated_cost", "idle_cost", "used_cost"):
            assert sum(getattr(ln, field) for ln in g.lines) == sb.total(field), (g.by, field)
        for ln in g.lines:
            assert ln.used_gpu_hours + ln.idle_gpu_hours == ln.allocated_gpu_hours
            assert ln.idle_gpu_hours >= 0 and ln.used_gpu_hours >= 0
            for x in (ln.allocation_basis_cost, ln.usage_basis_cost, ln.allocated_cost):
                assert x == x.quantize(Decimal("0.01"))


@pytest.mark.parametrize("rule", IDLE_RULES)
def test_hand_computed_cluster_adds_up(rule: str) -> None:
    result = run_checks(_hand(), Settings(prices=PRICES), group_label="cost", idle_rule=rule)
    assert result.showback is not None
    _assert_adds_up(result.showback, result.summary)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Inventory:
    from gpuaudit import snapshot
    from gpuaudit.inventory import build

    path = tmp_path_factory.mktemp("showback") / "scenario.json.gz"
    write_snapshot(generate(400, 2, 1), path)
    return build(snapshot.read(path), None)


@pytest.mark.parametrize("rule", IDLE_RULES)
def test_generated_cluster_adds_up(generated: Inventory, rule: str) -> None:
    """generate(400, 2, 1) has time-sliced and HAMi-shared GPUs, MIG slices, DRA claims, KAI
    fractions and reservations, and pods held without DCGM series (tests/test_fleet_adds_up.py
    checks that every one of them has GPU-hours)."""
    result = run_checks(generated, Settings(), group_label="team", idle_rule=rule)
    sb = result.showback
    assert sb is not None and sb.idle_rule == rule
    assert result.attribution is not None
    kinds = ("shared_split", "kubernetes_join", "dra_claim", "kai_fraction", "kai_reserved")
    for how in (*kinds, "hami_share"):
        assert result.attribution.attributed[how] > 0, how
    assert (generated.holdings[C.MIG_PROFILE] != "").any()  # MIG slices
    _assert_adds_up(sb, result.summary)
    assert [g.by for g in sb.groupings] == ["namespace", "label:team", "owner"]


def test_apportion() -> None:
    assert apportion(100, {"a": 1, "b": 1, "c": 1}) == {"a": 34, "b": 33, "c": 33}
    assert apportion(-5, {"a": 1, "b": 3}) == {"a": -1, "b": -4}
    assert apportion(7, {"a": 0, "b": 0}) == {"a": 7, "b": 0}
    assert apportion(3, {}) == {}


def _shared_and_dra() -> Inventory:
    """node-a: 2 H100 GPUs, one held through a DRA claim by ml/trainer-0 (no pod label on its
    series: busy 3 h, idle 1 h), the other held by nobody. s1: 2 L40S GPUs time-sliced 2 ways;
    web/q1 holds a replica of GPU 0 (busy), web/q2 one of GPU 1 (idle): half a GPU each, 4 h."""
    from tests.inventory.test_dra import claim, dra_pod, gpu_device, resource_slice

    l40s = "NVIDIA L40S"
    series = [
        Series(gpu_labels("GPU-aaaa", "0", "node-a"), act=[0.5, 0.5, 0.5, 0.01]),
        Series(gpu_labels("GPU-bbbb", "1", "node-a"), act=[0.01] * HOURS),
        Series(gpu_labels("GPU-s0", "0", "s1", l40s, pod="q1", namespace="web"), act=[0.5] * 4),
        Series(gpu_labels("GPU-s1", "1", "s1", l40s, pod="q2", namespace="web"), act=[0.01] * 4),
    ]
    shared = make_node("s1", "NVIDIA-L40S", 4)
    shared["metadata"]["labels"].update(
        {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "2"}
    )
    pods = [dra_pod(started=START), make_pod("q1", "web", "s1"), make_pod("q2", "web", "s1")]
    slices = [resource_slice([gpu_device("gpu-0", "GPU-aaaa"), gpu_device("gpu-1", "GPU-bbbb")])]
    lists = {"resourceclaims": [claim(["trainer-0"], ["gpu-0"])], "resourceslices": slices}
    nodes = [make_node("node-a", gpus=2), shared]
    return inventory(series, HOURS, pods=pods, nodes=nodes, lists=lists)


def test_hand_computed_shared_and_dra_gpus() -> None:
    inv = _shared_and_dra()
    sb = _showback(inv)
    h100, l40s = sb.products
    assert (h100.product, h100.gpus, h100.capacity_cost) == ("NVIDIA-H100-80GB-HBM3", 2, 32)
    assert (h100.allocated_gpu_hours, h100.idle_gpu_hours, h100.allocated_cost) == (4, 1, 16)
    assert (l40s.product, l40s.gpus, l40s.capacity_cost) == ("NVIDIA-L40S", 2, 8)
    # Two replicas of half a GPU each for 4 h: 4 GPU-hours, the idle one's 2 idle.
    assert (l40s.allocated_gpu_hours, l40s.idle_gpu_hours, l40s.allocated_cost) == (4, 2, 4)
    assert (h100.unallocated_cost, l40s.unallocated_cost) == (16, 4)
    sb = _showback(inv, "proportional")
    ml, web = _line(sb, "ml"), _line(sb, "web")
    assert (ml.allocation_basis_cost, ml.usage_basis_cost) == (32, 32)
    assert (web.allocation_basis_cost, web.usage_basis_cost) == (8, 8)
    assert (ml.used_cost, ml.shared_idle_cost, ml.shared_unallocated_cost) == (12, 4, 16)
    for rule in IDLE_RULES:
        result = run_checks(inv, Settings(prices=PRICES), idle_rule=rule)
        assert result.showback is not None and result.attribution is not None
        ledger = {k: v for k, v in result.attribution.attributed.items() if v}
        assert ledger == {"shared_split": 4.0, "dra_claim": 4.0}
        _assert_adds_up(result.showback, result.summary)
