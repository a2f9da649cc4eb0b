"""Attribution: shared GPUs split by their replicas, activity copies counted once, the one-pod
label of a time-sliced GPU, MIG's GPU_UTIL never read as activity, the Kubernetes-side join
only when unambiguous, and the ledger adding up to the allocated GPU-hours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.ledger import ledger
from gpuaudit.audit.settings import Settings
from gpuaudit.audit.summary import summarise
from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks import gpu002_idle_tail as gpu002
from gpuaudit.checks import gpu080_unmonitored_gpus as gpu080
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method, Reason
from gpuaudit.report import json_report
from gpuaudit.report.text import attribution_sentence
from tests.support.factories import (
    START,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_node,
    make_pod,
    run_check,
)

L40S = "NVIDIA L40S"
SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "report.schema.json").read_text())


def _shared_node(name: str = "node-a", gpus: int = 2, replicas: int = 4, **how: Any) -> Any:
    """A time-sliced node as GPU feature discovery and the device plugin show it; `how`
    leaves signs out (`label=False`, `product=False`) or renames the resource (`shared=True`)."""
    node = make_node(name, "NVIDIA-L40S", gpus)
    labels = node["metadata"]["labels"]
    if how.get("label", True):
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    if how.get("product", True):
        labels["nvidia.com/gpu.product"] = "NVIDIA-L40S-SHARED"
    resource = "nvidia.com/gpu.shared" if how.get("shared") else "nvidia.com/gpu"
    for key in ("capacity", "allocatable"):
        node["status"][key] = {resource: str(gpus * replicas)}
    return node


def _pods(names: list[str], node: str = "node-a") -> list[dict[str, Any]]:
    return [make_pod(n, node=node, started=START - 60) for n in names]


def _copies(names: list[str], act: float, hours: int = 8, uuid: str = "GPU-0") -> list[Series]:
    """`--kubernetes-virtual-gpus`: the device's series copied to every pod holding it."""
    return [
        Series(gpu_labels(uuid=uuid, model=L40S, pod=n, namespace="ml"), [act] * hours)
        for n in names
    ]


def _views(inv: Any) -> Views:
    return Views(inv, DEFAULT_PRICES)


def test_virtual_gpu_copies_split_the_device_and_count_its_activity_once() -> None:
    names = ["a", "b", "c", "d"]
    series = [
        *_copies(names, 0.01),
        Series(gpu_labels(uuid="GPU-1", gpu="1", model=L40S), [0.0] * 8),
    ]
    inv = inventory(series, 8, pods=_pods(names), nodes=[_shared_node()])
    held = inv.holdings[inv.holdings[C.HELD]]
    assert held[C.REPLICAS].tolist() == [4.0] * 4
    assert held[C.FRACTION].tolist() == [0.25] * 4
    assert set(held[C.ATTRIBUTION]) == {Method.SHARED_SPLIT.value}
    # The holders together never count more than the device: 8 hours, not 32.
    assert held[C.GPU_HOURS].sum() == pytest.approx(8.0)
    s = summarise(_views(inv), 0.05, "USD")
    assert s.allocated_gpu_hours == pytest.approx(8.0)
    assert s.gpus_allocated_now == pytest.approx(1.0)
    assert s.mean_activity == pytest.approx(0.01)
    assert s.gpus_total == 2  # 8 advertised replicas are 2 physical GPUs


def test_an_idle_pod_on_a_shared_gpu_wastes_its_replica_not_the_gpu() -> None:
    names = ["a", "b", "c", "d"]
    inv = inventory(_copies(names, 0.01), 8, pods=_pods(names), nodes=[_shared_node()])
    found = run_check(gpu001, inv)
    assert len(found) == 4
    f = next(f for f in found if f.resource.name == "a")
    assert f.impact.gpu_hours == pytest.approx(2.0)
    assert f.message.startswith(
        "Pod ml/a held a replica of an L40S shared 4 ways (0.25 GPU) for 8 h at 1.0 % average "
        "engine activity of the shared GPU: an idle pod on a shared GPU wastes its replica, not "
        "the GPU. Confidence medium:"
    )
    assert f.evidence["shared_replicas"] == 4
    # Busy: its activity is the device's, which is busy; no pod of it is idle.
    busy = inventory(_copies(names, 0.5), 8, pods=_pods(names), nodes=[_shared_node()])
    assert run_check(gpu001, busy) == []


def test_an_idle_tail_on_a_shared_gpu_says_so() -> None:
    names = ["a", "b"]
    series = [
        Series(gpu_labels(model=L40S, pod=n, namespace="ml"), [0.6] * 6 + [0.0] * 18) for n in names
    ]
    inv = inventory(series, 24, pods=_pods(names), nodes=[_shared_node(replicas=2)])
    found = run_check(gpu002, inv)
    assert [f.resource.name for f in found] == ["a", "b"]
    assert found[0].message.startswith(
        "Pod ml/a has held a replica of an L40S shared 2 ways (0.50 GPU) idle for the last 18 h"
    )
    assert "an idle pod on it wastes its replica, not the GPU." in found[0].message
    assert found[0].impact.gpu_hours == pytest.approx(9.0)


@pytest.mark.parametrize(
    ("how", "replicas"),
    [
        ({}, 4),
        ({"label": False}, 4),  # allocatable nvidia.com/gpu 8 on 2 physical GPUs
        ({"label": False, "shared": True}, 4),  # renamed: nvidia.com/gpu.shared
        ({"label": False, "product": False}, 4),
    ],
)
def test_sharing_is_read_from_each_sign(how: dict[str, bool], replicas: int) -> None:
    inv = inventory(_copies(["a"], 0.3), 4, pods=_pods(["a"]), nodes=[_shared_node(**how)])
    assert inv.holdings[C.REPLICAS].tolist() == [float(replicas)]
    assert inv.holdings[C.GPU_HOURS].tolist() == [pytest.approx(1.0)]


def test_several_pods_on_one_gpu_is_sharing_without_any_label() -> None:
    # A node without GPU feature discovery: two pods on one UUID in the same hours.
    inv = inventory(
        _copies(["a", "b"], 0.3), 4, pods=_pods(["a", "b"]), nodes=[make_node("node-a", gpus=2)]
    )
    held = inv.holdings[inv.holdings[C.HELD]]
    assert held[C.REPLICAS].tolist() == [2.0, 2.0]
    assert held[C.GPU_HOURS].sum() == pytest.approx(4.0)
    # One after the other is no sharing.
    seq = [
        Series(gpu_labels(model=L40S, pod="a", namespace="ml"), [0.3, 0.3, None, None]),
        Series(gpu_labels(model=L40S, pod="b", namespace="ml"), [None, None, 0.3, 0.3]),
    ]
    inv = inventory(seq, 4, pods=_pods(["a", "b"]), nodes=[make_node("node-a", gpus=2)])
    assert inv.holdings[C.REPLICAS].tolist() == [1.0, 1.0]


def test_pods_that_follow_each_other_within_a_bucket_do_not_share_it() -> None:
    # Pod a ends 20 minutes into hour 3, pod b starts there: one GPU, one pod at a time.
    seq = [
        Series(
            gpu_labels(model=L40S, pod="a", namespace="ml"),
            [0.3, 0.3, 0.3, None],
            samples=[60, 60, 20, 0],
        ),
        Series(
            gpu_labels(model=L40S, pod="b", namespace="ml"),
            [None, None, 0.3, 0.3],
            samples=[0, 0, 40, 60],
        ),
    ]
    inv = inventory(seq, 4, pods=_pods(["a", "b"]), nodes=[make_node("node-a", gpus=2)])
    assert inv.holdings[C.REPLICAS].tolist() == [1.0, 1.0]
    assert inv.holdings[C.GPU_HOURS].sum() == pytest.approx(4.0)


def test_mig_single_strategy_is_not_sharing() -> None:
    node = make_node("node-a", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 8)
    node["metadata"]["labels"]["nvidia.com/mig.strategy"] = "single"
    node["status"]["allocatable"] = {"nvidia.com/gpu": "56"}
    inv = inventory(_copies(["a"], 0.3), 4, pods=_pods(["a"]), nodes=[node])
    assert inv.holdings[C.REPLICAS].tolist() == [1.0]


def test_one_pod_labelled_time_sliced_gpu_leaves_the_others_unattributed() -> None:
    # dcgm-exporter's default: the device's series names one of its four pods.
    names = ["a", "b", "c", "d"]
    inv = inventory(_copies(["d"], 0.3), 8, pods=_pods(names), nodes=[_shared_node()])
    views = _views(inv)
    un = views.unattributed
    assert sorted(un[C.POD]) == ["a", "b", "c"]
    assert set(un["reason"]) == {Reason.SHARED_WITHOUT_VIRTUAL_GPUS.value}
    assert un[C.GPU_HOURS].sum() == pytest.approx(3 * 0.25 * 8)
    book = ledger(views)
    assert book.attributed[Method.SHARED_SPLIT.value] == pytest.approx(2.0)
    assert book.allocated_gpu_hours == pytest.approx(8.0)
    found = run_check(gpu080, inv)
    assert [f.resource.name for f in found] == ["a", "b", "c"]
    assert found[0].message == (
        "Pod ml/a holds 0.25 GPU on node-a but it holds replicas of a shared GPU and "
        "dcgm-exporter labels each shared GPU with one pod only (no --kubernetes-virtual-gpus): "
        "2 GPU-hours could not be audited."
    )
    assert "--kubernetes-virtual-gpus" in found[0].recommendation


def _mig(pod: str = "", act: list[float | None] | None = None, util: bool = False) -> Series:
    lab = gpu_labels(
        model="NVIDIA A100-SXM4-80GB", pod=pod, namespace="ml" if pod else "", mig=("1g.10gb", "9")
    )
    if util:  # no profiling series: GPU_UTIL only, which reads 0 on MIG
        return Series(lab, act=[None] * 8, util=[0.0] * 8)
    return Series(lab, act or [0.4] * 8)


def _mig_pod(name: str, profile: str = "1g.10gb", n: int = 1) -> dict[str, Any]:
    pod = make_pod(name, started=START - 60)
    pod["spec"]["containers"][0]["resources"]["limits"] = {f"nvidia.com/mig-{profile}": str(n)}
    return pod


def test_gpu_util_is_never_activity_of_a_mig_instance() -> None:
    inv = inventory([_mig("a", util=True)], 8, pods=[_mig_pod("a")], nodes=[make_node("node-a")])
    h = inv.holdings.iloc[0]
    assert h[C.HELD] and h[C.HOURS] == pytest.approx(8.0)  # held time still counts
    assert h[C.ACT_MEAN] != h[C.ACT_MEAN] and h[C.ACT_SOURCE] == ""
    assert run_check(gpu001, inv) == []  # never idle on GPU_UTIL's 0
    s = summarise(_views(inv), 0.05, "USD")
    assert s.mean_activity is None and s.idle_gpu_hours == 0.0
    assert s.allocated_gpu_hours == pytest.approx(8 / 7)


def test_an_unlabelled_mig_instance_is_joined_to_its_only_possible_pod() -> None:
    inv = inventory([_mig()], 8, pods=[_mig_pod("a")], nodes=[make_node("node-a")])
    h = inv.holdings.iloc[0]
    assert (h[C.POD], h[C.HELD], h[C.ATTRIBUTION]) == ("a", True, Method.KUBERNETES_JOIN.value)
    book = ledger(_views(inv))
    assert book.attributed[Method.KUBERNETES_JOIN.value] == pytest.approx(8 / 7)
    assert book.unattributed_gpu_hours == 0.0
    assert run_check(gpu080, inv) == []


def test_the_join_refuses_what_is_ambiguous() -> None:
    # Two pods for one unlabelled instance.
    two = inventory([_mig()], 8, pods=[_mig_pod("a"), _mig_pod("b")], nodes=[make_node("node-a")])
    assert not two.holdings[C.HELD].any()
    views = _views(two)
    assert set(views.unattributed["reason"]) == {Reason.NO_POD_LABEL.value}
    assert ledger(views).unattributed[Reason.NO_POD_LABEL.value] == pytest.approx(2 * 8 / 7)
    # A pod that started after the series began holds it from its start (issue 32): the hours
    # before are held by no pod.
    late = _mig_pod("a")
    late["status"]["startTime"] = iso(START + 3 * 3600)
    inv = inventory([_mig()], 8, pods=[late], nodes=[make_node("node-a")])
    held = inv.holdings[inv.holdings[C.HELD]]
    assert held[C.HOURS].tolist() == [pytest.approx(5.0)]
    assert inv.holdings[~inv.holdings[C.HELD]][C.HOURS].tolist() == [pytest.approx(3.0)]
    assert run_check(gpu080, inv) == []
    # Without profiling series either: nothing to join by, the reason says so.
    blind = inventory(
        [_mig(util=True)], 8, pods=[_mig_pod("a"), _mig_pod("b")], nodes=[make_node("node-a")]
    )
    assert set(_views(blind).unattributed["reason"]) == {Reason.PROFILING_ABSENT.value}


def test_a_whole_gpu_join_needs_the_request_to_match_the_unlabelled_gpus() -> None:
    series = [Series(gpu_labels(uuid=f"GPU-{i}", gpu=str(i)), [0.5] * 8) for i in range(2)]
    one = make_pod("a", gpus=2, started=START - 60)
    inv = inventory(series, 8, pods=[one], nodes=[make_node("node-a", gpus=2)])
    assert inv.holdings[C.ATTRIBUTION].tolist() == [Method.KUBERNETES_JOIN.value] * 2
    half = make_pod("a", gpus=1, started=START - 60)
    inv = inventory(series, 8, pods=[half], nodes=[make_node("node-a", gpus=2)])
    assert not inv.holdings[C.HELD].any()


def test_the_ledger_adds_up_to_the_allocated_gpu_hours_in_the_json_report() -> None:
    names = ["a", "b", "c", "d"]
    series = [
        *_copies(["d"], 0.3),
        Series(
            gpu_labels(uuid="GPU-9", host="node-b", pod="x", namespace="ml"), [0.5] * 7 + [None]
        ),
        Series(
            gpu_labels(
                uuid="GPU-8", host="node-c", model="NVIDIA A100-SXM4-80GB", mig=("1g.10gb", "9")
            ),
            [0.4] * 8,
        ),
    ]
    pods = [
        *_pods(names),
        make_pod("x", node="node-b", started=START - 60),
        make_pod("dark", node="node-d", started=START + 1800),
        *[_mig_pod(n) for n in ("m1", "m2")],
    ]
    for p in pods[-2:]:
        p["spec"]["nodeName"] = "node-c"
    nodes = [_shared_node(), make_node("node-b"), make_node("node-c"), make_node("node-d")]
    inv = inventory(series, 8, pods=pods, nodes=nodes)
    doc = json.loads(json_report.render(run_checks(inv, Settings())))
    jsonschema.validate(doc, SCHEMA)
    book = doc["attribution"]
    parts = [v["gpu_hours"] for side in ("attributed", "unattributed") for v in book[side].values()]
    assert (
        round(sum(parts), 2) == doc["summary"]["allocated_gpu_hours"] == book["allocated_gpu_hours"]
    )
    assert book["unattributed"]["no_exporter"] == {"gpu_hours": 7.5, "pods": 1}
    assert book["unattributed"]["time_slicing_without_virtual_gpus"]["pods"] == 3
    assert book["unattributed"]["no_pod_label"]["pods"] == 2
    assert book["attributed"]["dcgm_pod_label"]["gpu_hours"] == pytest.approx(7.0)
    assert set(book["attributed"]) == {m.value for m in Method}
    assert set(book["unattributed"]) == {r.value for r in Reason}


def test_without_the_kubernetes_pods_the_unattributed_side_is_unknown_not_zero() -> None:
    inv = inventory(_copies(["a"], 0.3), 4, nodes=[make_node("node-a")])
    result = run_checks(inv, Settings())
    doc = json.loads(json_report.render(result))
    jsonschema.validate(doc, SCHEMA)
    assert doc["attribution"]["unattributed_unknown"].startswith(
        "GPU-hours pods held without DCGM series need the Kubernetes pods"
    )
    assert "unattributed: unknown (" in attribution_sentence(result)
