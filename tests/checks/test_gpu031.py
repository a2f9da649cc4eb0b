from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaudit.checks import gpu031_gang_spread as gpu031
from gpuaudit.checks.base import pack
from gpuaudit.checks.findings import Severity
from gpuaudit.inventory import Inventory
from gpuaudit.inventory.feasibility import NodeFacts, Placement
from tests.support.factories import (
    SAMPLES_PER_HOUR,
    Series,
    gpu_labels,
    inventory,
    make_node,
    make_pod,
    run_check,
)

HOURS = 30
GB200 = "NVIDIA GB200"
H100 = "NVIDIA H100 80GB HBM3"


def _gpus(host: str, model: str, holders: list[str]) -> list[Series]:
    return [
        Series(
            gpu_labels(
                uuid=f"{host}-{i}",
                gpu=str(i),
                host=host,
                model=model,
                pod=p,
                namespace="ml" if p else "",
            ),
            act=[0.6 if p else 0.0] * HOURS,
        )
        for i, p in enumerate(holders)
    ]


def _job(name: str, workers: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}}
        },
    }


def _member(pod: str, job: str, node: str, gpus: int, **kw: Any) -> dict[str, Any]:
    return make_pod(
        pod,
        node=node,
        gpus=gpus,
        owner=("PyTorchJob", job),
        labels={"training.kubeflow.org/job-name": job},
        **kw,
    )


def test_pack_uses_the_fewest_nodes_or_says_none() -> None:
    assert pack([4, 4], {"a": 8, "b": 4, "c": 4}) == ["a"]
    assert sorted(pack([4, 4], {"b": 4, "c": 4}) or []) == ["b", "c"]
    assert pack([8], {"a": 4, "b": 4}) is None


def _trays(t0: list[Series]) -> Inventory:
    """A MoE job on trays t1 (NVLink domain c.1) and t2 (c.2), and tray t0 of domain c.1 as
    `t0` says."""
    series = (
        t0 + _gpus("t1", GB200, ["moe-master-0"] * 4) + _gpus("t2", GB200, ["moe-worker-0"] * 4)
    )
    nodes = [
        make_node("t0", "NVIDIA-GB200", 4, clique="c.1"),
        make_node("t1", "NVIDIA-GB200", 4, clique="c.1"),
        make_node("t2", "NVIDIA-GB200", 4, clique="c.2"),
    ]
    pods = [_member("moe-master-0", "moe", "t1", 4), _member("moe-worker-0", "moe", "t2", 4)]
    return inventory(series, HOURS, pods=pods, nodes=nodes, lists={"pytorchjobs": [_job("moe", 1)]})


def test_gang_across_nvlink_domains_while_one_domain_had_room() -> None:
    (f,) = run_check(gpu031, _trays(_gpus("t0", GB200, [""] * 4)))
    assert f.code == "GPU031" and f.severity is Severity.MEDIUM
    assert (f.resource.kind, f.resource.namespace, f.resource.name) == ("PyTorchJob", "ml", "moe")
    assert f.message == (
        "PyTorchJob ml/moe (2 pods, 8 GPUs, GB200) spans 2 NVLink domains (gpu.clique c.1, "
        "c.2) while domain c.1 had room for all of it; the 4 GB200 GPUs it needs there sat "
        "unheld for 100 % of the job's hours, so the move costs nothing extra."
    )
    assert f.impact.gpu_hours == pytest.approx(8 * HOURS * 0.10)
    assert f.impact.cost == pytest.approx(8 * HOURS * 0.10 * 10.50)
    assert f.evidence["tighter_clique"] == "c.1"
    assert sorted(f.evidence["tighter_nodes"]) == ["t0", "t1"]
    assert f.targets == ("t0", "t1")
    move = f.evidence["move_cost"]
    assert move["gpus_needed"] == 4 and move["gpu_hours_needed"] == 4 * HOURS
    assert move["unheld_share"] == 1.0 and move["extra_cost"] == 0


def test_a_domain_move_onto_gpus_others_held_later_says_what_is_at_list() -> None:
    """Room in the domain at the job's start, held by another pod from hour 10: the move is
    still one within the product (as many GB200 GPUs taken as left), and the finding says
    which part of it other pods held."""
    later = [
        Series(gpu_labels(uuid=f"t0-{i}", gpu=str(i), host="t0", model=GB200), act=_until(10))
        for i in range(4)
    ] + [
        Series(
            gpu_labels(uuid=f"t0-{i}", gpu=str(i), host="t0", model=GB200, pod="x", namespace="o"),
            act=_from(10),
        )
        for i in range(4)
    ]
    (f,) = run_check(gpu031, _trays(later))
    assert f.message.endswith(
        "while domain c.1 had room for all of it; the 4 GB200 GPUs it needs there sat unheld "
        "for 33 % of the job's hours (paid for already); the other 80 GPU-hours are priced at "
        "list (10.50 per GPU-hour, x 0.9 for the faster links): about 756, no more than the "
        "GB200 GPU-hours it leaves."
    )
    move = f.evidence["move_cost"]
    assert move["gpu_hours_unheld"] == 40 and move["gpu_hours_at_list"] == 80
    assert move["extra_cost"] == pytest.approx(80 * 0.9 * 10.50)
    assert f.impact.cost == pytest.approx(8 * HOURS * 0.10 * 10.50)


def test_gang_on_more_nodes_than_needed() -> None:
    series = _gpus("a", H100, ["g-master-0"] * 2 + [""] * 6) + _gpus(
        "b", H100, ["g-worker-0"] * 2 + ["x"] * 6
    )
    pods = [_member("g-master-0", "g", "a", 2), _member("g-worker-0", "g", "b", 2)]
    inv = inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [_job("g", 1)]})
    (f,) = run_check(gpu031, inv)
    assert "runs on 2 nodes (a, b) while 1 (a) had room for all of it" in f.message


def test_gang_spread_only_because_it_had_to_stays_quiet() -> None:
    series = _gpus("a", H100, ["g-master-0"] * 2 + ["x"] * 6) + _gpus(
        "b", H100, ["g-worker-0"] * 2 + ["y"] * 6
    )
    pods = [_member("g-master-0", "g", "a", 2), _member("g-worker-0", "g", "b", 2)]
    inv = inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [_job("g", 1)]})
    assert run_check(gpu031, inv) == []


def _traffic(gb_s: float) -> dict[str, float]:
    n = float(SAMPLES_PER_HOUR * HOURS)
    half = gb_s * 1e9 / 2
    return {
        "pcie_tx_sum": half * n,
        "pcie_tx_count": n,
        "pcie_rx_sum": half * n,
        "pcie_rx_count": n,
    }


def _until(h: int) -> list[float | None]:
    """No pod's activity (0) in hours [0, h), no data after."""
    return [0.0] * h + [None] * (HOURS - h)


def _from(h: int, act: float = 0.6) -> list[float | None]:
    """No data in hours [0, h), `act` after."""
    return [None] * h + [act] * (HOURS - h)


def _h100(free_until: int | None = None, data_until: int | None = None) -> list[Series]:
    """Node h: six GPUs held by pod z all window, two unheld all window, or unheld until hour
    `free_until` and held by pod y after, or unheld with data until hour `data_until` and
    none after."""
    if free_until is None and data_until is None:
        return _gpus("h", H100, ["z"] * 6 + ["", ""])
    out = _gpus("h", H100, ["z"] * 6)
    for i in (6, 7):
        lab = gpu_labels(uuid=f"h-{i}", gpu=str(i), host="h", model=H100)
        if free_until is not None:
            out.append(Series(lab, act=_until(free_until)))
            held = gpu_labels(uuid=f"h-{i}", gpu=str(i), host="h", model=H100, pod="y")
            out.append(Series(dict(held, exported_namespace="ml"), act=_from(free_until)))
        else:
            out.append(Series(lab, act=_until(data_until or 0)))
    return out


def _pcie_case(  # type: ignore[no-untyped-def]
    gb_s: float | None,
    selector: dict[str, str] | None = None,
    kind: str = "Job",
    target: list[Series] | None = None,
    pods: tuple[str, ...] = ("sd-0",),
):
    """2-GPU pods on PCIe-only L40S nodes (l, l1, ...) exchanging `gb_s` GB/s, and H100 node
    h (`target`, default `_h100()`: two GPUs unheld all window)."""
    series: list[Series] = []
    specs = []
    for k, pod in enumerate(pods):
        host = "l" if k == 0 else f"l{k}"
        mine = _gpus(host, "NVIDIA L40S", [pod, pod, "", ""])
        if gb_s is not None:
            for s in mine[:2]:
                s.health = _traffic(gb_s)
        series += mine
        specs.append(make_pod(pod, node=host, gpus=2, owner=(kind, pod), node_selector=selector))
    series += _h100() if target is None else target
    nodes = [make_node("l" if k == 0 else f"l{k}", "NVIDIA-L40S", 4) for k in range(len(pods))]
    return inventory(series, HOURS, pods=specs, nodes=[*nodes, make_node("h")])


def test_a_pcie_job_moves_onto_nvlink_gpus_nobody_held_at_no_extra_cost() -> None:
    """An H100 GPU-hour lists at more than an L40S one saves (6.88 x 0.9 against 2.70), but
    h's two free GPUs sat unheld all the job's hours: they are paid for already."""
    (f,) = run_check(gpu031, _pcie_case(gb_s=8.0))
    assert f.resource.kind == "Pod" and f.resource.name == "sd-0"
    held = 2 * HOURS
    assert f.message == (
        "Pod ml/sd-0 (2 GPUs, L40S) runs on PCIe-only GPUs (l) while h, whose GPUs are all "
        "NVLink-connected, had 2 free; the 2 H100-80GB-HBM3 GPUs it needs there sat unheld for "
        "100 % of the job's hours, so the move costs nothing extra, against 162 for the L40S "
        "GPU-hours it leaves: about 162 saved."
    )
    assert f.targets == ("h",)
    move = f.evidence["move_cost"]
    assert move["target_nodes"] == ["h"]
    assert (move["gpu_hours_needed"], move["gpu_hours_unheld"]) == (held, held)
    assert (move["gpu_hours_at_list"], move["extra_cost"]) == (0, 0)
    assert move["cost_left"] == pytest.approx(held * 2.70)
    assert f.evidence["estimated_saving"] == pytest.approx(held * 2.70)
    assert f.impact.cost == pytest.approx(held * 2.70)
    assert f.impact.gpu_hours == pytest.approx(held * 0.10)
    assert f.evidence["price_per_gpu_hour"] == {"here": 2.70, "there": 6.88}
    assert f.evidence["communication_basis"] == "measured"


def test_a_pcie_job_moves_onto_gpus_others_held_only_at_list_price() -> None:
    """h's two GPUs were free at the job's start and held by pod y from hour 1: every hour
    but the first is priced at list; at the built-in prices that costs more than it saves, at
    2.00 per H100 GPU-hour less."""
    inv = _pcie_case(gb_s=8.0, target=_h100(free_until=1))
    assert run_check(gpu031, inv) == []
    (f,) = run_check(gpu031, inv, prices={"H100": 2.0, "L40S": 2.70})
    held = 2 * HOURS
    assert f.message == (
        "Pod ml/sd-0 (2 GPUs, L40S) runs on PCIe-only GPUs (l) while h, whose GPUs are all "
        "NVLink-connected, had 2 free; the 2 H100-80GB-HBM3 GPUs it needs there sat unheld for "
        "3 % of the job's hours (paid for already); the other 58 GPU-hours are priced at list "
        "(2.00 per GPU-hour, x 0.9 for the faster links): about 104, against 162 for the L40S "
        "GPU-hours it leaves: about 58 saved."
    )
    saving = held * 2.70 - (held - 2) * 0.9 * 2.0
    assert f.evidence["estimated_saving"] == pytest.approx(saving)
    assert f.impact.cost == pytest.approx(saving)
    assert f.evidence["price_per_gpu_hour"] == {"here": 2.70, "there": 2.0}


def test_a_move_partly_onto_unheld_gpus_prices_the_rest_at_list() -> None:
    """Unheld for 20 of the job's 30 hours: the other 10 hours of its 2 GPUs are priced at
    list, and the move still saves."""
    (f,) = run_check(gpu031, _pcie_case(gb_s=8.0, target=_h100(free_until=20)))
    move = f.evidence["move_cost"]
    assert move["gpu_hours_unheld"] == 40 and move["gpu_hours_at_list"] == 20
    assert move["unheld_share"] == pytest.approx(40 / 60, abs=1e-4)
    assert move["extra_cost"] == pytest.approx(20 * 0.9 * 6.88)
    assert f.impact.cost == pytest.approx(60 * 2.70 - 20 * 0.9 * 6.88)
    assert "sat unheld for 66 % of the job's hours (paid for already); the other 20" in f.message


def test_gpus_without_data_are_no_idle_capacity() -> None:
    """h's two free GPUs report nothing after hour 25 (or 10): those hours are not counted
    unheld (missing data is never idle capacity), so the move is priced at list for them."""
    (f,) = run_check(gpu031, _pcie_case(gb_s=8.0, target=_h100(data_until=25)))
    assert f.evidence["move_cost"]["gpu_hours_unheld"] == 50
    assert run_check(gpu031, _pcie_case(gb_s=8.0, target=_h100(data_until=10))) == []


def test_two_moves_never_count_the_same_unheld_gpus() -> None:
    """Two PCIe jobs could each use h's two unheld GPUs for free; the first in job order takes
    them, and the second, priced at list, is not worth it."""
    findings = run_check(gpu031, _pcie_case(gb_s=8.0, pods=("sd-0", "sd-1")))
    assert [f.resource.name for f in findings] == ["sd-0"]
    cheap = {"H100": 2.0, "L40S": 2.70}
    second = {
        f.resource.name: f
        for f in run_check(gpu031, _pcie_case(8.0, pods=("sd-0", "sd-1")), prices=cheap)
    }["sd-1"]
    move = second.evidence["move_cost"]
    assert move["gpu_hours_unheld"] == 0
    assert move["gpu_hours_unheld_taken_by_other_moves"] == 2 * HOURS
    assert "which a move advised for other work takes" in second.message


@pytest.mark.parametrize(
    "gb_s, selector, kind, why",
    [
        (None, None, "Job", "a Job with no traffic data is not known to communicate"),
        (None, None, "StatefulSet", "a render StatefulSet with no traffic data"),
        (0.05, None, "Job", "an embedding batch measured at 0.05 GB/s"),
        (8.0, {"nvidia.com/gpu.product": "NVIDIA-L40S"}, "Job", "pinned to L40S"),
    ],
)
def test_pcie_near_misses(
    gb_s: float | None, selector: dict[str, str] | None, kind: str, why: str
) -> None:
    """No move without traffic evidence (or where the job may not go), even onto GPUs that
    sat unheld all its hours, whose move would cost nothing extra."""
    inv = _pcie_case(gb_s, selector, kind)
    assert run_check(gpu031, inv) == [], why
    assert run_check(gpu031, inv, prices={"H100": 2.0, "L40S": 2.70}) == [], why


def test_own_gpus_count_once_when_members_start_apart() -> None:
    """A 2 x 8-GPU job on two 8-GPU nodes, its worker started an hour after its master: at the
    job's start the worker's node was free, and its GPUs are the job's own. Counted once, each
    node has room for 8, and two nodes are the fewest the job can use."""
    series = (
        _gpus("a", H100, ["big-master-0"] * 8)
        + [
            Series(
                gpu_labels(uuid=f"b-{i}", gpu=str(i), host="b", model=H100), act=[0.0] + [None] * 29
            )
            for i in range(8)
        ]
        + [
            Series(
                gpu_labels(
                    uuid=f"b-{i}",
                    gpu=str(i),
                    host="b",
                    model=H100,
                    pod="big-worker-0",
                    namespace="ml",
                ),
                act=[None] + [0.6] * 29,
            )
            for i in range(8)
        ]
        + _gpus("c", H100, [""] * 8)
    )
    pods = [_member("big-master-0", "big", "a", 8), _member("big-worker-0", "big", "b", 8)]
    nodes = [make_node("a"), make_node("b"), make_node("c")]
    inv = inventory(series, HOURS, pods=pods, nodes=nodes, lists={"pytorchjobs": [_job("big", 1)]})
    assert run_check(gpu031, inv) == []
    # The same job in 4-GPU pods has a finding, and no node shows more room than it has.
    series4 = _gpus("a", H100, ["g-master-0"] * 4 + [""] * 4) + _gpus(
        "b", H100, ["g-worker-0"] * 4 + ["x"] * 4
    )
    pods4 = [_member("g-master-0", "g", "a", 4), _member("g-worker-0", "g", "b", 4)]
    inv4 = inventory(
        series4, HOURS, pods=pods4, nodes=nodes[:2], lists={"pytorchjobs": [_job("g", 1)]}
    )
    (f,) = run_check(gpu031, inv4)
    assert f.evidence["room_at_start"] == {"a": 8, "b": 4}
    assert all(v <= 8 for v in f.evidence["room_at_start"].values())


def test_a_tainted_node_with_room_is_not_a_tighter_placement() -> None:
    series = (
        _gpus("a", H100, ["g-master-0"] * 4 + ["x"] * 4)
        + _gpus("b", H100, ["g-worker-0"] * 4 + ["y"] * 4)
        + _gpus("t", H100, [""] * 8)
    )
    pods = [_member("g-master-0", "g", "a", 4), _member("g-worker-0", "g", "b", 4)]
    tainted = make_node("t")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    nodes = [make_node("a"), make_node("b"), tainted]
    lists = {"pytorchjobs": [_job("g", 1)]}
    assert run_check(gpu031, inventory(series, HOURS, pods=pods, nodes=nodes, lists=lists)) == []
    prefer = make_node("t")
    prefer["spec"]["taints"] = [{"key": "spot", "value": "1", "effect": "PreferNoSchedule"}]
    inv = inventory(series, HOURS, pods=pods, nodes=[*nodes[:2], prefer], lists=lists)
    (f,) = run_check(gpu031, inv)
    assert f.evidence["tighter_nodes"] == ["t"]


def test_measured_quiet_traffic_outweighs_a_training_owner() -> None:
    series = _gpus("a", H100, ["g-master-0"] * 2 + [""] * 6) + _gpus(
        "b", H100, ["g-worker-0"] * 2 + ["x"] * 6
    )
    for s in series:
        if s.labels.get("exported_pod", "").startswith("g-"):
            s.health = _traffic(0.01)
    pods = [_member("g-master-0", "g", "a", 2), _member("g-worker-0", "g", "b", 2)]
    inv = inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [_job("g", 1)]})
    assert run_check(gpu031, inv) == []


def test_fewer_nodes_only_on_the_jobs_own_product() -> None:
    """Room on a GB200 tray is no tighter placement for an H100 job: another product is a move
    with a price, which only the PCIe rule weighs."""
    series = (
        _gpus("a", H100, ["g-master-0"] * 2 + ["x"] * 6)
        + _gpus("b", H100, ["g-worker-0"] * 2 + ["y"] * 6)
        + _gpus("t", GB200, [""] * 4)
    )
    pods = [_member("g-master-0", "g", "a", 2), _member("g-worker-0", "g", "b", 2)]
    nodes = [make_node("a"), make_node("b"), make_node("t", "NVIDIA-GB200", 4)]
    lists = {"pytorchjobs": [_job("g", 1)]}
    assert run_check(gpu031, inventory(series, HOURS, pods=pods, nodes=nodes, lists=lists)) == []
    nodes[2] = make_node("t")  # the same node as an H100 node: a tighter placement
    series[-4:] = _gpus("t", H100, [""] * 4)
    (f,) = run_check(gpu031, inventory(series, HOURS, pods=pods, nodes=nodes, lists=lists))
    assert f.evidence["tighter_nodes"] == ["t"]


def _literal_fitting(
    room: dict[str, int],
    least: int,
    products: set[str],
    product_of: dict[str, str],
    clique_of: dict[str, str],
    domain: str,
) -> dict[str, int]:
    """The rule read literally: every node with room for the smallest pod, of the products
    (and the domain)."""
    return {
        n: r
        for n, r in room.items()
        if r >= least
        and product_of.get(n, "") in products
        and (not domain or clique_of.get(n) == domain)
    }


def _stub_views(
    product_of: dict[str, str], alloc: dict[str, int], nvlink: dict[str, SimpleNamespace]
) -> Any:
    """What `RoomAt` and `_nvlink_move` read of the views: products, node facts, topologies
    and prices."""
    facts = [NodeFacts(n, allocatable={"nvidia.com/gpu": float(a)}) for n, a in alloc.items()]
    return SimpleNamespace(
        node_products=product_of,
        placement=Placement(facts, {}),
        inv=SimpleNamespace(topologies=nvlink),
        price=lambda model: {"A": 2.0, "B": 1.0, "C": 1.0}.get(model, 3.0),
    )


def test_an_nvlink_move_among_equal_savings_names_the_first_node() -> None:
    nodes = {"n1": "B", "n2": "C", "p1": "A"}
    nvlink = {n: SimpleNamespace(all_nvlink=n != "p1") for n in nodes}
    views = _stub_views(nodes, dict.fromkeys(nodes, 8), nvlink)
    free_at = {n: {str(i) for i in range(8)} for n in ("n2", "n1")}
    capped = {n: gpu031._capped(views.placement, n, 8) for n in free_at}
    at = gpu031.RoomAt(views, free_at, capped, frozenset(nodes), {})
    job = gpu031.Job("Pod", "ml", "j", "", [gpu031.Member("p", "p1", 2, frozenset(), 0, 1, "A")])
    move = gpu031._nvlink_move(views, gpu031.Thresholds(), job, at, 10.0)
    assert move is not None and move.node == "n1" and move.saving == pytest.approx(11.0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_roomiest_nodes_pack_a_job_as_all_of_them_do(data: st.DataObject) -> None:
    """`RoomAt` hands a job only the k roomiest fitting nodes; packing them must give what
    packing every node gives, for every rule (nodes, NVLink domains, an NVLink move)."""
    names = [f"n{i:02d}" for i in range(data.draw(st.integers(1, 14)))]
    product_of = {n: data.draw(st.sampled_from(["A", "B", "C", ""])) for n in names}
    clique_of = {n: c for n in names if (c := data.draw(st.sampled_from(["", "c1", "c2"])))}
    alloc = {n: data.draw(st.sampled_from([0, 1, 2, 4, 8])) for n in names}
    free_at = {
        n: {str(i) for i in range(data.draw(st.integers(0, 8)))}
        for n in names
        if data.draw(st.booleans())
    }
    nvlink = {n: SimpleNamespace(all_nvlink=data.draw(st.booleans())) for n in names}
    views = _stub_views(product_of, alloc, nvlink)
    allowed = frozenset(data.draw(st.lists(st.sampled_from(names), unique=True)))
    capped = {n: gpu031._capped(views.placement, n, len(i)) for n, i in free_at.items()}
    at = gpu031.RoomAt(views, free_at, capped, allowed, clique_of)
    members = [
        gpu031.Member(f"p{i}", node, data.draw(st.integers(0, 8)), frozenset({str(i)}), 0.0, 1, "A")
        for i, node in enumerate(
            data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=6))
        )
    ]
    job = gpu031.Job("Pod", "ml", "j", "", members)
    own = at.own(job)
    every = at.every(own)
    held = {m.node: set().union(*(x.indices for x in members if x.node == m.node)) for m in members}
    assert every == {
        **{n: min(len(i), alloc[n]) for n, i in free_at.items() if n in allowed},
        **{n: min(len(free_at.get(n, set()) | i), alloc[n]) for n, i in held.items()},
    }
    sizes = [m.gpus for m in members]
    products = {product_of[n] for n in own}
    for domain in ["", *sorted(set(clique_of.values()))]:
        literal = _literal_fitting(every, min(sizes), products, product_of, clique_of, domain)
        fast = at.fitting(own, len(sizes), min(sizes), products, domain)
        roomiest = sorted(((r, n) for n, r in literal.items()), reverse=True)[: len(sizes)]
        assert fast == {n: r for r, n in roomiest}
        assert pack(sizes, fast) == pack(sizes, literal)
        if domain and pack(sizes, literal) is not None:
            assert domain in at.domains(own, min(sizes), products)
    # The PCIe rule judges jobs on PCIe-only nodes: none of them is all NVLink.
    for n in own:
        nvlink[n].all_nvlink = False
    gpu_hours = 10.0
    move = gpu031._nvlink_move(views, gpu031.Thresholds(), job, at, gpu_hours)
    best: tuple[float, str] | None = None
    for node in sorted(every):
        if node in own or not nvlink[node].all_nvlink or pack(sizes, {node: every[node]}) is None:
            continue
        saving = gpu_hours * 2.0 - gpu_hours * 0.9 * views.price(product_of[node] or "A")
        if saving > 0 and (best is None or saving > best[0]):
            best = (saving, node)
    assert (move.node if move else None) == (best[1] if best else None)
