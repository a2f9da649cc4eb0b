from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaudit.checks import gpu031_gang_spread as gpu031
from gpuaudit.checks.base import pack
from gpuaudit.checks.findings import Severity
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


def test_gang_across_nvlink_domains_while_one_domain_had_room() -> None:
    series = (
        _gpus("t0", GB200, [""] * 4)
        + _gpus("t1", GB200, ["moe-master-0"] * 4)
        + _gpus("t2", GB200, ["moe-worker-0"] * 4)
    )
    nodes = [
        make_node("t0", "NVIDIA-GB200", 4, clique="c.1"),
        make_node("t1", "NVIDIA-GB200", 4, clique="c.1"),
        make_node("t2", "NVIDIA-GB200", 4, clique="c.2"),
    ]
    pods = [_member("moe-master-0", "moe", "t1", 4), _member("moe-worker-0", "moe", "t2", 4)]
    inv = inventory(series, HOURS, pods=pods, nodes=nodes, lists={"pytorchjobs": [_job("moe", 1)]})
    (f,) = run_check(gpu031, inv)
    assert f.code == "GPU031" and f.severity is Severity.MEDIUM
    assert (f.resource.kind, f.resource.namespace, f.resource.name) == ("PyTorchJob", "ml", "moe")
    assert f.message == (
        "PyTorchJob ml/moe (2 pods, 8 GPUs, GB200) spans 2 NVLink domains (gpu.clique c.1, "
        "c.2) while domain c.1 had room for all of it."
    )
    assert f.impact.gpu_hours == pytest.approx(8 * HOURS * 0.10)
    assert f.impact.cost == pytest.approx(8 * HOURS * 0.10 * 10.50)
    assert f.evidence["tighter_clique"] == "c.1"
    assert sorted(f.evidence["tighter_nodes"]) == ["t0", "t1"]


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


def _pcie_case(gb_s: float | None, selector: dict[str, str] | None = None, kind: str = "Job"):  # type: ignore[no-untyped-def]
    series = _gpus("l", "NVIDIA L40S", ["sd-0", "sd-0", "", ""]) + _gpus(
        "h", H100, ["z"] * 6 + ["", ""]
    )
    if gb_s is not None:
        for s in series[:2]:
            s.health = _traffic(gb_s)
    pods = [make_pod("sd-0", node="l", gpus=2, owner=(kind, "sd"), node_selector=selector)]
    nodes = [make_node("l", "NVIDIA-L40S", 4), make_node("h")]
    return inventory(series, HOURS, pods=pods, nodes=nodes)


def test_pcie_job_moves_to_nvlink_only_where_that_saves_money() -> None:
    inv = _pcie_case(gb_s=8.0)
    # At the built-in prices an H100 GPU-hour (6.88) costs more than an L40S one (2.70) saves.
    assert run_check(gpu031, inv) == []
    cheap = {"H100": 2.0, "L40S": 2.70}
    (f,) = run_check(gpu031, inv, prices=cheap)
    assert f.resource.kind == "Pod" and f.resource.name == "sd-0"
    assert f.message == (
        "Pod ml/sd-0 (2 GPUs, L40S) runs on PCIe-only GPUs (l) while h, whose GPUs are all "
        "NVLink-connected, had 2 free (H100-80GB-HBM3 at 2.00 per GPU-hour against 2.70 for "
        "L40S: about 54 saved over the job's GPU-hours)."
    )
    held = 2 * HOURS
    assert f.evidence["estimated_saving"] == pytest.approx(held * 2.70 - held * 0.9 * 2.0)
    assert f.impact.cost == pytest.approx(held * 2.70 - held * 0.9 * 2.0)
    assert f.impact.gpu_hours == pytest.approx(held * 0.10)
    assert f.evidence["price_per_gpu_hour"] == {"here": 2.70, "there": 2.0}
    assert f.evidence["communication_basis"] == "measured"


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
    inv = _pcie_case(gb_s, selector, kind)
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
