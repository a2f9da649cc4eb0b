"""GPU090's ClusterQueue patches and GPU070's commands."""

from __future__ import annotations

from gpuaudit.checks.findings import Finding
from gpuaudit.fix import drain, kueue
from gpuaudit.fix.changes import ChangeKind, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.patching import PatchError, apply
from gpuaudit.fix.plans import _validated
from tests.fix.conftest import quota, sick

H100 = "/spec/resourceGroups/1/flavors/1"


def _idle_quota(queue: str, flavor: str, to: float, **more: object) -> Finding:
    return quota(
        "idle_quota",
        system="Kueue",
        queue=queue,
        flavor=flavor,
        resource="nvidia.com/gpu",
        recommended_quota=to,
        **more,
    )


def test_idle_quota_is_lowered_by_a_json_patch_at_the_exact_indices(ctx: Context) -> None:
    f = _idle_quota("team-a", "h100", 6.0)
    [change], fixes = kueue.changes([f], ctx)
    assert change.kind is ChangeKind.PATCH and change.patch_type == "json"
    assert change.body == [
        {"op": "test", "path": f"{H100}/name", "value": "h100"},
        {"op": "test", "path": f"{H100}/resources/0/name", "value": "nvidia.com/gpu"},
        {"op": "test", "path": f"{H100}/resources/0/nominalQuota", "value": "16"},
        {"op": "replace", "path": f"{H100}/resources/0/nominalQuota", "value": 6},
    ]
    assert change.title == (
        "Lower the nominalQuota of ClusterQueue team-a: nvidia.com/gpu in flavor h100 from 16 to 6"
    )
    assert fixes[key(f)].file == change.file and change.file.endswith("-clusterqueue-team-a.yaml")
    kept, why = _validated(change, "1.34")
    assert kept is not None and kept.validated == "Kueue v0.19.2 CRD", why
    patched = apply(change.read or {}, change.body, "json")
    lines = patched["spec"]["resourceGroups"][1]["flavors"]
    assert lines[1]["resources"][0]["nominalQuota"] == 6
    assert lines[0]["resources"][0]["nominalQuota"] == 8  # the other flavor as it was


def test_a_flavor_total_lowers_each_queue_it_names_and_one_line_takes_the_lowest(
    ctx: Context,
) -> None:
    total = quota(
        "flavor_quota_not_honoured",
        flavor="a100",
        resource="nvidia.com/gpu",
        quota_changes=[{"queue": "team-a", "kind": "ClusterQueue", "from": 8.0, "to": 5.0}],
    )
    idle = _idle_quota("team-a", "a100", 4.0)
    [change], fixes = kueue.changes([total, idle], ctx)
    assert change.body[-1] == {
        "op": "replace",
        "path": "/spec/resourceGroups/1/flavors/0/resources/0/nominalQuota",
        "value": 4,
    }
    assert change.findings == (total, idle)
    assert fixes[key(total)].file == fixes[key(idle)].file == change.file


def test_a_queue_not_read_or_a_line_it_lacks_gets_no_change(ctx: Context) -> None:
    gone = _idle_quota("nope", "h100", 1.0)
    lacks = _idle_quota("team-a", "l40s", 1.0)
    made, fixes = kueue.changes([gone, lacks], ctx)
    assert made == []
    assert fixes[key(gone)].reason == "ClusterQueue nope is not among the ClusterQueues read"
    assert fixes[key(lacks)].reason == (
        "ClusterQueue team-a as read has no nominalQuota of nvidia.com/gpu in flavor l40s"
    )


def test_volcano_quota_is_left_and_a_flavor_without_nodes_gets_no_change(ctx: Context) -> None:
    volcano = quota("idle_quota", system="Volcano", queue="q", flavor="", resource="nvidia.com/gpu")
    empty = quota(
        "quota_not_honoured",
        system="Kueue",
        queue="team-a",
        flavor="h100",
        resource="nvidia.com/gpu",
        flavor_nodes=0,
        flavor_allocatable=0.0,
    )
    made, fixes = kueue.changes([volcano, empty], ctx)
    assert made == []
    assert key(volcano) not in fixes  # gpuaudit.fix.queue_quota's (tests/fix/test_queue_quota.py)
    assert fixes[key(empty)].reason.startswith("the flavor matches no schedulable node")


def test_the_json_patch_fails_on_a_queue_changed_since_it_was_read(ctx: Context) -> None:
    f = _idle_quota("team-a", "h100", 6.0)
    [change], _ = kueue.changes([f], ctx)
    changed = dict(change.read or {})
    changed["spec"] = {"resourceGroups": [changed["spec"]["resourceGroups"][1]]}
    try:
        apply(changed, change.body, "json")
    except PatchError:
        pass
    else:
        raise AssertionError("a patch of a changed ClusterQueue must fail")


def test_a_sick_gpu_gets_cordon_and_drain_commands_naming_the_node_and_gpu(
    ctx: Context,
) -> None:
    node = sick("gb200-node-002")
    gpu = sick("h100-node-002", "GPU-8005", pods=("ml/train-0",))
    made, fixes = drain.changes([node, gpu], ctx)
    assert made[0].commands[1:] == (
        "k cordon gb200-node-002",
        "k drain gb200-node-002 --ignore-daemonsets",
    )
    assert made[1].commands[1:] == (
        "k cordon h100-node-002",
        "# k delete pod train-0 -n ml",
        "# On node h100-node-002: nvidia-smi -r -i 3  (GPU GPU-8005), then:",
        "# k uncordon h100-node-002",
    )
    assert made[1].title == "Take GPU GPU-8005 on node h100-node-002 out of service"
    assert fixes[key(node)].kind is ChangeKind.COMMAND


def test_a_sick_gpu_that_needs_no_drain_gets_no_change(ctx: Context) -> None:
    f = sick("n1")
    f = type(f)(**{**f.__dict__, "drains": ()})
    made, fixes = drain.changes([f], ctx)
    assert made == [] and fixes[key(f)].reason.startswith("no drain is needed")
