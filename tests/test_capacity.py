"""The capacity plan: the packer, the statistics and the plan's figures against hand-computed
cases, and the demo's figures recomputed from the snapshot's raw answers with plain Python."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuaudit.audit.capacity import RELEASE_IDLE, Item, Release, Stat, pack_ffd, plan
from gpuaudit.audit.ledger import ledger
from gpuaudit.cli import app
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views
from gpuaudit.inventory import columns as C
from gpuaudit.report.models.from_result import capacity_plan
from tests.inventory.test_dra import claim, dra_pod, gpu_device, resource_slice
from tests.inventory.test_kai import RES_NS, fraction, reservation
from tests.support.factories import (
    START,
    STEP,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_node,
    make_pod,
)
from tests.support.paths import DEMO
from tests.support.raw_attribution import (
    hami_tenants,
    joined_mig,
    joined_mig_buckets,
    kai_fraction_runs,
    kai_released,
    overlap,
    ran_of,
    replicas_of,
)
from tests.support.raw_fleet import claimed_since, released_of
from tests.support.raw_packing import pack_literally
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()
HOURS = 4
A100 = "NVIDIA A100-SXM4-80GB"
A100_PRODUCT = "NVIDIA-A100-SXM4-80GB"
L40S = "NVIDIA L40S"


def test_first_fit_decreasing_by_hand() -> None:
    room = {"n1": 8.0, "n2": 8.0, "n3": 4.0}
    items = [Item(k, s) for k, s in (("a", 2), ("b", 6), ("c", 4), ("d", 1), ("e", 5))]
    p = pack_ffd(items, room)
    # b (6) opens the roomiest node (n2, by name among equals); e (5) does not fit its 2 left
    # and opens n1; c (4) fits neither and opens n3; a (2) fills n2; d (1) goes to n1.
    assert p.used == ("n2", "n1", "n3")
    assert p.placed == {"b": "n2", "e": "n1", "c": "n3", "a": "n2", "d": "n1"}
    assert p.unplaced == ()


def test_packer_constraints_and_what_fits_nowhere() -> None:
    room = {"n1": 8.0, "n2": 8.0}
    items = [
        Item("big", 9.0),
        Item("pinned", 2.0, nodes=frozenset({"n1"})),
        Item("gang", 4.0, whole_node=True),
        Item("small", 1.0),
    ]
    p = pack_ffd(items, room)
    assert [i.key for i in p.unplaced] == ["big"]
    # The whole-node member opens n2 and closes it; the pinned pod and the small one share n1.
    assert p.placed == {"gang": "n2", "pinned": "n1", "small": "n1"}
    assert p.used == ("n2", "n1")


def test_a_pinned_item_gets_its_node_back_from_a_flexible_one() -> None:
    # A (3) opens n1, the roomiest; C (2) does not fit its 1 left and opens n2; B (1) fills
    # n1; r (1) may use only n1, now full: first fit decreasing leaves it unplaced. The
    # repair looks at n1's items in the order they went there: A would need 3 on another
    # opened node (n2 has 1 left), B fits n2's 1: B moves to n2 and r takes its place.
    room = {"n1": 4.0, "n2": 3.0}
    items = [
        Item("A", 3.0),
        Item("C", 2.0),
        Item("B", 1.0),
        Item("r", 1.0, nodes=frozenset({"n1"})),
    ]
    p = pack_ffd(items, room)
    assert p.unplaced == ()
    assert p.placed == {"A": "n1", "C": "n2", "B": "n2", "r": "n1"}
    assert p.used == ("n1", "n2")
    assert p == pack_literally(items, room)
    # Without C no other node is open: B's and A's moves need an unused node. A (the first
    # on n1) goes to n2, the roomiest unused node with room for it, opened for it; r takes n1.
    items = [i for i in items if i.key != "C"]
    p = pack_ffd(items, room)
    assert p.unplaced == ()
    assert p.placed == {"A": "n2", "B": "n1", "r": "n1"}
    assert p.used == ("n1", "n2")
    assert p == pack_literally(items, room)


def test_an_item_no_move_can_place_stays_unplaced() -> None:
    # A (2) opens n1; r (1) may use only n1, full. A could leave room for r, but no other
    # opened node exists and the unused n2 has 1 GPU, not A's 2: r stays unplaced, and n2 is
    # not opened for nothing. A whole-node item is never repaired.
    room = {"n1": 2.0, "n2": 1.0}
    items = [Item("A", 2.0), Item("r", 1.0, nodes=frozenset({"n1"}))]
    p = pack_ffd(items, room)
    assert [i.key for i in p.unplaced] == ["r"]
    assert p.placed == {"A": "n1"}
    assert p.used == ("n1",)
    assert p == pack_literally(items, room)
    gang = [Item("g", 1.0, nodes=frozenset({"n1"}), whole_node=True), Item("B", 2.0)]
    p = pack_ffd(gang, room)
    assert (p.placed, [i.key for i in p.unplaced]) == ({"B": "n1"}, ["g"])


_ROOMS = st.sampled_from(
    [0.0, 0.5, 1.0, 1 - 1e-9, 2.0, 2.5, 4.0, 7.0, 8.0, 8.0, math.nan, math.inf]
)
_SIZES = st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0, 0.5, 1 / 3, 3.0, 9.0, 1 - 1e-10, math.inf])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_packer_places_as_the_literal_rule(data: st.DataObject) -> None:
    """The packer searches per distinct node set in trees; it must place every item where
    the rule read literally places it: selectors (node sets, some naming nodes without
    room), whole-node gang members, rooms that are not numbers."""
    names = [f"n{i:02d}" for i in range(data.draw(st.integers(0, 16)))]
    room = {n: data.draw(_ROOMS) for n in names}
    pool = [*names, "gone"]
    sets = data.draw(st.lists(st.frozensets(st.sampled_from(pool)), min_size=1, max_size=4))
    items = [
        Item(
            f"i{i:03d}",
            data.draw(_SIZES),
            nodes=data.draw(st.sampled_from([None, *sets])),
            whole_node=data.draw(st.booleans()) and data.draw(st.booleans()),
        )
        for i in range(data.draw(st.integers(0, 60)))
    ]
    fast, literal = pack_ffd(items, room), pack_literally(items, room)
    assert fast == literal


def test_nearest_rank_p95() -> None:
    assert Stat.of([float(x) for x in range(1, 21)]) == Stat(20.0, 19.0, 10.5)
    assert Stat.of([3.0]) == Stat(3.0, 3.0, 3.0)
    assert Stat.of([5.0, 1.0, 9.0]) == Stat(9.0, 9.0, 5.0)  # ceil(2.85) = 3rd smallest
    assert Stat.of([]) == Stat(0.0, 0.0, 0.0)


def _series(uuid: str, gpu: str, host: str, pod: str, act: list[float | None], **kw: Any) -> Series:
    return Series(gpu_labels(uuid, gpu, host, pod=pod, namespace="ns", **kw), act=act)


def _requesting(pod: dict[str, Any], resource: str, n: int = 1) -> dict[str, Any]:
    """`pod` asking for `n` of `resource` instead of whole GPUs."""
    pod["spec"]["containers"][0]["resources"] = {"limits": {resource: str(n)}}
    return pod


def _cluster() -> Inventory:
    """H100 nodes h1, h2, h3 (8 GPUs); L40S node s1 (4 GPUs, time-sliced 2 ways); A100 node m1
    (2 GPUs in MIG). p1: 6 GPUs of h1, busy; p2: 2 GPUs of h2 in hours 0-1, idle; p3: 1 GPU of
    h2, busy; q1, q2: one replica each of two L40S GPUs, hours 0-2 only; on m1, GPU 0 holds a
    1g slice (a, idle) and a 3g slice (b, busy), GPU 1 a 1g slice (c, idle)."""
    busy, idle = [0.5] * HOURS, [0.01] * HOURS
    series = [
        *(_series(f"GPU-h1-{i}", str(i), "h1", "p1", list(busy)) for i in range(6)),
        *(_series(f"GPU-h2-{i}", str(i), "h2", "p2", [0.01, 0.01, None, None]) for i in range(2)),
        _series("GPU-h2-2", "2", "h2", "p3", [0.3] * HOURS),
        _series("GPU-s1-0", "0", "s1", "q1", [0.5, 0.5, 0.5, None], model=L40S),
        _series("GPU-s1-1", "1", "s1", "q2", [0.5, 0.5, 0.5, None], model=L40S),
        _series("GPU-m1-0", "0", "m1", "a", list(idle), model=A100, mig=("1g.10gb", "9")),
        _series("GPU-m1-0", "0", "m1", "b", [0.5] * HOURS, model=A100, mig=("3g.40gb", "2")),
        _series("GPU-m1-1", "1", "m1", "c", list(idle), model=A100, mig=("1g.10gb", "9")),
    ]
    shared = make_node("s1", "NVIDIA-L40S", 8)
    shared["metadata"]["labels"].update(
        {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "2"}
    )
    mig_node = {
        "metadata": {
            "name": "m1",
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.count": "2",
            },
        },
        "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "4", "nvidia.com/mig-3g.40gb": "2"}},
    }
    nodes = [make_node("h1"), make_node("h2"), make_node("h3"), shared, mig_node]
    pods = [make_pod(p, namespace="ns", node="", gpus=n) for p, n in (("p1", 6), ("p2", 2))]
    pods += [make_pod(p, namespace="ns", node="") for p in ("p3", "q1", "q2")]
    pods += [
        _requesting(make_pod(p, namespace="ns", node=""), f"nvidia.com/mig-{profile}")
        for p, profile in (("a", "1g.10gb"), ("b", "3g.40gb"), ("c", "1g.10gb"))
    ]
    return inventory(series, HOURS, pods=pods, nodes=nodes)


@pytest.fixture(scope="module")
def cluster_plan() -> Any:
    released = [Release("ns", "p2", "GPU001")]
    return plan(Views(_cluster(), DEFAULT_PRICES), 0.05, "USD", released, what_if=[RELEASE_IDLE])


def test_a_product_with_nothing_released_keeps_its_plan(
    cluster_plan: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan after the release is made again only for the products whose rows it drops;
    every other product's is the one it had, the same as made again from the kept rows."""
    from gpuaudit.audit import capacity

    assert cluster_plan.after_release_idle["NVIDIA-L40S"] is cluster_plan.by_product["NVIDIA-L40S"]
    every = capacity._plans
    monkeypatch.setattr(
        capacity, "_plans", lambda *a, **k: every(*a[:5]) if len(a) > 5 else every(*a, **k)
    )
    released = [Release("ns", "p2", "GPU001")]
    again = plan(Views(_cluster(), DEFAULT_PRICES), 0.05, "USD", released, what_if=[RELEASE_IDLE])
    assert again.after_release_idle == cluster_plan.after_release_idle
    assert again.after_release_idle["NVIDIA-L40S"] is not again.by_product["NVIDIA-L40S"]


def test_whole_gpus_by_hand(cluster_plan: Any) -> None:
    h = cluster_plan.by_product["NVIDIA-H100-80GB-HBM3"]
    # Held per hour: 9, 9, 7, 7 (p2 only in hours 0-1); busy: p1 and p3, 7 every hour.
    assert h.held_by_hour == (9.0, 9.0, 7.0, 7.0)
    assert h.gpus_held == Stat(9.0, 9.0, 8.0)
    assert h.gpus_busy == Stat(7.0, 7.0, 7.0)
    assert (h.nodes, h.gpus, h.nodes_ran_gpu_pods) == (3, 24.0, 2)
    # Peak hour 0: p1 (6), p2 (2), p3 (1) on 8-GPU nodes need 2.
    assert h.min_nodes_at_peak == 2 and h.peak_hour == START + STEP
    assert h.hours_with_data == 4


def test_release_of_idle_reservations_by_hand(cluster_plan: Any) -> None:
    after = cluster_plan.after_release_idle["NVIDIA-H100-80GB-HBM3"]
    assert after.held_by_hour == (7.0, 7.0, 7.0, 7.0)
    # p1 and p3 still ran on h1 and h2; packed, their 7 GPUs fit on one node.
    assert after.min_nodes_at_peak == 1 and after.nodes_ran_gpu_pods == 2
    freed = cluster_plan.freed["NVIDIA-H100-80GB-HBM3"]
    assert (freed.nodes, freed.gpus) == (1, 8.0)
    assert freed.cost == pytest.approx(8 * HOURS * 6.88)
    assert cluster_plan.released_pods == ("ns/p2",)
    assert cluster_plan.released_by_product == {"NVIDIA-H100-80GB-HBM3": 1}
    assert cluster_plan.freed["NVIDIA-L40S"].nodes == 0
    lines = cluster_plan.headlines()
    assert (
        "The window's work fit on 2 of 3 H100 80GB HBM3 nodes at its peak hour (9 GPUs held, 7 "
        "busy at most; 2 nodes ran GPU pods); releasing the 1 idle reservation gpuaudit found on "
        "it would have let 1 more go: 220 USD over the window." in lines
    )


def test_an_idle_tail_is_released_from_its_start() -> None:
    # GPU002 says p2's tail starts with hour 1: p2 keeps hour 0 (2 GPUs) and holds nothing
    # after; the peak (hour 0) still needs 2 nodes.
    tail = [Release("ns", "p2", "GPU002", START + STEP)]
    p = plan(Views(_cluster(), DEFAULT_PRICES), 0.05, "USD", tail, what_if=[RELEASE_IDLE])
    after = p.after_release_idle["NVIDIA-H100-80GB-HBM3"]
    assert after.held_by_hour == (9.0, 7.0, 7.0, 7.0)
    assert after.min_nodes_at_peak == 2 and p.freed["NVIDIA-H100-80GB-HBM3"].nodes == 0
    assert p.released_by_product == {"NVIDIA-H100-80GB-HBM3": 1}
    (held,) = capacity_plan(p).model_dump(mode="json")["after_release_idle"]["released_holdings"]
    assert held == {"pod": "ns/p2", "code": "GPU002", "from": iso(START + STEP)}
    assert "would have freed no node of it at the peak" in p.headlines()[1]


def test_shared_replicas_and_missing_hours(cluster_plan: Any) -> None:
    s = cluster_plan.by_product["NVIDIA-L40S"]
    # Two pods each on one replica of a 2-way time-sliced GPU: 1/2 + 1/2; hour 3 has no data.
    assert s.held_by_hour == (1.0, 1.0, 1.0, None)
    assert s.hours_with_data == 3
    assert s.gpus_held == Stat(1.0, 1.0, 1.0)
    # Room: allocatable 8 replicas over 2 = 4 GPUs.
    assert (s.gpus, s.min_nodes_at_peak) == (4.0, 1)


def test_mig_partitioned_gpu_counts_as_one(cluster_plan: Any) -> None:
    m = cluster_plan.by_product["NVIDIA-A100-SXM4-80GB"]
    # GPU 0 (slices a and b) and GPU 1 (slice c): 2 GPUs held. GPU 0's mean over its held
    # slices weighted by size is (1/7 x 0.01 + 3/7 x 0.5) / (4/7) = 0.3775: busy; GPU 1 idle.
    assert m.gpus_held == Stat(2.0, 2.0, 2.0)
    assert m.gpus_busy == Stat(1.0, 1.0, 1.0)
    assert (m.gpus, m.min_nodes_at_peak) == (2.0, 1)  # room from nvidia.com/gpu.count


def test_without_gpu001_nothing_is_released() -> None:
    p = plan(
        Views(_cluster(), DEFAULT_PRICES),
        0.05,
        "USD",
        None,
        "GPU001 was skipped: no data",
        what_if=[RELEASE_IDLE],
    )
    assert p.released is None and p.after_release_idle == p.by_product
    assert "no idle reservation was released (GPU001 was skipped: no data)" in p.headlines()[0]
    doc = capacity_plan(p).model_dump(mode="json")
    assert doc["after_release_idle"]["released_reservations"] is None


# ---- every GPU the API server shows held ---------------------------------------------------


def _dra_node(name: str, product: str, gpus: int) -> dict[str, Any]:
    """A node whose GPUs NVIDIA's DRA driver hands out: labelled, no `nvidia.com/gpu`."""
    node = make_node(name, product, gpus)
    node["status"] = {"capacity": {}, "allocatable": {}}
    return node


def _visible_cluster() -> Inventory:
    """H100 node h1 (DCGM): p1 holds 6 GPUs, busy, all 4 hours. H100 node u1 (labelled, no
    exporter): w1 holds 4 GPUs from the start of hour 2. L40S node d1 (DCGM; GPUs handed out
    through DRA, 4 by its nvidia.com/gpu.count label): c1 holds GPU 0 through a ResourceClaim,
    idle, all window."""
    series = [
        *(_series(f"GPU-h1-{i}", str(i), "h1", "p1", [0.5] * HOURS) for i in range(6)),
        *(
            Series(gpu_labels(f"GPU-d1-{i}", str(i), "d1", model=L40S), act=[0.01] * HOURS)
            for i in range(2)
        ),
    ]
    pods = [
        make_pod("p1", namespace="ns", node="h1", gpus=6),
        make_pod("w1", namespace="ns", node="u1", gpus=4, started=START + 2 * STEP),
        dra_pod("c1", ns="ns", started=START - STEP),
    ]
    pods[-1]["spec"]["nodeName"] = "d1"
    lists = {
        "resourceclaims": [claim(["c1"], ["gpu-0"], name="c1-gpu-x7k2p", ns="ns", pool="d1")],
        "resourceslices": [
            resource_slice([gpu_device(f"gpu-{i}", f"GPU-d1-{i}") for i in range(2)], "d1")
        ],
    }
    nodes = [make_node("h1"), make_node("u1"), _dra_node("d1", "NVIDIA-L40S", 4)]
    return inventory(series, HOURS, pods=pods, nodes=nodes, lists=lists)


@pytest.fixture(scope="module")
def visible_plan() -> Any:
    return plan(Views(_visible_cluster(), DEFAULT_PRICES), 0.05, "USD", [])


def test_gpus_on_a_node_without_an_exporter_count_as_held(visible_plan: Any) -> None:
    h = visible_plan.by_product[H100]
    # p1's 6 every hour; w1's 4 from hour 2 (no DCGM series: activity unknown).
    assert h.held_by_hour == (6.0, 6.0, 10.0, 10.0)
    assert h.busy_by_hour == (6.0, 6.0, 6.0, 6.0)
    assert h.unknown_by_hour == h.without_dcgm_by_hour == (0.0, 0.0, 4.0, 4.0)
    assert h.gpus_held == Stat(10.0, 10.0, 8.0)
    assert h.gpus_activity_unknown == h.gpus_without_dcgm == Stat(4.0, 4.0, 2.0)
    assert (h.nodes, h.gpus, h.nodes_ran_gpu_pods, h.nodes_without_dcgm) == (2, 16.0, 2, 1)
    # Peak hour 2: p1 (6) and w1 (4) need both 8-GPU nodes.
    assert h.peak_hour == START + 3 * STEP and h.hours_with_data == 4
    assert (h.min_nodes_at_peak, h.unplaced_gpus) == (2, 0.0)
    assert (
        "The window's work fit on 2 of 2 H100 80GB HBM3 nodes at its peak hour (10 GPUs held, "
        "6 busy at most and up to 4 of unknown activity; 2 nodes ran GPU pods)."
    ) in visible_plan.headlines()
    assert visible_plan.notes == (
        "H100 80GB HBM3: the activity of up to 4 GPUs held in an hour is unknown (up to 4 held "
        "by pods the Kubernetes API shows and no DCGM series measures; 1 node without an "
        "exporter ran GPU pods): they count as held, neither busy nor idle.",
    )


def test_a_gpu_held_through_a_dra_claim_needs_its_node_at_the_peak(visible_plan: Any) -> None:
    s = visible_plan.by_product["NVIDIA-L40S"]
    assert s.held_by_hour == (1.0,) * HOURS and s.busy_by_hour == (0.0,) * HOURS
    assert s.gpus_activity_unknown == Stat(0.0, 0.0, 0.0)
    # d1 advertises no nvidia.com/gpu: its room is its 4 GPUs (nvidia.com/gpu.count), where c1
    # is packed.
    assert (s.nodes, s.gpus, s.nodes_ran_gpu_pods) == (1, 4.0, 1)
    assert (s.min_nodes_at_peak, s.unplaced_gpus, s.nodes_used) == (1, 0.0, ("d1",))


def test_the_products_add_up_to_the_fleet() -> None:
    """Every GPU-hour the ledger counts (DCGM's, the DRA claim's, the API's) is an hour of a
    GPU held in some product's figures, and every node that ran GPU pods is some product's."""
    views = Views(_visible_cluster(), DEFAULT_PRICES)
    p = plan(views, 0.05, "USD", [])
    book = ledger(views)
    assert book.unattributed_gpu_hours == pytest.approx(2 * 4)
    held = sum(v or 0.0 for q in p.by_product.values() for v in q.held_by_hour)
    assert held == pytest.approx(book.allocated_gpu_hours) == pytest.approx(6 * 4 + 1 * 4 + 8)
    without = sum(v or 0.0 for q in p.by_product.values() for v in q.without_dcgm_by_hour)
    assert without == pytest.approx(book.unattributed_gpu_hours)
    assert sum(q.nodes_ran_gpu_pods for q in p.by_product.values()) == len({"h1", "u1", "d1"})
    doc = capacity_plan(p).model_dump(mode="json")
    assert doc["notes"] == list(p.notes)
    got = doc["by_product"][H100]
    assert got["gpus_without_dcgm"] == {"peak": 4.0, "p95": 4.0, "mean": 2.0}
    assert got["nodes_without_dcgm"] == 1


def _unlisted_product() -> Inventory:
    """h1 as in `_visible_cluster`; x1 (no product label, no exporter): z1 holds 2 GPUs and e1
    one through a DRA claim; m9 (A100 in MIG, no exporter): a and b hold a 1g slice each from
    the start, c a 3g slice from the start and d a 3g slice from hour 2; n1 (A100 in MIG,
    DCGM): f holds a 1g slice measured by GPU_UTIL only."""
    series = [
        *(_series(f"GPU-h1-{i}", str(i), "h1", "p1", [0.5] * HOURS) for i in range(6)),
        Series(
            gpu_labels(
                "GPU-n1-0", "0", "n1", pod="f", namespace="ns", model=A100, mig=("1g.10gb", "9")
            ),
            act=[None] * HOURS,
            util=[0.0] * HOURS,
        ),
    ]
    bare = make_node("x1")
    del bare["metadata"]["labels"]["nvidia.com/gpu.product"]
    mig_nodes = []
    for name in ("m9", "n1"):
        node = make_node(name, "NVIDIA-A100-SXM4-80GB", 2)
        node["status"]["allocatable"] = {
            "nvidia.com/mig-1g.10gb": "7",
            "nvidia.com/mig-3g.40gb": "4",
        }
        mig_nodes.append(node)
    mig = {"a": "1g.10gb", "b": "1g.10gb", "c": "3g.40gb", "d": "3g.40gb", "f": "1g.10gb"}
    pods = [
        make_pod("p1", namespace="ns", node="h1", gpus=6),
        make_pod("z1", namespace="ns", node="x1", gpus=2),
    ]
    for name, profile in mig.items():
        started = START + 2 * STEP if name == "d" else None
        node = "n1" if name == "f" else "m9"
        pod = make_pod(name, namespace="ns", node=node, started=started)
        pods.append(_requesting(pod, f"nvidia.com/mig-{profile}"))
    e1 = dra_pod("e1", ns="ns", started=START - STEP)
    e1["spec"]["nodeName"] = "x1"
    pods.append(e1)
    lists = {
        "resourceclaims": [claim(["e1"], ["gpu-0"], name="e1-gpu-x7k2p", ns="ns", pool="x1")],
        "resourceslices": [resource_slice([gpu_device("gpu-0", "GPU-x1-0")], "x1")],
    }
    return inventory(
        series, HOURS, pods=pods, nodes=[make_node("h1"), bare, *mig_nodes], lists=lists
    )


def test_an_unlabelled_node_without_an_exporter_is_of_an_unknown_product() -> None:
    p = plan(Views(_unlisted_product(), DEFAULT_PRICES), 0.05, "USD", [])
    u = p.by_product["unknown"]
    # z1's 2 GPUs and e1's claimed one, all window; no DCGM data, so the API's hours count.
    assert u.held_by_hour == u.unknown_by_hour == (3.0,) * HOURS
    assert (u.hours_with_data, u.nodes, u.nodes_ran_gpu_pods, u.nodes_without_dcgm) == (4, 1, 1, 1)
    assert (u.min_nodes_at_peak, u.gpus) == (1, 8.0)


def test_mig_slices_count_the_gpus_they_sit_on() -> None:
    """A MIG-partitioned GPU is one GPU held, whatever share of it its held slices are; slices
    the API shows without DCGM series count as the fewest GPUs their shares fit on."""
    p = plan(Views(_unlisted_product(), DEFAULT_PRICES), 0.05, "USD", [])
    a = p.by_product[A100_PRODUCT]
    # n1: f's slice, one GPU (activity unknown: GPU_UTIL only). m9: 1/7 + 1/7 + 3/7 = 5/7 of a
    # GPU, so one GPU; from hour 2 d's 3/7 more make 8/7, so two.
    assert a.held_by_hour == (2.0, 2.0, 3.0, 3.0)
    assert a.without_dcgm_by_hour == (1.0, 1.0, 2.0, 2.0)
    assert a.unknown_by_hour == a.held_by_hour and a.busy_by_hour == (0.0,) * HOURS
    assert (a.nodes_ran_gpu_pods, a.nodes_without_dcgm) == (2, 1)
    # Peak hour 2: m9's two GPUs and n1's one on 2-GPU MIG nodes.
    assert (a.min_nodes_at_peak, a.unplaced_gpus) == (2, 0.0)
    note = next(n for n in p.notes if n.startswith("A100"))
    assert "GPUs whose DCGM series have no activity sample in the hour" in note


def _ended(pod: dict[str, Any], finished: float) -> dict[str, Any]:
    """`pod`, Succeeded: its container finished at `finished`."""
    pod["status"]["phase"] = "Succeeded"
    pod["status"]["containerStatuses"] = [
        {"name": "c", "state": {"terminated": {"reason": "Completed", "finishedAt": iso(finished)}}}
    ]
    return pod


def _placed_cluster() -> Inventory:
    """8 hours. H100 node h1 (DCGM): p1 holds 1 GPU, busy, all window. H100 node u1 (no
    exporter): e held 2 GPUs from before the window to 2.5 hours into it, and ended. A100 node
    m1 (2 GPUs in MIG, DCGM): one 3g.40gb instance whose series names no pod; pod a held a
    3g.40gb slice from before the window to hour 5 and ended, pod b holds one from hour 3."""
    hours = 8
    series = [
        _series("GPU-h1-0", "0", "h1", "p1", [0.5] * hours),
        Series(gpu_labels("GPU-m1-0", "0", "m1", model=A100, mig=("3g.40gb", "2")), [0.3] * hours),
    ]
    m1 = make_node("m1", A100_PRODUCT, 2)
    m1["status"]["allocatable"] = {"nvidia.com/mig-3g.40gb": "4"}
    mig = "nvidia.com/mig-3g.40gb"
    pods = [
        make_pod("p1", namespace="ns", node="h1", gpus=1),
        _ended(make_pod("e", namespace="ns", node="u1", gpus=2, started=START - 60), START + 9000),
        _ended(
            _requesting(make_pod("a", namespace="ns", node="m1", started=START - 60), mig),
            START + 5 * STEP,
        ),
        _requesting(make_pod("b", namespace="ns", node="m1", started=START + 3 * STEP), mig),
    ]
    return inventory(series, hours, pods=pods, nodes=[make_node("h1"), make_node("u1"), m1])


def test_gpus_without_series_are_held_in_the_hours_their_pods_held_them() -> None:
    """The ledger's unattributed hours are placed in the hours they lie in: an ended pod's
    from its start to its end, and a pod the Kubernetes-side join gave part of its time only
    in the hours it did not (issue 32)."""
    views = Views(_placed_cluster(), DEFAULT_PRICES)
    un = views.unattributed
    got = {
        (p, r): (h, s)
        for p, r, h, s in zip(un[C.POD], un["reason"], un[C.HOURS], un[C.SPANS], strict=True)
    }
    # e ran 2.5 h, in hours 0, 1 and half of 2; a and b both ran in hours 3 and 4, so the
    # instance is no pod's there (a had it in 0-2, b in 5-7, joined).
    assert got == {
        ("e", "no_exporter"): (pytest.approx(2.5), ((0, 3, 1.0),)),
        ("a", "no_pod_label"): (pytest.approx(2.0), ((3, 5, 1.0),)),
        ("b", "no_pod_label"): (pytest.approx(2.0), ((3, 5, 1.0),)),
    }
    p = plan(views, 0.05, "USD", [])
    h = p.by_product[H100]
    # p1's 1 every hour; e's 2 in hours 0-2 (held in some part of each).
    assert h.held_by_hour == (3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    assert h.without_dcgm_by_hour == (2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert h.busy_by_hour == (1.0,) * 8
    assert h.peak_hour == START + STEP and h.gpus_held.peak == 3.0
    assert (h.min_nodes_at_peak, h.nodes_ran_gpu_pods, h.nodes_without_dcgm) == (1, 2, 1)
    a = p.by_product[A100_PRODUCT]
    # m1's GPU: a's slice (joined) in 0-2, b's in 5-7, and in 3-4 the slice one of them held
    # (3/7 + 3/7 of a GPU with no series naming them: one GPU).
    assert a.held_by_hour == (1.0,) * 8
    assert a.without_dcgm_by_hour == (0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0)
    assert a.unknown_by_hour == a.without_dcgm_by_hour
    assert a.busy_by_hour == (1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0)


# ---- the demo, recomputed from raw answers --------------------------------------------------


@pytest.fixture(scope="module")
def demo_report() -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "--demo", "--format", "json", "--quiet"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _raw_units(
    doc: dict[str, Any], gone: dict[tuple[str, str], float]
) -> dict[str, dict[float, dict[tuple[str, ...], list[float]]]]:
    """product -> hour end -> unit -> [weight, weight x activity, size], from `act_hourly`."""
    product = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("nvidia.com/gpu.product", "")
        for page in doc["kubernetes"]["nodes"]
        for n in page["items"]
    }
    out: dict[str, dict[float, dict[tuple[str, ...], list[float]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    step = doc["manifest"]["window"]["step"]
    dra = claimed_since(doc, step)
    nodes = [n for page in doc["kubernetes"]["nodes"] for n in page["items"]]
    replicas = replicas_of(nodes)
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    named = {m["exported_pod"] for m in (i["metric"] for i in series) if m.get("exported_pod")}
    joined = joined_mig(doc, series, named)
    kai = kai_fraction_runs(doc)
    measured = {
        (m.get("exported_namespace"), m["exported_pod"])
        for m in (i["metric"] for i in series)
        if m.get("exported_pod")
    }
    measured |= {(ns, pod) for _, ns, pod in dra.values()}
    for item in series:
        m = item["metric"]
        pod, ns, host = m.get("exported_pod"), m.get("exported_namespace"), m["Hostname"]
        since = 0.0
        if not pod and m["UUID"] in dra:  # held through a DRA claim since the pod started
            since, ns, pod = dra[m["UUID"]]
        if not pod and (host, m["UUID"], m.get("GPU_I_ID", "")) not in joined:
            continue
        mig = "GPU_I_PROFILE" in m
        # A replica of a time-sliced GPU counts its share.
        frac = int(m["GPU_I_PROFILE"].split("g.")[0]) / 7 if mig else 1 / replicas.get(host, 1)
        unit = ("mig", host, m["UUID"]) if mig else ("pod", ns, pod, host)
        buckets = joined.get((host, m["UUID"], m.get("GPU_I_ID", ""))) if not pod else None
        for ts, val in item["values"]:
            if float(ts) > gone.get((ns, pod), math.inf) or float(ts) < since:
                continue  # released from here on, or not yet claimed
            if (ns, pod) in kai and kai_released(kai[(ns, pod)], float(ts), step, gone):
                continue  # KAI deleted the reservation pod: its fraction pods are released
            if buckets is not None and float(ts) not in buckets:
                continue  # a bucket the Kubernetes-side join gave no pod
            cell = out[product[host]][float(ts)].setdefault(unit, [0.0, 0.0, 0.0])
            cell[0] += frac
            cell[1] += frac * float(val)
            cell[2] = 1.0 if mig else cell[2] + frac
    # GPUs shared by HAMi: each pod holds its share in the buckets it ran in.
    tenants = hami_tenants(doc)
    for t in (t for t in tenants if t["buckets"] is not None):
        unit = ("pod", t["ns"], t["pod"], t["node"])
        for ts, (_, a) in t["buckets"].items():
            if ts > gone.get((t["ns"], t["pod"]), math.inf):
                continue
            cell = out[product[t["node"]]][ts].setdefault(unit, [0.0, 0.0, 0.0])
            cell[0] += t["share"]
            cell[1] += t["share"] * a
            cell[2] += t["share"]
    # A HAMi pod holds its shares of GPUs without DCGM series, not its nvidia.com/gpu.
    dark: dict[tuple[str, str], float] = defaultdict(float)
    for t in tenants:
        dark[(t["ns"], t["pod"])] += t["share"] if t["buckets"] is None else 0.0
    ends = sorted({float(ts) for i in series for ts, _ in i["values"]})
    joined_at = joined_mig_buckets(doc, series, named)
    # The room the MIG GPUs DCGM shows held leave (1 less their held slices' shares).
    spare: dict[tuple[str, float], float] = defaultdict(float)
    for by_hour in out.values():
        for ts, cells in by_hour.items():
            for unit, (weight, _, _) in cells.items():
                if unit[0] == "mig":
                    spare[(unit[1], ts)] += max(0.0, 1.0 - weight)
    without = _raw_without_series(doc, (measured, dark), joined_at, ends, (gone, spare))
    for (prod, ts), units in without.items():
        for unit, size in units.items():
            out[prod][ts][unit] = [0.0, 0.0, size]
    return out


def _raw_without_series(
    doc: dict[str, Any],
    named: tuple[set[tuple[str, str]], dict[tuple[str, str], float]],
    joined_at: dict[tuple[str, str], dict[str, set[float]]],
    ends: list[float],
    released: tuple[dict[tuple[str, str], float], dict[tuple[str, float], float]],
) -> dict[tuple[str, float], dict[tuple[str, ...], float]]:
    """(product, bucket end) -> unit -> size, of the GPUs pods held per the raw pods where no
    series names the pod, in each bucket they ran in (a Running pod from its start, an ended
    one to its containers' latest finishedAt; released pods to their release, `gone`): a
    pod's whole GPUs (a time-sliced replica its share) as one unit, and on each node the
    fewest GPUs its MIG slices fit on (the 1g slices of A100 80GB: 1/7 each) in the buckets
    the Kubernetes-side join did not give the pod its profile's instances in (`joined_at`),
    once they fill the room the node's MIG GPUs DCGM shows held leave (`released`: the pods
    released, each from its time on, and that room per (node, bucket end)).
    `named`: the pods a series names, and HAMi's pods with their shares of GPUs without DCGM
    series (a unit of that size; none for a pod all of whose GPUs have series)."""
    nodes = [n for page in doc["kubernetes"]["nodes"] for n in page["items"]]
    replicas = replicas_of(nodes)
    product = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("nvidia.com/gpu.product", "")
        for n in nodes
    }
    step, end = float(doc["manifest"]["window"]["step"]), float(doc["manifest"]["window"]["end"])
    out: dict[tuple[str, float], dict[tuple[str, ...], float]] = defaultdict(dict)
    slices: dict[tuple[str, float], float] = defaultdict(float)
    measured, hami = named
    gone, spare = released
    for pod in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        node = pod["spec"].get("nodeName", "")
        ran = ran_of(pod, end)
        if ran is None or not node or key in measured:
            continue
        held = [ts for ts in ends if overlap(ran, ts, step) > 0 and ts <= gone.get(key, math.inf)]
        if key in hami:
            for ts in held if hami[key] > 0 else ():
                out[(product[node], ts)][("api", *key, node)] = hami[key]
            continue
        for c in pod["spec"]["containers"]:
            for res, n in c.get("resources", {}).get("limits", {}).items():
                if res == "nvidia.com/gpu":
                    unit = ("api", *key, node)
                    for ts in held:
                        out[(product[node], ts)][unit] = int(n) / replicas.get(node, 1)
                elif res.startswith("nvidia.com/mig-"):
                    profile = res.removeprefix("nvidia.com/mig-")
                    frac = int(profile.split("g.")[0]) / 7
                    joined = joined_at.get(key, {}).get(profile, set())
                    for ts in held:
                        if ts not in joined:
                            slices[(node, ts)] += int(n) * frac
    for (node, ts), share in sorted(slices.items()):
        for i in range(math.ceil(max(share - spare.get((node, ts), 0.0), 0.0) - 1e-9)):
            out[(product[node], ts)][("apimig", node, str(i), node)] = 1.0
    return out


def _stat(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {"peak": s[-1], "p95": s[math.ceil(0.95 * len(s)) - 1], "mean": sum(s) / len(s)}


def _check_products(got: dict[str, Any], units: dict[str, Any], hours: int) -> None:
    for product, by_hour in units.items():
        held = [sum(u[2] for u in cells.values()) for _, cells in sorted(by_hour.items())]
        busy = [
            sum(u[2] for u in cells.values() if u[0] and u[1] / u[0] >= 0.05)
            for _, cells in sorted(by_hour.items())
        ]
        # Held without DCGM series (no activity weight): their activity is unknown.
        unknown = [
            sum(u[2] for u in cells.values() if not u[0]) for _, cells in sorted(by_hour.items())
        ]
        # Hours in which the product held nothing count as zero.
        held += [0.0] * (hours - len(held))
        busy += [0.0] * (hours - len(busy))
        unknown += [0.0] * (hours - len(unknown))
        g = got[product]
        for key, vals in (
            ("gpus_held", held),
            ("gpus_busy", busy),
            ("gpus_activity_unknown", unknown),
        ):
            for k, v in _stat(vals).items():
                assert g[key][k] == pytest.approx(v, abs=1e-4), (product, key, k)
        nodes = {
            u[-1] if u[0] in ("pod", "api") else u[1] for cells in by_hour.values() for u in cells
        }
        assert g["nodes_ran_gpu_pods"] == len(nodes), product


def test_demo_capacity_recomputed_from_raw_answers(demo_report: dict[str, Any]) -> None:
    doc = raw_snapshot(DEMO)
    hours = int(demo_report["window"]["hours"])
    cap = demo_report["capacity"]
    _check_products(cap["by_product"], _raw_units(doc, {}), hours)
    released = cap["after_release_idle"]["released"]
    # Released: GPU001's pods for the whole window, GPU002's from the start of their tail.
    idle = released_of(demo_report)
    codes = {f["code"] for f in demo_report["findings"]}
    assert {"GPU001", "GPU002"} <= codes
    assert {tuple(r.split("/", 1)) for r in released} == set(idle) and idle
    _check_products(cap["after_release_idle"]["by_product"], _raw_units(doc, idle), hours)
    h100 = cap["after_release_idle"]["by_product"]["NVIDIA-H100-80GB-HBM3"]
    assert h100["released_reservations"] >= 1


def test_demo_queue_figures_in_the_report(demo_report: dict[str, Any]) -> None:
    rows = {(q["queue"], q["resource"]): q for q in demo_report["capacity"]["queues"]}
    a = rows[("team-a-cq", "nvidia.com/gpu")]
    # One GPU admitted all week (from before the window) under 4 GPUs of quota.
    assert a["quota"] == 4 and a["peak_admitted"] == 1
    assert a["quota_gpu_hours"] == pytest.approx(4 * 168)
    assert a["admitted_gpu_hours"] == pytest.approx(168)
    weekday = rows[("weekday-cq", "nvidia.com/gpu")]
    # Five weekdays, admitted at 07:54 and finished at 20:00 (12.1 h), 4 GPUs; its pods held
    # them from 08:00 to 20:00.
    assert weekday["admitted_gpu_hours"] == pytest.approx(5 * 12.1 * 4)
    assert weekday["held_gpu_hours"] == pytest.approx(5 * 12 * 4)
    assert weekday["peak_admitted"] == 4
    assert rows[("team-b-cq", "nvidia.com/gpu")]["pending_workloads"] == 1


# ---- the packer with the feasibility model, one rule at a time --------------------------------

H100 = "NVIDIA-H100-80GB-HBM3"


def _h100_pod(name: str, node: str, gpus: int, **spec: Any) -> dict[str, Any]:
    pod = make_pod(name, namespace="ns", node=node, gpus=gpus)
    pod["spec"].update(spec)
    return pod


def _holding(name: str, node: str, gpus: int, model: str = "NVIDIA H100 80GB HBM3") -> list[Series]:
    return [
        _series(f"GPU-{node}-{name}-{i}", str(i), node, name, [0.5] * HOURS, model=model)
        for i in range(gpus)
    ]


def _peak(series: list[Series], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Any:
    inv = inventory(series, HOURS, pods=pods, nodes=nodes)
    return plan(Views(inv, DEFAULT_PRICES), 0.05, "USD", [])


def _tainted(node: dict[str, Any]) -> dict[str, Any]:
    node["spec"]["taints"] = [{"key": "dedicated", "value": "serving", "effect": "NoSchedule"}]
    return node


def test_a_tainted_node_the_pods_cannot_use_and_a_cordoned_one() -> None:
    # t1 (8 GPUs) is tainted, c1 (8) cordoned; n2 and n3 have 4 each. p and q hold 4 each.
    nodes = [_tainted(make_node("t1")), make_node("n2", gpus=4), make_node("n3", gpus=4)]
    nodes.append(make_node("c1", cordoned=True))
    series = _holding("p", "n2", 4) + _holding("q", "n3", 4)
    got = _peak(series, nodes, [_h100_pod("p", "n2", 4), _h100_pod("q", "n3", 4)])
    h = got.by_product[H100]
    # Neither tolerates the taint: p opens the roomiest node it may use (n2 and n3 tie; by
    # name, n3), q finds it full and opens n2. Without the taint both would share t1.
    assert h.nodes_used == ("n3", "n2") and h.min_nodes_at_peak == 2
    assert (h.nodes, h.nodes_cordoned, h.gpus) == (4, 1, 24.0)
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    pods = [_h100_pod(p, n, 4, tolerations=tolerate) for p, n in (("p", "n2"), ("q", "n3"))]
    h = _peak(series, nodes, pods).by_product[H100]
    assert h.nodes_used == ("t1",) and h.min_nodes_at_peak == 1  # the cordoned c1 never


def test_a_selector_and_a_required_affinity_pin_pods_to_nodes() -> None:
    def node(name: str, machine: str) -> dict[str, Any]:
        n = make_node(name)
        n["metadata"]["labels"]["nvidia.com/gpu.machine"] = machine
        return n

    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.machine", "operator": "In", "values": ["p5"]}
                        ]
                    }
                ]
            }
        }
    }
    pin = {"nvidia.com/gpu.product": H100, "nvidia.com/gpu.machine": "a3"}
    pods = [
        _h100_pod("w", "a1", 4),
        _h100_pod("x", "a1", 4, nodeSelector=pin),
        _h100_pod("y", "b1", 4, affinity=affinity),
    ]
    series = _holding("w", "a1", 4) + _holding("x", "a1", 4) + _holding("y", "b1", 4)
    h = _peak(series, [node("a1", "a3"), node("b1", "p5")], pods).by_product[H100]
    # w (free) opens b1 (a1 and b1 tie on room and on how many pods may use them; by name);
    # x may only use a1 and opens it; y may only use b1 and joins w there.
    assert h.nodes_used == ("b1", "a1") and h.min_nodes_at_peak == 2
    assert h.gpus_held.peak == 12.0


def test_a_mig_gpu_goes_only_where_its_profiles_are() -> None:
    a100 = "NVIDIA A100-SXM4-80GB"

    def mig_node(name: str, count: int, profiles: dict[str, int]) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                    "nvidia.com/gpu.count": str(count),
                },
            },
            "status": {"allocatable": {f"nvidia.com/mig-{p}": str(n) for p, n in profiles.items()}},
        }

    nodes = [
        mig_node("m1", 2, {"1g.10gb": 7, "3g.40gb": 2}),
        mig_node("m2", 4, {"1g.10gb": 28}),
        mig_node("m3", 2, {"1g.10gb": 14}),
    ]
    slices = (("a", "m1", 0, "1g.10gb"), ("b", "m1", 0, "3g.40gb"))
    slices += (("c", "m3", 0, "1g.10gb"), ("d", "m3", 1, "1g.10gb"))
    series = [
        _series(f"GPU-{n}-{g}", str(g), n, p, [0.5] * HOURS, model=a100, mig=(prof, p))
        for p, n, g, prof in slices
    ]
    pods = [
        _requesting(make_pod(p, namespace="ns", node=n), f"nvidia.com/mig-{prof}")
        for p, n, _, prof in slices
    ]
    m = _peak(series, nodes, pods).by_product["NVIDIA-A100-SXM4-80GB"]
    # Three MIG GPUs held, one each. m1's GPU 0 holds a 3g slice: only m1 offers 3g.40gb, so it
    # opens m1 (room 2); m3's GPU 0 fills m1; m3's GPU 1 opens the roomiest other node, m2.
    # Moved as if MIG did not matter, all three would fit on m2 (room 4).
    assert m.gpus_held.peak == 3.0
    assert m.nodes_used == ("m1", "m2") and m.min_nodes_at_peak == 2
    assert m.gpus == 8.0  # nvidia.com/gpu.count of each MIG node


def test_shared_replicas_stay_on_nodes_shared_as_many_ways() -> None:
    def shared(name: str, replicas: int, alloc: int) -> dict[str, Any]:
        n = make_node(name, "NVIDIA-L40S-SHARED", alloc)
        n["metadata"]["labels"]["nvidia.com/gpu.replicas"] = str(replicas)
        return n

    nodes = [shared("s1", 4, 8), shared("s2", 2, 16), shared("s3", 4, 16)]
    series = [
        _series(f"GPU-s1-{i}", str(i), "s1", p, [0.5] * HOURS, model=L40S)
        for i, p in enumerate(("q1", "q2"))
    ]
    pods = [make_pod(p, namespace="ns", node="s1") for p in ("q1", "q2")]
    s = _peak(series, nodes, pods).by_product["NVIDIA-L40S-SHARED"]
    # Each pod holds one replica of a 4-way shared GPU: 1/4 each. Room: 8/4 = 2, 16/2 = 8 and
    # 16/4 = 4 GPUs. s2 is shared 2 ways, where a replica is half a GPU: not a candidate; the
    # roomiest node shared 4 ways is s3, and both replicas go there.
    assert s.gpus_held.peak == 0.5
    assert s.nodes_used == ("s3",) and s.min_nodes_at_peak == 1
    assert s.gpus == 14.0


def test_a_whole_node_gang_keeps_a_node_per_member() -> None:
    nodes = [make_node("g1", gpus=4), make_node("g2", gpus=4), make_node("big1"), make_node("big2")]
    series = _holding("w0", "g1", 4) + _holding("w1", "g2", 4)

    def member(name: str, node: str, gang: bool) -> dict[str, Any]:
        pod = _h100_pod(name, node, 4)
        if gang:
            pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "w"
            pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "2"
        return pod

    h = _peak(series, nodes, [member("w0", "g1", True), member("w1", "g2", True)]).by_product[H100]
    # Each member held all 4 GPUs of its node: each gets a node of its own (the 8-GPU nodes are
    # the roomiest, by name big2 first).
    assert h.nodes_used == ("big2", "big1") and h.min_nodes_at_peak == 2
    assert h.whole_node_units == 2
    # The same pods outside a gang share one 8-GPU node.
    loose = _peak(series, nodes, [member("w0", "g1", False), member("w1", "g2", False)])
    assert loose.by_product[H100].nodes_used == ("big2",)


def test_a_pod_without_a_spec_may_go_on_any_node_of_its_product() -> None:
    nodes = [_tainted(make_node("t1")), make_node("n2", gpus=4)]
    h = _peak(_holding("p", "n2", 4), nodes, []).by_product[H100]
    # Kubernetes returned no pod: nothing is known to keep it off the tainted node.
    assert h.nodes_used == ("t1",) and h.units_without_spec == 1


def test_in_a_scan_of_every_cluster_work_stays_in_its_cluster() -> None:
    # Two clusters, one 8-GPU node each as DCGM alone saw them, each running a 2-GPU pod: in
    # one cluster both pods would share a node; across clusters no pod can move.
    series = []
    for cluster, pod in (("a", "p"), ("b", "q")):
        node = f"{cluster}/n1"
        series += [
            _series(f"GPU-{cluster}{i}", str(i), node, pod if i < 2 else "", [0.5] * HOURS)
            for i in range(8)
        ]
    inv = inventory(series, HOURS)
    one = plan(Views(inv, DEFAULT_PRICES), 0.05, "USD", []).by_product
    every = dataclasses.replace(inv, cluster_label="cluster", clusters=("a", "b"))
    fleet = plan(Views(every, DEFAULT_PRICES), 0.05, "USD", []).by_product
    (product,) = fleet
    assert one[product].min_nodes_at_peak == 1
    assert fleet[product].min_nodes_at_peak == 2
    assert sorted(fleet[product].nodes_used) == ["a/n1", "b/n1"]


def test_demo_plan_is_the_same_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_groups` reads the held rows in slices: slices of a few rows (many slices, groups split
    across them) give the plan one slice of every row gives, to the last bit."""
    from gpuaudit import snapshot
    from gpuaudit.inventory import arrays, build

    inv = build(snapshot.read(DEMO))
    released = [
        Release("search", "rerank-cold-0-z99lp9bdxp-4mx8s", "GPU001"),
        Release(
            "serving", "llm-canary-0-8hfpwn4dc6-5kllr", "GPU002", since=inv.window_start + 7200
        ),
    ]

    def made() -> dict[str, Any]:
        out = plan(Views(inv, DEFAULT_PRICES), 0.05, "USD", released, what_if=[RELEASE_IDLE])
        return capacity_plan(out).model_dump(mode="json")

    whole = made()
    assert whole["by_product"]
    assert whole["after_release_idle"]["by_product"] != whole["by_product"]
    for rows in (1, 7, 1000):
        monkeypatch.setattr(arrays, "_SLICE", rows)
        assert made() == whole


# ---- KAI Scheduler's shared GPUs after the release ----------------------------------------


def test_a_released_kai_fraction_frees_its_gpu_only_with_the_last_fraction() -> None:
    """4 hours, node-a. GPU-0 (reservation pod r0, group g0): `a` asks 0.5 all along, `b`
    0.25 from a minute into hour 2.
    GPU-1 (r1, group g1): `c` asks 0.5 all along. GPU001 releases `a`, GPU002 releases `c`
    from hour 2. KAI keeps a GPU reserved whole while a fraction pod of its group is left and
    deletes the reservation pod with the last one (`docs/domain.md`, KAI): GPU-0 is released
    in hours 0-1 (a alone) and stays whole in hours 2-3 (b is left; in hour 2, where b held
    part of it, one GPU, not a's, b's and the reservation pod's shares added up); GPU-1 is
    released in hours 2-3."""

    def series(uuid: str, index: str, pod: str) -> Series:
        labels = gpu_labels(uuid, index, "node-a", pod=pod, namespace=RES_NS)
        return Series(labels, act=[0.01] * HOURS)

    pods = [
        reservation("r0", "g0"),
        reservation("r1", "g1"),
        fraction("a", "g0", gpu_fraction="0.5"),
        fraction("b", "g0", START + 2 * STEP + 60, gpu_fraction="0.25"),
        fraction("c", "g1", gpu_fraction="0.5"),
    ]
    for pod in pods:
        pod["spec"]["nodeName"] = "node-a"
    inv = inventory(
        [series("GPU-0", "0", "r0"), series("GPU-1", "1", "r1")],
        HOURS,
        pods=pods,
        nodes=[make_node("node-a")],
    )
    released = [Release("ml", "a", "GPU001"), Release("ml", "c", "GPU002", START + 2 * STEP)]
    p = plan(Views(inv, DEFAULT_PRICES), 0.05, "USD", released, what_if=[RELEASE_IDLE])
    assert p.by_product[H100].held_by_hour == (2.0,) * HOURS
    after = p.after_release_idle[H100]
    # GPU-0: 0, 0, 1, 1; GPU-1: 1, 1, 0, 0.
    assert after.held_by_hour == (1.0,) * HOURS
    assert after.gpus_held == Stat(1.0, 1.0, 1.0)
    assert p.released_by_product == {H100: 2}


def test_mig_slices_without_series_fill_the_room_of_gpus_dcgm_shows_held() -> None:
    """A100 node m1 (2 GPUs in MIG, DCGM): pod `a` holds a 3g.40gb slice of GPU 0 (its series
    names it), busy, all 4 hours. Pods no series names, on the same node: `u` holds a 1g.10gb
    slice all window, `v` and `w` a 3g.40gb slice each from hour 2. Which GPU their slices sit
    on is not known: they fill the room GPU 0 leaves (4/7) before counting GPUs of their own.
    Hours 0-1: u's 1/7 fits GPU 0, one GPU held (counted once, not again as u's). Hours 2-3:
    1/7 + 3/7 + 3/7 = 1, of which 4/7 fit GPU 0 and 3/7 need one more GPU: two."""
    series = [
        _series("GPU-m1-0", "0", "m1", "a", [0.5] * HOURS, model=A100, mig=("3g.40gb", "2")),
    ]
    m1 = make_node("m1", A100_PRODUCT, 2)
    m1["status"]["allocatable"] = {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "4"}
    pods = [
        _requesting(make_pod("a", namespace="ns", node="m1"), "nvidia.com/mig-3g.40gb"),
        _requesting(make_pod("u", namespace="ns", node="m1"), "nvidia.com/mig-1g.10gb"),
    ]
    for name in ("v", "w"):
        pod = make_pod(name, namespace="ns", node="m1", started=START + 2 * STEP)
        pods.append(_requesting(pod, "nvidia.com/mig-3g.40gb"))
    p = plan(
        Views(inventory(series, HOURS, pods=pods, nodes=[m1]), DEFAULT_PRICES), 0.05, "USD", []
    )
    a = p.by_product[A100_PRODUCT]
    assert a.held_by_hour == (1.0, 1.0, 2.0, 2.0)
    assert a.without_dcgm_by_hour == a.unknown_by_hour == (0.0, 0.0, 1.0, 1.0)
    assert a.busy_by_hour == (1.0,) * HOURS
    # Peak hour 2: GPU 0 (a's slice, with u's and v's) and one GPU of the rest, on m1.
    assert (a.peak_hour, a.min_nodes_at_peak, a.nodes_used) == (START + 3 * STEP, 1, ("m1",))
