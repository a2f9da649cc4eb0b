"""The capacity plan: the packer, the statistics and the plan's figures against hand-computed
cases, and the demo's figures recomputed from the snapshot's raw answers with plain Python."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.capacity import Item, Stat, pack_ffd, plan
from gpuaudit.cli import app
from gpuaudit.inventory import Inventory, Views
from gpuaudit.pricing import DEFAULT_PRICES
from tests.conftest import DEMO, raw_snapshot
from tests.factories import START, STEP, Series, gpu_labels, inventory, make_node, make_pod
from tests.raw_attribution import joined_mig, replicas_of

runner = CliRunner()
HOURS = 4
A100 = "NVIDIA A100-SXM4-80GB"
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


def test_nearest_rank_p95() -> None:
    assert Stat.of([float(x) for x in range(1, 21)]) == Stat(20.0, 19.0, 10.5)
    assert Stat.of([3.0]) == Stat(3.0, 3.0, 3.0)
    assert Stat.of([5.0, 1.0, 9.0]) == Stat(9.0, 9.0, 5.0)  # ceil(2.85) = 3rd smallest
    assert Stat.of([]) == Stat(0.0, 0.0, 0.0)


def _series(uuid: str, gpu: str, host: str, pod: str, act: list[float | None], **kw: Any) -> Series:
    return Series(gpu_labels(uuid, gpu, host, pod=pod, namespace="ns", **kw), act=act)


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
        "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "4"}},
    }
    nodes = [make_node("h1"), make_node("h2"), make_node("h3"), shared, mig_node]
    pods = [
        make_pod(p, namespace="ns", node="") for p in ("p1", "p2", "p3", "q1", "q2", "a", "b", "c")
    ]
    return inventory(series, HOURS, pods=pods, nodes=nodes)


@pytest.fixture(scope="module")
def cluster_plan() -> Any:
    return plan(Views(_cluster(), DEFAULT_PRICES), 0.05, "USD", [("ns", "p2")])


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
    assert cluster_plan.released == ("ns/p2",)
    assert cluster_plan.released_by_product == {"NVIDIA-H100-80GB-HBM3": 1}
    assert cluster_plan.freed["NVIDIA-L40S"].nodes == 0
    lines = cluster_plan.headlines()
    assert (
        "The window's work fit on 2 of 3 H100 80GB HBM3 nodes at its peak hour (9 GPUs held, 7 "
        "busy at most; 2 nodes ran GPU pods); releasing the 1 idle reservation gpuaudit found on "
        "it would have let 1 more go: 220 USD over the window." in lines
    )


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
    p = plan(Views(_cluster(), DEFAULT_PRICES), 0.05, "USD", None, "GPU001 was skipped: no data")
    assert p.released is None and p.after_release_idle == p.by_product
    assert "no idle reservation was released (GPU001 was skipped: no data)" in p.headlines()[0]
    doc = p.to_dict()
    assert doc["after_release_idle"]["released_reservations"] is None


# ---- the demo, recomputed from raw answers --------------------------------------------------


@pytest.fixture(scope="module")
def demo_report() -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "--demo", "--format", "json", "--quiet"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _raw_units(
    doc: dict[str, Any], gone: set[tuple[str, str]]
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
    nodes = [n for page in doc["kubernetes"]["nodes"] for n in page["items"]]
    replicas = replicas_of(nodes)
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    named = {m["exported_pod"] for m in (i["metric"] for i in series) if m.get("exported_pod")}
    joined = joined_mig(doc, series, named)
    for item in series:
        m = item["metric"]
        pod, ns, host = m.get("exported_pod"), m.get("exported_namespace"), m["Hostname"]
        if (ns, pod) in gone or not pod and (host, m["UUID"], m.get("GPU_I_ID", "")) not in joined:
            continue
        mig = "GPU_I_PROFILE" in m
        # A replica of a time-sliced GPU counts its share.
        frac = int(m["GPU_I_PROFILE"].split("g.")[0]) / 7 if mig else 1 / replicas.get(host, 1)
        unit = ("mig", host, m["UUID"]) if mig else ("pod", ns, pod, host)
        for ts, val in item["values"]:
            cell = out[product[host]][float(ts)].setdefault(unit, [0.0, 0.0, 0.0])
            cell[0] += frac
            cell[1] += frac * float(val)
            cell[2] = 1.0 if mig else cell[2] + frac
    return out


def _stat(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {"peak": s[-1], "p95": s[math.ceil(0.95 * len(s)) - 1], "mean": sum(s) / len(s)}


def _check_products(got: dict[str, Any], units: dict[str, Any], hours: int) -> None:
    for product, by_hour in units.items():
        held = [sum(u[2] for u in cells.values()) for _, cells in sorted(by_hour.items())]
        busy = [
            sum(u[2] for u in cells.values() if u[1] / u[0] >= 0.05)
            for _, cells in sorted(by_hour.items())
        ]
        # Hours in which the product held nothing count as zero.
        held += [0.0] * (hours - len(held))
        busy += [0.0] * (hours - len(busy))
        g = got[product]
        for key, vals in (("gpus_held", held), ("gpus_busy", busy)):
            for k, v in _stat(vals).items():
                assert g[key][k] == pytest.approx(v, abs=1e-4), (product, key, k)
        nodes = {u[-1] if u[0] == "pod" else u[1] for cells in by_hour.values() for u in cells}
        assert g["nodes_ran_gpu_pods"] == len(nodes), product


def test_demo_capacity_recomputed_from_raw_answers(demo_report: dict[str, Any]) -> None:
    doc = raw_snapshot(DEMO)
    hours = int(demo_report["window"]["hours"])
    cap = demo_report["capacity"]
    _check_products(cap["by_product"], _raw_units(doc, set()), hours)
    released = cap["after_release_idle"]["released"]
    idle = {
        (f["resource"]["namespace"], f["resource"]["name"])
        for f in demo_report["findings"]
        if f["code"] == "GPU001"
    }
    assert {tuple(r.split("/", 1)) for r in released} == idle and idle
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
