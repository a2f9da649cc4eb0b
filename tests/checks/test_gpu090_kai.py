"""GPU090 on KAI Scheduler queues: deserved quota idle while a sibling's pods wait
(reclaimable), children deserving more than their parent, quota above the cluster; KAI Queues
read with their limit and over-quota weight, unlimited quota not judged."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu090_idle_queue_quota as gpu090
from gpuaudit.inventory import Inventory, queues
from gpuaudit.inventory.capabilities import Capability
from tests.support.factories import START, Series, gpu_labels, inventory, make_node, make_pod
from tests.support.factories import run_check as _run

HOURS = 30
WAIT_H = 6
QUEUE = "kai.scheduler/queue"


def kai_queue(
    name: str,
    quota: Any,
    parent: str = "",
    limit: Any = -1,
    allocated: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resources": {
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 2},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    status = {"allocated": {"nvidia.com/gpu": allocated}} if allocated else {}
    return {"metadata": {"name": name}, "spec": spec, "status": status}


def _inv(
    qs: list[dict[str, Any]], lab_use: float = 1.0, wait_h: float = WAIT_H, **more: Any
) -> Inventory:
    """`lab` runs a 1-GPU pod all window at `lab_use` of it (a fraction's share counts: 0.5
    is the pod's GPU at `gpu-fraction` 0.5 would be); `infer` has a pod waiting for 1 GPU for
    `wait_h` hours (KAI's message), in its PodGroup."""
    lab = make_pod("lab-0", namespace="lab", labels={QUEUE: "lab"}, started=START - 60)
    series = [Series(gpu_labels("GPU-0", "0", pod="lab-0", namespace="lab"), [0.7] * HOURS)]
    if lab_use < 1:
        lab["spec"]["containers"][0]["resources"] = {}
        lab["metadata"]["annotations"]["gpu-fraction"] = str(lab_use)
        lab["metadata"]["labels"]["runai-gpu-group"] = "g"
        res = make_pod(
            "gpu-reservation-x",
            namespace="kai-resource-reservation",
            labels={"app": "kai-resource-reservation", "runai-gpu-group": "g"},
            started=START - 60,
        )
        series = [
            Series(
                gpu_labels(
                    "GPU-0", "0", pod="gpu-reservation-x", namespace="kai-resource-reservation"
                ),
                [0.7] * HOURS,
            )
        ]
        more.setdefault("extra_pods", []).append(res)
    since = START + (HOURS - wait_h) * 3600
    waiting = make_pod(
        "infer-0",
        namespace="infer",
        node="",
        phase="Pending",
        labels={QUEUE: "infer"},
        annotations={"pod-group-name": "pg-infer"},
        unschedulable="infer quota has reached the allowable limit of GPUs. Limit is 1 GPUs",
        pending_since=since,
    )
    pgs = [
        {"metadata": {"name": "pg-infer", "namespace": "infer"}, "spec": {"queue": "infer"}},
        {"metadata": {"name": "pg-lab", "namespace": "lab"}, "spec": {"queue": "lab"}},
    ]
    pods = [lab, waiting, *more.pop("extra_pods", [])]
    lists = {"kai_queues": qs, "kai_podgroups": pgs}
    return inventory(
        series, HOURS, pods=pods, nodes=[make_node("node-a", gpus=8)], lists=lists, **more
    )


def tree(train: Any = 3, org: Any = 6, infer_limit: Any = 1) -> list[dict[str, Any]]:
    return [
        kai_queue("org", org),
        kai_queue("train", train, "org"),
        kai_queue("infer", 1, "org", limit=infer_limit),
        kai_queue("lab", 1, "org", allocated="1"),
    ]


def run(inv: Inventory, **kw: float) -> list[Any]:
    return _run(gpu090, inv, **kw)


def test_kai_queues_are_read_with_their_limit_and_weight() -> None:
    inv = _inv(tree(train=-1) + [kai_queue("odd", "lots", "org")])
    by = {q.name: q for q in inv.queues.queues}
    assert by["lab"].system == queues.KAI and by["lab"].cohort == "org"
    (lab,) = by["lab"].quotas
    assert (lab.nominal, lab.capability, lab.over_quota_weight) == (1, None, 2)
    assert by["lab"].allocated == {"nvidia.com/gpu": 1.0}
    assert by["infer"].quotas[0].capability == 1
    assert by["train"].quotas[0].unlimited and by["train"].quotas[0].nominal == 0
    assert by["odd"].unaudited
    assert any("KAI queue odd: spec.resources.gpu.quota is 'lots'" in w for w in inv.warnings)
    assert inv.queues.pod_queue[("lab", "lab-0")] == (queues.KAI, "lab")
    (adm,) = [a for a in inv.queues.admissions if a.name == "pg-infer"]
    assert adm.requests == (("nvidia.com/gpu", 1.0),)
    assert adm.pending_since == START + (HOURS - WAIT_H) * 3600
    assert Capability.QUEUES in inv.capabilities


def test_deserved_quota_idle_while_a_sibling_waits_is_reclaimable() -> None:
    (f,) = run(_inv(tree()))
    assert (f.resource.kind, f.resource.name, f.resource.gpus) == ("Queue", "train", 3.0)
    assert f.message == (
        "KAI queue train deserves 3 GPUs but used at most 0 GPUs while its sibling queue under "
        "parent queue org had pods waiting for GPUs (infer/pg-infer in infer (1 GPU, 6.0 h)): "
        "3 GPUs of train's deserved quota sat idle and could be reclaimed (infer has limit 1)."
    )
    assert f.impact.gpu_hours == pytest.approx(6.0)  # 1 GPU waited 6 hours
    assert f.severity.name == "HIGH"
    ev = f.evidence
    assert ev["rule"] == "kai_reclaimable_quota"
    assert (ev["quota"], ev["limit"], ev["over_quota_weight"]) == (3, None, 2)
    assert ev["waiting"][0]["queue_limit"] == 1 and ev["recommended_quota"] == 0
    assert "lower spec.resources.gpu.quota of train from 3 to 0" in f.recommendation


def test_used_quota_short_waits_and_unlimited_quota_are_quiet() -> None:
    # lab's quota is its peer too: used whole all window (near-miss, and train is not there).
    qs = [q for q in tree() if q["metadata"]["name"] != "train"]
    assert not run(_inv(qs))
    assert not run(_inv(tree(), wait_h=0.25))  # waited under 30 minutes
    assert not [f for f in run(_inv(tree(train=-1))) if f.resource.name == "train"]
    # Half of lab's GPU at gpu-fraction 0.5 leaves 0.5 idle: less than one GPU.
    assert not run(_inv(qs, lab_use=0.5))


def test_children_deserving_more_than_their_parent() -> None:
    fs = [f for f in run(_inv(tree(org=4))) if f.evidence["rule"] == "kai_children_over_parent"]
    (f,) = fs
    assert f.message == (
        "KAI queue org deserves 4 GPUs, but its child queues deserve 5 GPUs together (train "
        "(3), infer (1), lab (1)): 1 GPU of the children's quota cannot be honoured when they "
        "all claim it."
    )
    assert f.category.name == "RISK" and f.impact.gpu_hours == 0
    assert f.evidence["children"] == {"train": 3, "infer": 1, "lab": 1}


def test_quota_above_the_cluster() -> None:
    qs = [*tree(), kai_queue("huge", 100)]
    (f,) = [f for f in run(_inv(qs)) if f.evidence["rule"] == "kai_quota_not_honoured"]
    assert f.resource.name == "huge" and f.evidence["excess"] == 92
    assert "allocate only 8 GPUs" in f.message


def test_without_the_kai_lists_nothing_is_judged() -> None:
    inv = _inv(tree())
    lists = {"kai_queues": []}
    bare = inventory([], HOURS, pods=[], nodes=[make_node("node-a")], lists=lists)
    assert Capability.QUEUES not in bare.capabilities
    assert "KAI Queues with PodGroups (kai_podgroups: not read)" in bare.missing[Capability.QUEUES]
    assert run(inv)


def test_top_level_queues_are_siblings() -> None:
    qs = [kai_queue("train", 3), kai_queue("infer", 1, limit=1), kai_queue("lab", 1)]
    (f,) = run(_inv(qs))
    assert f.resource.name == "train"
    assert "sibling queue under the top of the queue tree had pods waiting" in f.message
    assert f.evidence["parent_queue"] == ""


@pytest.mark.parametrize(
    ("ask", "labelled", "want"),
    [
        # 40,750 MiB over the smallest GPU memory, 81,559 MiB labelled (KAI: 81,500).
        ({"gpu-memory": "40750"}, True, 0.5),
        ({"gpu-memory": "20375", "gpu-fraction-num-devices": "2"}, True, 0.5),
        ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}, False, 0.5),
        ({"gpu-memory": "40000"}, False, None),  # no node says its GPU memory: unknown
    ],
)
def test_a_waiting_fraction_pod_waits_for_its_share(
    ask: dict[str, str], labelled: bool, want: float | None
) -> None:
    """A KAI fraction pod that waits asks for no `nvidia.com/gpu`: it waits for its share, a
    `gpu-memory` request over the smallest GPU memory of the nodes, as KAI counts a pending
    pod's request in its queue (a larger node's label does not lower it)."""
    waiting = make_pod(
        "frac-0",
        namespace="infer",
        node="",
        gpus=0,
        phase="Pending",
        labels={QUEUE: "infer"},
        annotations=ask,
        unschedulable="no node has enough GPU memory",
        pending_since=START + 3600,
    )
    waiting["spec"]["containers"][0]["resources"] = {}
    nodes = [make_node("node-a", gpus=8), make_node("node-b", gpus=8)]
    if labelled:
        nodes[0]["metadata"]["labels"]["nvidia.com/gpu.memory"] = "81559"
        nodes[1]["metadata"]["labels"]["nvidia.com/gpu.memory"] = "143771"
    lists = {"kai_queues": tree()}
    inv = inventory([], HOURS, pods=[waiting], nodes=nodes, lists=lists)
    got = [a for a in inv.queues.admissions if a.namespace == "infer"]
    if want is None:
        assert not got
        return
    (adm,) = got
    assert adm.requests == (("nvidia.com/gpu", pytest.approx(want)),)
    assert adm.pending_since == START + 3600
