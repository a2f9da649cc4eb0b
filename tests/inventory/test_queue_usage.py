"""Queue figures over the window, against hand-computed cases."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Capability, Inventory, Views
from gpuaudit.inventory.queue_usage import _peak_by_bucket
from tests.support.factories import START, STEP, Series, gpu_labels, inventory, make_node, make_pod
from tests.support.queue_objects import (
    cluster_queue,
    flavor,
    local_queue,
    podgroup,
    volcano_queue,
    workload,
)

HOURS = 10
A100 = "NVIDIA A100-SXM4-80GB"


def _node(name: str, **labels: str) -> dict[str, Any]:
    n = make_node(name)
    n["metadata"]["labels"].update(labels)
    return n


def _mig_node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
        "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "14"}},
    }


def _hours(on: range, act: float) -> list[float | None]:
    return [act if i in on else None for i in range(HOURS)]


def _cluster() -> Inventory:
    """Node a (flavor fx, label pool=x), node b (no pool label), A100 MIG node m.

    Kueue ClusterQueue cq (8 GPUs of fx, no cohort) with Workload w1 (2 GPUs, admitted from
    hour 2 to hour 6) and w2 (1 GPU, admitted before the window, still running); their pods
    j1-x (GPUs 0-1 of a, hours 2-5, busy in hours 2-3) and j2-x (GPU 2 of a, all hours, idle).
    Pod other (namespace ml, no queue, GPU 3 of a, hours 0-1) and pod stray (namespace ml, 4
    GPUs of b, all hours) are of the queue's namespace; only the first is on fx's nodes.
    ClusterQueue mq: 4 slices of 1g.10gb on flavor fm (A100 nodes); pod mp holds one.
    Volcano queue vq (guarantee 4, allocated 2): PodGroup rl/pg with pod vp on 2 GPUs of b."""
    act_j1 = [None, None, 0.5, 0.5, 0.01, 0.01, None, None, None, None]
    series = [
        Series(gpu_labels("GPU-a0", "0", "a", pod="j1-x", namespace="ml"), act=list(act_j1)),
        Series(gpu_labels("GPU-a1", "1", "a", pod="j1-x", namespace="ml"), act=list(act_j1)),
        Series(gpu_labels("GPU-a2", "2", "a", pod="j2-x", namespace="ml"), act=[0.02] * HOURS),
        Series(
            gpu_labels("GPU-a3", "3", "a", pod="other", namespace="ml"), act=_hours(range(2), 0.9)
        ),
        *(
            Series(
                gpu_labels(f"GPU-b{i}", str(i), "b", pod="stray", namespace="ml"), act=[0.9] * HOURS
            )
            for i in range(4)
        ),
        *(
            Series(
                gpu_labels(f"GPU-b{i}", str(i), "b", pod="vp", namespace="rl"), act=[0.3] * HOURS
            )
            for i in (4, 5)
        ),
        Series(
            gpu_labels(
                "GPU-m0", "0", "m", model=A100, pod="mp", namespace="mig", mig=("1g.10gb", "9")
            ),
            act=[0.4] * HOURS,
        ),
    ]
    pods = [
        make_pod("j1-x", namespace="ml", node="a", gpus=2, owner=("Job", "j1")),
        make_pod("j2-x", namespace="ml", node="a", gpus=1, owner=("Job", "j2")),
        make_pod("other", namespace="ml", node="a"),
        make_pod("stray", namespace="ml", node="b", gpus=4),
        make_pod(
            "vp",
            namespace="rl",
            node="b",
            gpus=2,
            annotations={"scheduling.k8s.io/group-name": "pg"},
        ),
        make_pod(
            "mp", namespace="mig", node="m", gpus=0, labels={"kueue.x-k8s.io/queue-name": "ml"}
        ),
    ]
    lists = {
        "kueue_resourceflavors": [
            flavor("fx", {"pool": "x"}),
            flavor("fm", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        ],
        "kueue_clusterqueues": [
            cluster_queue("cq", [("fx", "nvidia.com/gpu", "8")]),
            cluster_queue("mq", [("fm", "nvidia.com/mig-1g.10gb", "4")]),
        ],
        "kueue_localqueues": [local_queue("ml", "lq", "cq"), local_queue("mig", "ml", "mq")],
        "kueue_workloads": [
            workload(
                "ml", "w1", "cq", "fx", 2, START + 2 * STEP, START + 6 * STEP, owner=("Job", "j1")
            ),
            workload("ml", "w2", "cq", "fx", 1, START - 5 * STEP, owner=("Job", "j2")),
            workload("ml", "w3", "", "", 4, pending_since=START + 7 * STEP, local_queue="lq"),
        ],
        "volcano_queues": [volcano_queue("vq", guarantee=4, allocated=2)],
        "volcano_podgroups": [podgroup("rl", "pg", "vq", 2)],
    }
    nodes = [_node("a", pool="x"), _node("b"), _mig_node("m")]
    return inventory(series, HOURS, pods=pods, nodes=nodes, lists=lists)


@pytest.fixture(scope="module")
def lines() -> dict[str, Any]:
    inv = _cluster()
    assert Capability.QUEUES in inv.capabilities
    return {u.queue: u for u in Views(inv, DEFAULT_PRICES).queue_usage(0.05)}


def test_kueue_queue_figures_by_hand(lines: dict[str, Any]) -> None:
    u = lines["cq"]
    assert (u.quota, u.fenced, u.allocatable, u.flavor_nodes) == (8.0, 8.0, 8.0, 1)
    assert u.quota_gpu_hours == pytest.approx(80.0)  # 8 GPUs x 10 h
    # w1: 2 GPUs x 4 h (hours 2-5); w2: 1 GPU x the whole window.
    assert u.admitted_gpu_hours == pytest.approx(2 * 4 + 10)
    assert u.peak_admitted == 3.0
    assert u.admitted_now == 1.0
    # DCGM: j1-x 2 GPUs x 4 h, j2-x 1 GPU x 10 h; busy: j1-x's hours 2 and 3 only.
    assert u.held_gpu_hours == pytest.approx(18.0)
    assert u.busy_gpu_hours == pytest.approx(4.0)
    assert u.peak_held == 3.0
    # Namespace ml on fx's nodes: other's GPU counts (hours 0-1), stray on node b does not.
    assert u.use_by_bucket == (2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0)
    assert u.peak_namespaces == 3.0 and u.peak_use == 3.0
    assert u.use_since(START + 5 * STEP) == 3.0
    assert u.use_since(START + 6 * STEP) == 1.0
    assert u.namespaces == ("ml",)
    (p,) = u.pending
    assert (p.name, p.quantity, p.since) == ("w3", 4.0, START + 7 * STEP)
    assert u.product == "NVIDIA-H100-80GB-HBM3"


def test_mig_quota_counts_slices_and_gpu_hours_as_shares(lines: dict[str, Any]) -> None:
    u = lines["mq"]
    assert (u.resource, u.quota, u.allocatable) == ("nvidia.com/mig-1g.10gb", 4.0, 14.0)
    assert u.unit_gpus == pytest.approx(1 / 7)
    assert u.peak_held == 1.0  # one slice
    assert u.held_gpu_hours == pytest.approx(10 / 7)
    assert u.busy_gpu_hours == pytest.approx(10 / 7)
    assert u.quota_gpu_hours == pytest.approx(4 * 10 / 7)


def test_volcano_queue_use_is_what_its_pods_held(lines: dict[str, Any]) -> None:
    u = lines["vq"]
    assert (u.system, u.guarantee, u.quota, u.fenced) == ("Volcano", 4.0, 4.0, 4.0)
    assert u.admitted_gpu_hours == pytest.approx(20.0) == u.held_gpu_hours
    assert u.busy_gpu_hours == pytest.approx(20.0)
    assert u.peak_admitted == 2.0 and u.admitted_now == 2.0
    # Every schedulable node's nvidia.com/gpu: a and b (the MIG node allocates none).
    assert u.allocatable == 16.0


def test_demo_queue_usage_is_the_same_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The held rows are read a slice at a time: slices of a few rows give what one slice of
    every row gives."""
    from gpuaudit import snapshot
    from gpuaudit.inventory import Views, arrays, build
    from tests.support.paths import DEMO

    inv = build(snapshot.read(DEMO))
    whole = Views(inv, {}).queue_usage(0.05)
    assert whole and any(u.held_gpu_hours > 0 for u in whole)
    for piece in (1, 7, 1000):
        monkeypatch.setattr(arrays, "_SLICE", piece)
        assert Views(inv, {}).queue_usage(0.05) == whole


def test_demo_queue_usage_reads_only_the_rows_of_each_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows grouped by holding are read by range, only those of the line's holdings: the same
    figures, to the last bit, as testing every row."""
    from gpuaudit import snapshot
    from gpuaudit.inventory import Views, build, queue_usage
    from tests.support.paths import DEMO

    inv = build(snapshot.read(DEMO))
    ranged = Views(inv, {}).queue_usage(0.05)
    picked: list[int] = []
    of = queue_usage._Rows.of

    def counted(self: queue_usage._Rows, mask: Any) -> Any:
        got = of(self, mask)
        picked.append(-1 if got is None else len(got))
        return got

    monkeypatch.setattr(queue_usage._Rows, "of", counted)
    assert Views(inv, {}).queue_usage(0.05) == ranged
    assert any(n >= 0 for n in picked), "no line was read by range"
    monkeypatch.setattr(queue_usage._Rows, "of", lambda self, mask: None)
    assert Views(inv, {}).queue_usage(0.05) == ranged


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-3, 30), st.integers(1, 12), st.integers(1, 4)), max_size=8),
    st.integers(1, 24),
)
def test_most_admitted_at_one_instant_of_each_hour(
    spans: list[tuple[int, int, int]], nb: int
) -> None:
    """`_peak_by_bucket` skips hours without an event; it must agree with the rule read
    literally: per hour, the most the intervals hold together at any instant of it (an
    interval holds from its start to just before its end), in quarter hours."""
    start, step = 1000.0, 3600.0
    intervals = [(start + a * 900.0, start + (a + d) * 900.0, float(q)) for a, d, q in spans]
    want = []
    for k in range(nb):
        instants = [start + k * step + i * 900.0 for i in range(4)]
        instants += [lo for lo, _, _ in intervals if start + k * step < lo < start + (k + 1) * step]
        want.append(max(sum(q for lo, hi, q in intervals if lo <= t < hi) for t in instants))
    assert _peak_by_bucket(intervals, start, step, nb) == want
