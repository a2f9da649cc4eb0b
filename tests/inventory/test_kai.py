"""KAI Scheduler's GPU fractions: the series naming a reservation pod split among the fraction
pods of its GPU group at their shares from their starts, the rest held by the reservation pod;
the ledger adding up; no finding about a reservation pod; KAI PodGroups as gangs."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.ledger import ledger
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks import gpu010_partial_gang as gpu010
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views, kai
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method
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

RES_NS = "kai-resource-reservation"


def reservation(name: str, group: str, app: str = RES_NS) -> dict[str, Any]:
    labels = {"app": app, "runai-gpu-group": group}
    return make_pod(name, namespace=RES_NS, labels=labels, started=START - 600)


def fraction(name: str, group: str, started: float = START - 600, **ask: str) -> dict[str, Any]:
    """A fraction pod of `group`: `ask` its annotations (`gpu_fraction="0.5"`, ...)."""
    notes = {k.replace("_", "-"): v for k, v in ask.items()}
    labels = {"runai-gpu-group": group, "kai.scheduler/queue": "team-a"}
    pod = make_pod(name, gpus=0, labels=labels, annotations=notes, started=started)
    pod["spec"]["containers"][0]["resources"] = {}
    return pod


def node(memory: str | None = "81559") -> dict[str, Any]:
    n = make_node("node-a", gpus=8)
    if memory is not None:
        n["metadata"]["labels"]["nvidia.com/gpu.memory"] = memory
    return n


def shared_gpu(hours: int, act: float = 0.01, **kw: Any) -> Series:
    labels = gpu_labels("GPU-0", "0", pod="gpu-reservation-aaa", namespace=RES_NS)
    return Series(labels, act=[act] * hours, **kw)


def held(inv: Inventory) -> dict[tuple[str, str], float]:
    """GPU-hours by (pod, method)."""
    h = inv.holdings
    out: dict[tuple[str, str], float] = {}
    for pod, method, gh in zip(h[C.POD], h[C.ATTRIBUTION], h[C.GPU_HOURS], strict=True):
        out[(pod, method)] = out.get((pod, method), 0.0) + float(gh)
    return out


def test_fractions_split_the_reserved_gpu_from_their_starts() -> None:
    """4 hours of one GPU: `a` asks 0.5 all along; `b` asks 20,000 MiB of a GPU labelled
    81,559 MiB (KAI: 81,500, so 0.2454, rounded up to 0.25) and starts 100 s before hour 2
    ends: it holds its share for exactly the time it ran, 2 h 100 s. The reservation pod holds
    what is left: 0.5 until then, 0.25 after."""
    pods = [
        reservation("gpu-reservation-aaa", "g1"),
        fraction("a", "g1", gpu_fraction="0.5"),
        fraction("b", "g1", START + 2 * 3600 - 100, gpu_memory="20000"),
    ]
    inv = inventory([shared_gpu(4, fb_used=1000, fb_free=79000)], 4, pods=pods, nodes=[node()])
    kai_f, kai_r = Method.KAI_FRACTION.value, Method.KAI_RESERVED.value
    b = 0.25 * (2 + 100 / 3600)
    assert held(inv) == pytest.approx(
        {("a", kai_f): 2.0, ("b", kai_f): b, ("gpu-reservation-aaa", kai_r): 2.0 - b}
    )
    book = ledger(Views(inv, DEFAULT_PRICES))
    assert book.attributed[kai_f] == pytest.approx(2.0 + b)
    assert book.attributed[kai_r] == pytest.approx(2.0 - b)
    assert book.allocated_gpu_hours == pytest.approx(4.0)  # one GPU, four hours, once
    h = inv.holdings.set_index(C.POD)
    assert h.loc["a", C.FRACTION] == 0.5 and h.loc["b", C.FRACTION] == 0.25
    assert h.loc["a", C.NODE] == "node-a" and (h[C.REPLICAS] == 1).all()
    # A whole copy keeps every statistic; the later one has its buckets' means only.
    assert h.loc["a", C.FB_USED_MEAN] == 1000
    assert h.loc["b", C.ACT_MEAN] == pytest.approx(0.01)
    assert inv.complete and not [w for w in inv.warnings if "KAI" in w]


def ended(pod: dict[str, Any], at: float | None, phase: str = "Succeeded") -> dict[str, Any]:
    """`pod` ended in `phase`, its container's `finishedAt` `at` (None: not said)."""
    pod["status"]["phase"] = phase
    done: dict[str, Any] = {"reason": "Completed", "exitCode": 0}
    if at is not None:
        done["finishedAt"] = iso(at)
    pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": done}}]
    return pod


def test_a_fraction_pod_that_ended_holds_its_share_until_its_end() -> None:
    """4 hours: `a` asks 0.5 all along; `b` asks 0.25 and ended (Succeeded) 100 s before hour
    2 ended: it holds its share for exactly the time it ran, 2 h less 100 s; `c` (Failed) asks
    0.25 and ended at an unknown time: nothing says when it held its share, so it holds none.
    The reservation pod holds the rest: 0.25 while `b` ran, 0.5 after."""
    pods = [
        reservation("gpu-reservation-aaa", "g1"),
        fraction("a", "g1", gpu_fraction="0.5"),
        ended(fraction("b", "g1", gpu_fraction="0.25"), START + 2 * 3600 - 100),
        ended(fraction("c", "g1", gpu_fraction="0.25"), None, "Failed"),
    ]
    inv = inventory([shared_gpu(4)], 4, pods=pods, nodes=[node()])
    kai_f, kai_r = Method.KAI_FRACTION.value, Method.KAI_RESERVED.value
    b = 0.25 * (2 - 100 / 3600)
    assert held(inv) == pytest.approx(
        {("a", kai_f): 2.0, ("b", kai_f): b, ("gpu-reservation-aaa", kai_r): 2.0 - b}
    )
    book = ledger(Views(inv, DEFAULT_PRICES))
    assert book.allocated_gpu_hours == pytest.approx(4.0)
    h = inv.holdings.set_index(C.POD)
    assert h.loc["b", C.HOURS] == pytest.approx(2 - 100 / 3600) and h.loc["b", C.FRACTION] == 0.25


def test_fraction_pods_one_after_another_are_not_scaled_together() -> None:
    """Two 0.75 pods that held the GPU one after the other, both in hour 2 (the first to 600 s
    into it, the second from 900 s), ask for 0.75 each at any one instant: neither is scaled,
    no warning, and in hour 2 the reservation pod holds what their parts leave."""
    pods = [
        reservation("gpu-reservation-aaa", "g1"),
        ended(fraction("first", "g1", gpu_fraction="0.75"), START + 3600 + 600),
        fraction("then", "g1", START + 3600 + 900, gpu_fraction="0.75"),
    ]
    inv = inventory([shared_gpu(4)], 4, pods=pods, nodes=[node()])
    kai_f, kai_r = Method.KAI_FRACTION.value, Method.KAI_RESERVED.value
    first, then = 0.75 * (1 + 600 / 3600), 0.75 * (2 + 2700 / 3600)
    assert held(inv) == pytest.approx(
        {
            ("first", kai_f): first,
            ("then", kai_f): then,
            ("gpu-reservation-aaa", kai_r): 4 - first - then,
        }
    )
    assert not [w for w in inv.warnings if "KAI" in w]
    assert ledger(Views(inv, DEFAULT_PRICES)).allocated_gpu_hours == pytest.approx(4.0)


def test_a_memory_request_without_the_node_label_divides_by_dcgm_framebuffer() -> None:
    pods = [reservation("gpu-reservation-aaa", "g1"), fraction("m", "g1", gpu_memory="8000")]
    series = [shared_gpu(2, fb_used=1000, fb_free=79000)]
    inv = inventory(series, 2, pods=pods, nodes=[node(memory=None)])
    # 8,000 of 80,000 MiB: 0.1.
    assert held(inv)[("m", Method.KAI_FRACTION.value)] == pytest.approx(0.2)


def test_a_share_that_cannot_be_told_counts_as_the_reservation_and_says_so() -> None:
    pods = [
        reservation("gpu-reservation-aaa", "g1"),
        fraction("m", "g1", gpu_memory="8000"),
        fraction("x", "g1", gpu_fraction="lots"),
    ]
    inv = inventory([shared_gpu(2)], 2, pods=pods, nodes=[node(memory=None)])
    got = held(inv)
    assert got[("m", Method.KAI_FRACTION.value)] == 0.0
    assert got[("x", Method.KAI_FRACTION.value)] == 0.0
    assert got[("gpu-reservation-aaa", Method.KAI_RESERVED.value)] == pytest.approx(2.0)
    assert any("gpu-fraction 'lots' is no share of a GPU" in w for w in inv.warnings)
    assert any("ml/m on GPU group g1: its share of the GPU is unknown" in w for w in inv.warnings)
    assert not inv.complete
    assert any("KAI Scheduler GPU fractions" in r for r in inv.incomplete_reasons)


def test_fractions_asking_for_more_than_the_gpu_are_scaled_to_it() -> None:
    pods = [reservation("gpu-reservation-aaa", "g1")]
    pods += [fraction(n, "g1", gpu_fraction="0.75") for n in ("a", "b")]
    inv = inventory([shared_gpu(2)], 2, pods=pods, nodes=[node()])
    got = held(inv)
    assert got[("a", Method.KAI_FRACTION.value)] == pytest.approx(1.0)
    assert got[("gpu-reservation-aaa", Method.KAI_RESERVED.value)] == pytest.approx(0.0)
    assert any("ask for 1.5 of one GPU" in w for w in inv.warnings)


def test_a_reservation_pod_without_fractions_holds_the_gpu_for_its_group() -> None:
    pods = [reservation("gpu-reservation-aaa", "g1", app="runai-reservation")]
    inv = inventory([shared_gpu(3)], 3, pods=pods, nodes=[node()])
    assert held(inv) == {("gpu-reservation-aaa", Method.KAI_RESERVED.value): 3.0}


def test_no_finding_is_about_a_reservation_pod() -> None:
    """30 idle hours: GPU001 names the fraction pod at half a GPU, never the reservation pod,
    which is in no list of pods either; its half counts as allocated and idle."""
    pods = [reservation("gpu-reservation-aaa", "g1"), fraction("a", "g1", gpu_fraction="0.5")]
    inv = inventory([shared_gpu(30)], 30, pods=pods, nodes=[node()])
    res = run_checks(inv, Settings())
    for f in res.findings:
        assert "gpu-reservation" not in f.message + f.recommendation + " ".join(f.pods)
    idle = [f for f in res.findings if f.code == "GPU001"]
    assert [(f.resource.name, f.resource.gpus, f.impact.gpu_hours) for f in idle] == [
        ("a", 0.5, pytest.approx(15.0))
    ]
    assert res.summary.allocated_gpu_hours == pytest.approx(30.0)
    assert res.summary.idle_gpu_hours == pytest.approx(30.0)
    # Only the check's own view: GPU001 alone does name it (the audit drops it).
    direct = run_check(gpu001, inv)
    assert {f.resource.name for f in direct} == {"a", "gpu-reservation-aaa"}
    assert kai.reservations(inv.pods) == {(RES_NS, "gpu-reservation-aaa")}


@pytest.mark.parametrize(
    ("notes", "want"),
    [
        ({"gpu-fraction": "0.5"}, kai.Request(0.5, None, 1)),
        ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}, kai.Request(0.25, None, 2)),
        ({"gpu-memory": "4000"}, kai.Request(None, 4000.0, 1)),
        ({"gpu-fraction": "1.5"}, kai.Request(None, None, 1)),
        ({"gpu-fraction": "NaN"}, kai.Request(None, None, 1)),
        ({"gpu-memory": "4e3"}, kai.Request(None, None, 1)),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, kai.Request(0.5, None, 1)),
        ({"other": "x"}, None),
    ],
)
def test_fraction_requests_as_kai_reads_them(notes: dict[str, str], want: Any) -> None:
    said: list[str] = []
    assert kai.request(notes, "ml/p", said) == want
    unreadable = want is not None and (want.share, want.memory_mib) == (None, None)
    assert bool(said) == (unreadable or notes.get("gpu-fraction-num-devices") == "0")


def test_gpu_memory_as_kai_reads_the_node_label() -> None:
    assert kai.gpu_memory({"nvidia.com/gpu.memory": "81559"}) == 81500
    assert kai.gpu_memory({"nvidia.com/gpu.memory": str(80 * 1024**3)}) == 81900
    assert kai.gpu_memory({"nvidia.com/gpu.memory": "lots"}) is None
    assert kai.memory_share(20000, 81500) == 0.25
    assert kai.memory_share(40750, 81500) == 0.5
    assert kai.memory_share(90000, 81500) == 1.0


def _gang(min_member: int, running: int) -> Inventory:
    pods, series = [], []
    for i in range(running + 1):
        up = i < running
        notes = {"pod-group-name": "pg-train"}
        pods.append(
            make_pod(
                f"w-{i}",
                annotations=notes,
                phase="Running" if up else "Pending",
                node="node-a" if up else "",
                started=START - 60 if up else None,
            )
        )
        if up:
            series.append(
                Series(gpu_labels(f"GPU-{i}", str(i), pod=f"w-{i}", namespace="ml"), [0.5] * 30)
            )
    pg = {"metadata": {"name": "pg-train", "namespace": "ml"}, "spec": {"minMember": min_member}}
    return inventory(series, 30, pods=pods, nodes=[node()], lists={"kai_podgroups": [pg]})


def test_a_kai_podgroup_is_a_gang() -> None:
    inv = _gang(min_member=3, running=2)
    g = inv.gangs.set_index(C.GANG_ID).loc["scheduling.run.ai/PodGroup/ml/pg-train"]
    assert g[C.NEEDED] == 3 and g[C.GANG_SOURCE] == "scheduling.run.ai PodGroup spec.minMember"
    assert set(inv.pods[C.GANG]) == {"scheduling.run.ai/PodGroup/ml/pg-train"}
    (f,) = run_check(gpu010, inv)
    assert (f.resource.kind, f.resource.name) == ("PodGroup", "pg-train")
    assert not run_check(gpu010, _gang(min_member=2, running=2))
    zero = _gang(min_member=0, running=1).gangs
    assert zero[C.NEEDED].isna().all()  # minMember 0 asks for no gang


def _gpu080(inv: Inventory) -> list[Any]:
    return [f for f in run_checks(inv, Settings()).findings if f.code == "GPU080"]


def test_a_kai_node_without_an_exporter_names_the_fraction_pods_not_the_reservation() -> None:
    """30 hours, no DCGM series on the node: the node's finding names the workload pod and the
    fraction pods the reservation pod holds its GPU for, never the reservation pod."""
    pods = [
        reservation("gpu-reservation-aaa", "g1"),
        fraction("a", "g1", gpu_fraction="0.5"),
        fraction("b", "g1", gpu_fraction="0.25"),
        make_pod("w", started=START - 600),
    ]
    (f,) = _gpu080(inventory([], 30, pods=pods, nodes=[node()]))
    assert f.message == (
        "Node node-a has 2 GPUs held by 3 pods (ml/a, ml/b, ml/w; 1 GPU of them reserved by "
        "KAI Scheduler for GPU fractions) but no DCGM series at all: 60 GPU-hours could not "
        "be audited."
    )
    assert f.pods == ("ml/a", "ml/b", "ml/w") and f.impact.gpu_hours == pytest.approx(60.0)
    assert f.evidence["kai_reserved_gpus"] == 1


def test_a_reserved_gpu_without_pod_labels_is_reported_as_its_gpu_groups() -> None:
    """Two GPUs whose series name no pod, one reserved by KAI for two fraction pods (the
    Kubernetes-side join cannot tell which): the reserved GPU's 30 hours are reported as the GPU
    group's, naming its fraction pods, not dropped with the reservation pod's finding."""
    pods = [
        reservation("gpu-reservation-aaa", "g1"),
        fraction("a", "g1", gpu_fraction="0.5"),
        fraction("b", "g1", gpu_fraction="0.25"),
    ]
    series = [Series(gpu_labels(f"GPU-{i}", str(i)), act=[0.2] * 30) for i in range(2)]
    inv = inventory(series, 30, pods=pods, nodes=[node()])
    (f,) = _gpu080(inv)
    assert (f.resource.kind, f.resource.name, f.resource.node) == ("GPUGroup", "g1", "node-a")
    assert f.message == (
        "KAI Scheduler's GPU group g1 on node-a holds 1 GPU for the GPU fractions of 2 pods "
        "(ml/a, ml/b), but no DCGM series names it: 30 GPU-hours could not be audited."
    )
    assert f.pods == ("ml/a", "ml/b") and f.impact.gpu_hours == pytest.approx(30.0)
    assert "gpu-reservation" not in f.message + f.recommendation
