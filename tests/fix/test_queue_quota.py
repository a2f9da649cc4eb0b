"""GPU090's Volcano and KAI Queue patches: the figures from the findings' evidence, the exact
field tested as read, the CRD schema, and the real `kubectl patch --local`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuaudit.checks.findings import Finding
from gpuaudit.fix import kueue, queue_quota
from gpuaudit.fix.changes import ChangeKind, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.patching import PatchError, apply
from gpuaudit.fix.plans import _validated
from gpuaudit.fix.validate import Invalid, check
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, lists, page, pods_table, quota
from tests.fix.kubectl import kubectl_patch

GPU = "nvidia.com/gpu"


def _volcano(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def _kai(name: str, quota: float, limit: float = -1, parent: str = "") -> dict[str, Any]:
    gpu = {"quota": quota, "limit": limit, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"gpu": gpu}}
    if parent:
        spec["parentQueue"] = parent
    return {"metadata": {"name": name}, "spec": spec}


def _ctx(states: dict[str, str] | None = None) -> Context:
    """Volcano queue research; KAI queues dept and its children idle-team and busy-team (a
    list whose state is not `ok` holds nothing, as when it was not read)."""
    kube = lists() | {
        "volcano_queues": [
            page(
                "scheduling.volcano.sh/v1beta1",
                "Queue",
                _volcano(
                    "research",
                    capability={GPU: "16"},
                    deserved={GPU: "12"},
                    guarantee={"resource": {GPU: "8"}},
                ),
            )
        ],
        "kai_queues": [
            page(
                "scheduling.run.ai/v2",
                "Queue",
                _kai("dept", 16),
                _kai("idle-team", 8, parent="dept"),
                _kai("busy-team", 4, limit=5, parent="dept"),
            )
        ],
    }
    extra = {"volcano_queues": "ok", "kai_queues": "ok"} | (states or {})
    kube = {k: v for k, v in kube.items() if extra.get(k, "ok") == "ok"}
    inv = SimpleNamespace(
        owners=build(kube, {"objects": STATES | extra}), pods=pods_table([]), window_hours=168.0
    )
    return Context(inv, "USD", "1.34")  # type: ignore[arg-type]


def _volcano_finding(rule: str, **ev: Any) -> Finding:
    return quota(rule, system="Volcano", queue="research", flavor="", resource=GPU, **ev)


def _kai_finding(rule: str, queue: str, **ev: Any) -> Finding:
    return quota(rule, system="KAI", queue=queue, resource=GPU, parent_queue="dept", **ev)


@pytest.mark.server
def test_idle_volcano_guarantee_is_lowered_at_its_exact_field(tmp_path: Path) -> None:
    ctx = _ctx()
    f = _volcano_finding("idle_quota", guarantee=8.0, quota=12.0, recommended_quota=3.0)
    [change], fixes = queue_quota.changes([f], ctx)
    path = "/spec/guarantee/resource/nvidia.com~1gpu"
    assert change.body == [
        {"op": "test", "path": path, "value": "8"},
        {"op": "replace", "path": path, "value": 3},
    ]
    assert change.target is not None and change.target.resource() == "queues.scheduling.volcano.sh"
    assert change.title == (
        "Change the quota of Volcano Queue research: spec.guarantee.resource[nvidia.com/gpu] "
        "from 8 to 3"
    )
    assert fixes[key(f)].kind is ChangeKind.PATCH and fixes[key(f)].file == change.file
    kept, why = _validated(change, "1.34")
    assert kept is not None and kept.validated == "Volcano v1.15.1 CRD", why
    got = kubectl_patch(change, tmp_path)
    assert got["spec"]["guarantee"]["resource"][GPU] == 3
    assert got["spec"]["deserved"][GPU] == "12"  # its share is kept


@pytest.mark.server
def test_volcano_quota_above_the_nodes_lowers_deserved_and_guarantee_above_them(
    tmp_path: Path,
) -> None:
    f = _volcano_finding(
        "quota_not_honoured", quota=12.0, guarantee=8.0, flavor_allocatable=10.0, flavor_nodes=2
    )
    [change], _ = queue_quota.changes([f], _ctx())
    assert [op["value"] for op in change.body if op["op"] == "replace"] == [10]
    assert change.body[0]["path"] == "/spec/deserved/nvidia.com~1gpu"
    got = kubectl_patch(change, tmp_path)
    assert got["spec"]["deserved"][GPU] == 10 and got["spec"]["guarantee"]["resource"][GPU] == "8"


@pytest.mark.server
def test_kai_idle_quota_moves_to_the_one_queue_that_waited(tmp_path: Path) -> None:
    f = _kai_finding(
        "kai_reclaimable_quota",
        "idle-team",
        quota=8.0,
        recommended_quota=5.0,
        reclaimable=3,
        waiting=[{"queue": "busy-team", "podgroup": "ml/pg", "gpus": 2.0}],
    )
    lower, raise_ = queue_quota.changes([f], _ctx())[0]
    quota_path = "/spec/resources/gpu/quota"
    assert lower.body == [
        {"op": "test", "path": quota_path, "value": 8},
        {"op": "replace", "path": quota_path, "value": 5},
    ]
    # busy-team's quota 4 + 3, and its limit 5 raised to the new quota
    assert [op["value"] for op in raise_.body if op["op"] == "replace"] == [7, 7]
    assert raise_.title.startswith("Raise the quota of KAI Queue busy-team")
    assert raise_.savings.gpu_hours == 0.0 and lower.savings.gpu_hours == 168.0
    for change in (lower, raise_):
        kept, why = _validated(change, "1.34")
        assert kept is not None and kept.validated == "KAI v0.13.0 CRD", why
        kubectl_patch(change, tmp_path)


def test_kai_quota_above_the_cluster_is_lowered_and_several_waiters_get_no_raise() -> None:
    over = _kai_finding(
        "kai_quota_not_honoured",
        "dept",
        quota=16.0,
        cluster_allocatable=12.0,
        schedulable_nodes=3,
    )
    idle = _kai_finding(
        "kai_reclaimable_quota",
        "idle-team",
        recommended_quota=6.0,
        reclaimable=2,
        waiting=[{"queue": "busy-team"}, {"queue": "other-team"}],
    )
    made, fixes = queue_quota.changes([over, idle], _ctx())
    assert [c.target.name for c in made if c.target] == ["dept", "idle-team"]
    assert made[0].body[-1] == {"op": "replace", "path": "/spec/resources/gpu/quota", "value": 12}
    assert fixes[key(idle)].file == made[1].file


def test_near_misses_get_no_change_and_say_why() -> None:
    ctx = _ctx()
    closes = _volcano_finding(
        "quota_not_honoured", quota=12.0, guarantee=8.0, flavor_allocatable=0.0, flavor_nodes=0
    )
    children = _kai_finding("kai_children_over_parent", "dept", children={"a": 10, "b": 10})
    unread = _kai_finding(
        "kai_quota_not_honoured", "ghost", cluster_allocatable=4.0, schedulable_nodes=1
    )
    made, fixes = queue_quota.changes([closes, children, unread], ctx)
    assert made == []
    assert fixes[key(closes)].reason.startswith("no schedulable node allocates the resource")
    assert fixes[key(children)].reason.startswith("which child queues to lower")
    assert fixes[key(unread)].reason == "KAI Queue ghost is not among the KAI Queues read"
    forbidden = _ctx({"volcano_queues": "forbidden (403)"})
    idle = _volcano_finding("idle_quota", guarantee=8.0, recommended_quota=3.0)
    _, fixes = queue_quota.changes([idle], forbidden)
    assert fixes[key(idle)].reason == "Volcano Queue research was not read (forbidden (403))"


def test_the_kueue_maker_leaves_volcano_and_kai_findings_to_this_one() -> None:
    f = _volcano_finding("idle_quota", guarantee=8.0, recommended_quota=3.0)
    assert kueue.changes([f], _ctx()) == ([], {})


def test_the_patch_fails_on_a_queue_changed_since_and_an_invalid_queue_is_refused() -> None:
    f = _volcano_finding("idle_quota", guarantee=8.0, recommended_quota=3.0)
    [change], _ = queue_quota.changes([f], _ctx())
    changed = {**dict(change.read or {}), "spec": {"guarantee": {"resource": {GPU: "9"}}}}
    with pytest.raises(PatchError):
        apply(changed, change.body, "json")
    bad = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}}
    bad["spec"] = {"resources": {"gpu": {"quota": "lots"}}}
    with pytest.raises(Invalid, match="spec.resources.gpu.quota"):
        check(bad, "1.34")
