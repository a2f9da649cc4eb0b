"""The feasibility model, rule by rule, with the scheduler's own semantics (the cases follow
`k8s.io/api/core/v1/toleration_test.go`, `k8s.io/component-helpers/scheduling/corev1/
nodeaffinity/nodeaffinity_test.go` and the TaintToleration, NodeUnschedulable and
NodeResourcesFit plugins)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.inventory import kube
from gpuaudit.inventory.feasibility import (
    Constraints,
    NodeFacts,
    Placement,
    Requirement,
    Taint,
    Term,
    Toleration,
    refusal,
    untolerated,
)
from tests.support.factories import Series, gpu_labels, inventory, make_node, make_pod

GPU = "nvidia.com/gpu"


# ---- tolerations (Toleration.ToleratesTaint) ------------------------------------------------
@pytest.mark.parametrize(
    "tol, taint, ok",
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "w", "NoSchedule"), False),
        (Toleration("k", "Exists", "", "NoSchedule"), Taint("k", "anything", "NoSchedule"), True),
        (Toleration("k", "Exists", "", "NoSchedule"), Taint("other", "v", "NoSchedule"), False),
        (Toleration("", "Exists", "", ""), Taint("any", "thing", "NoExecute"), True),
        (Toleration("", "Exists", "", "NoSchedule"), Taint("any", "x", "NoExecute"), False),
        (Toleration("k", "Exists", "", ""), Taint("k", "v", "NoExecute"), True),
        (Toleration("k", "Equal", "v", "NoExecute"), Taint("k", "v", "NoSchedule"), False),
        # Lt/Gt sit behind an alpha feature gate, off by default.
        (Toleration("k", "Gt", "1", "NoSchedule"), Taint("k", "5", "NoSchedule"), False),
        (Toleration("k", "Bogus", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), False),
    ],
)
def test_toleration_matches_like_the_api(tol: Toleration, taint: Taint, ok: bool) -> None:
    assert tol.tolerates(taint) is ok


def test_only_noschedule_and_noexecute_taints_block() -> None:
    prefer = Taint("spot", "true", "PreferNoSchedule")
    no_sched = Taint("gpu", "reserved", "NoSchedule")
    no_exec = Taint("broken", "", "NoExecute")
    assert untolerated([prefer], []) is None
    assert untolerated([prefer, no_sched], []) == no_sched
    assert untolerated([no_exec], []) == no_exec
    assert untolerated([no_sched, no_exec], [Toleration("gpu", "Exists")]) == no_exec
    assert untolerated([no_sched, no_exec], [Toleration("", "Exists")]) is None


def _node(**kw: Any) -> NodeFacts:
    kw.setdefault("allocatable", {GPU: 8.0})
    return NodeFacts("n1", **kw)


def test_refusal_names_the_untolerated_taint_as_the_scheduler_does() -> None:
    node = _node(taints=(Taint("dedicated", "inference", "NoSchedule"),))
    assert refusal(Constraints(), {GPU: 4}, node) == "untolerated taint {dedicated: inference}"
    tol = Constraints(tolerations=(Toleration("dedicated", "Equal", "inference", "NoSchedule"),))
    assert refusal(tol, {GPU: 4}, node) == ""


def test_cordoned_node_refused_unless_the_unschedulable_taint_is_tolerated() -> None:
    node = _node(unschedulable=True)
    assert refusal(Constraints(), {GPU: 1}, node) == "cordoned"
    tol = Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")
    assert refusal(Constraints(tolerations=(tol,)), {GPU: 1}, node) == ""
    assert refusal(Constraints(tolerations=(Toleration("", "Exists"),)), {GPU: 1}, node) == ""


# ---- node selector and required node affinity ----------------------------------------------
LABELS = {"zone": "a", "gpu": "h100", "mem": "80", "neg": "-3", "big": "9223372036854775808"}


@pytest.mark.parametrize(
    "req, ok",
    [
        (Requirement("gpu", "In", ("h100", "h200")), True),
        (Requirement("gpu", "In", ("l40s",)), False),
        (Requirement("absent", "In", ("x",)), False),
        (Requirement("gpu", "NotIn", ("l40s",)), True),
        (Requirement("gpu", "NotIn", ("h100",)), False),
        (Requirement("absent", "NotIn", ("x",)), True),
        (Requirement("zone", "Exists"), True),
        (Requirement("absent", "Exists"), False),
        (Requirement("absent", "DoesNotExist"), True),
        (Requirement("zone", "DoesNotExist"), False),
        (Requirement("mem", "Gt", ("40",)), True),
        (Requirement("mem", "Gt", ("80",)), False),
        (Requirement("mem", "Lt", ("+81",)), True),
        (Requirement("neg", "Lt", ("0",)), True),
        (Requirement("zone", "Gt", ("1",)), False),  # not an integer label
        (Requirement("big", "Gt", ("1",)), False),  # beyond int64
        (Requirement("absent", "Lt", ("1",)), False),
    ],
)
def test_requirement_operators(req: Requirement, ok: bool) -> None:
    assert req.valid()
    assert Term((req,)).matches(LABELS, "n1") is ok


@pytest.mark.parametrize(
    "req",
    [
        Requirement("gpu", "In", ()),
        Requirement("gpu", "NotIn", ()),
        Requirement("gpu", "Exists", ("h100",)),
        Requirement("gpu", "DoesNotExist", ("x",)),
        Requirement("mem", "Gt", ("1", "2")),
        Requirement("mem", "Lt", ("eighty",)),
        Requirement("gpu", "Equals", ("h100",)),
    ],
)
def test_a_requirement_the_api_would_not_parse_makes_its_term_match_nothing(
    req: Requirement,
) -> None:
    assert not req.valid()
    assert not Term((req, Requirement("zone", "Exists"))).matches(LABELS, "n1")


def test_terms_are_ored_and_expressions_anded() -> None:
    gpu = Requirement("gpu", "In", ("h100",))
    wrong_zone = Requirement("zone", "In", ("b",))
    both = Constraints(required=(Term((gpu, wrong_zone)),))
    assert not both.selects(LABELS, "n1")  # ANDed: one fails
    either = Constraints(required=(Term((wrong_zone,)), Term((gpu,))))
    assert either.selects(LABELS, "n1")  # ORed: one matches


def test_empty_terms_match_nothing_and_no_affinity_matches_all() -> None:
    assert Constraints().selects(LABELS, "n1")
    assert not Constraints(required=()).selects(LABELS, "n1")
    assert not Constraints(required=(Term(),)).selects(LABELS, "n1")
    assert Constraints(required=(Term(), Term((Requirement("zone", "Exists"),)))).selects(
        LABELS, "n1"
    )


def test_match_fields_on_the_node_name() -> None:
    pin = Term(fields=(Requirement("metadata.name", "In", ("n1",)),))
    avoid = Term(fields=(Requirement("metadata.name", "NotIn", ("n1",)),))
    assert pin.matches(LABELS, "n1") and not pin.matches(LABELS, "n2")
    assert not avoid.matches(LABELS, "n1") and avoid.matches(LABELS, "n2")
    two = Term(fields=(Requirement("metadata.name", "In", ("n1", "n2")),))
    assert not two.matches(LABELS, "n1")  # matchFields take exactly one value
    exists = Term(fields=(Requirement("metadata.name", "Exists"),))
    assert not exists.matches(LABELS, "n1")  # only In and NotIn on fields


def test_node_selector_and_affinity_both_apply() -> None:
    c = Constraints(
        node_selector=(("gpu", "h100"),),
        required=(Term((Requirement("zone", "In", ("a",)),)),),
    )
    assert c.selects(LABELS, "n1")
    assert not c.selects({**LABELS, "zone": "b"}, "n1")
    assert not c.selects({"zone": "a"}, "n1")
    assert refusal(c, {GPU: 1}, _node(labels={"zone": "b"})) == "node selector or affinity"


# ---- resources -----------------------------------------------------------------------------
def test_allocatable_per_extended_resource() -> None:
    node = _node(allocatable={GPU: 8.0, "nvidia.com/mig-1g.10gb": 2.0})
    assert refusal(Constraints(), {GPU: 8}, node) == ""
    assert refusal(Constraints(), {GPU: 9}, node) == "allocatable nvidia.com/gpu below 9"
    assert refusal(Constraints(), {"nvidia.com/mig-1g.10gb": 2}, node) == ""
    assert refusal(Constraints(), {"nvidia.com/mig-2g.20gb": 1}, node).startswith("allocatable")
    shared = _node(allocatable={"nvidia.com/gpu.shared": 40.0})
    assert refusal(Constraints(), {"nvidia.com/gpu.shared": 1}, shared) == ""
    assert refusal(Constraints(), {GPU: 1}, shared).startswith("allocatable")


def test_replicated_gpus_offer_no_whole_gpu() -> None:
    assert _node(allocatable={GPU: 80.0}, replicas=10).whole_gpus == 0
    assert _node(allocatable={GPU: 8.0}).whole_gpus == 8


def _pod(node: str, phase: str, gpus: float) -> Any:
    from gpuaudit.inventory.feasibility import PodFacts

    return PodFacts(Constraints(), {GPU: gpus}, node, phase)


def test_free_counts_bound_pods_until_they_end_and_stays_within_allocatable() -> None:
    pods = {
        ("a", "running"): _pod("n1", "Running", 2),
        ("a", "starting"): _pod("n1", "Pending", 2),  # bound, not yet running: counts
        ("a", "done"): _pod("n1", "Succeeded", 4),
        ("a", "failed"): _pod("n1", "Failed", 4),
        ("a", "queued"): _pod("", "Pending", 8),  # not bound
        ("b", "over"): _pod("n2", "Running", 12),
    }
    pl = Placement([_node(), NodeFacts("n2", allocatable={GPU: 8.0})], pods)
    assert pl.free("n1") == 4
    assert pl.free("n2") == 0  # never below 0
    assert pl.free("unknown") == 0
    assert Placement([_node()], {}).free("n1") == 8  # never above allocatable


# ---- reading the objects -------------------------------------------------------------------
def test_requests_count_init_containers_as_the_scheduler_does() -> None:
    def c(n: int, **kw: Any) -> dict[str, Any]:
        return {"name": "x", "resources": {"limits": {GPU: str(n)}}, **kw}

    pod = {"metadata": {}, "spec": {"containers": [c(1), c(1)], "initContainers": [c(4)]}}
    assert kube.extended_requests(pod) == {GPU: 4.0}  # the plain init container's peak
    sidecar = {
        "metadata": {},
        "spec": {"containers": [c(2)], "initContainers": [c(1, restartPolicy="Always"), c(2)]},
    }
    assert kube.extended_requests(sidecar) == {GPU: 3.0}  # sidecar runs beside the apps


def _objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tainted = make_node("t", gpus=8)
    tainted["spec"]["taints"] = [
        {"key": "dedicated", "value": "inference", "effect": "NoSchedule"},
        {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    ]
    zoned = make_node("z", gpus=8)
    zoned["metadata"]["labels"]["zone"] = "b"
    nodes = [tainted, zoned, make_node("c", gpus=8, cordoned=True), make_node("s", gpus=2)]
    waiting = make_pod("w-0", node="", phase="Pending", gpus=4)
    waiting["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}
                ]
            }
        }
    }
    tolerant = make_pod("tol-0", node="", phase="Pending", gpus=1)
    tolerant["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return nodes, [waiting, tolerant]


def test_the_model_reads_taints_affinity_and_cordons_from_the_api_objects() -> None:
    nodes, pods = _objects()
    inv = inventory([Series(gpu_labels(), act=[0.0] * 2)], 2, pods=pods, nodes=nodes)
    pl = Placement.of(inv)
    fit, refused = pl.candidates(("ml", "w-0"))
    assert fit == []
    assert refused == {
        "c": "cordoned",
        "s": "allocatable nvidia.com/gpu below 4",
        "t": "untolerated taint {dedicated: inference}",
        "z": "node selector or affinity",
    }
    fit, _ = pl.candidates(("ml", "tol-0"))
    assert fit == ["s", "t", "z"]
    assert pl.candidates(("ml", "nobody")) == ([], {})


@pytest.mark.parametrize(
    "required, matches",
    [
        (None, True),
        ({}, False),
        ({"nodeSelectorTerms": []}, False),
        ({"nodeSelectorTerms": [{}]}, False),
        ({"nodeSelectorTerms": [{"matchExpressions": ["not-an-object"]}]}, False),
        (
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]},
            True,
        ),
    ],
)
def test_required_affinity_as_read_from_the_pod(
    required: dict[str, Any] | None, matches: bool
) -> None:
    spec: dict[str, Any] = {}
    if required is not None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    assert kube.constraints(spec).selects(LABELS, "n1") is matches
