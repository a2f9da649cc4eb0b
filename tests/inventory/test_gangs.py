from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.inventory import columns as C
from gpuaudit.inventory import gangs, kube
from tests.support.factories import Series, gpu_labels, inventory, make_pod


def obj(
    kind: str,
    name: str,
    spec: dict[str, Any],
    status: dict[str, Any] | None = None,
    ns: str = "ml",
    **meta: Any,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": spec,
        "status": status or {},
    }


def pages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"items": items}]


def build_gangs(
    lists: dict[str, list[dict[str, Any]]], pods: list[dict[str, Any]]
) -> tuple[list[gangs.Gang], dict[tuple[str, str], str]]:
    """`gangs.build` on list pages and pods, indexed by kind as the inventory builder does."""
    return gangs.build(kube.index({**lists, "pods": pages(pods)}))


def by_id(found: list[gangs.Gang]) -> dict[str, gangs.Gang]:
    return {g.id: g for g in found}


def test_volcano_podgroup_by_annotation_with_phase_unknown_signal() -> None:
    pg = obj("PodGroup", "pg", {"minMember": 4}, {"phase": "Unknown", "running": 2})
    pod = make_pod("w-0", annotations={"scheduling.k8s.io/group-name": "pg"})
    other = make_pod("w-1", annotations={"scheduling.volcano.sh/group-name": "pg"})
    found, member = build_gangs({"volcano_podgroups": pages([pg])}, [pod, other])
    (g,) = found
    assert (g.kind, g.needed, g.phase) == ("PodGroup", 4, "Unknown")
    assert "phase Unknown" in g.signal
    assert member == {("ml", "w-0"): g.id, ("ml", "w-1"): g.id}


@pytest.mark.parametrize(
    "phase, signalled", [("Scheduling", True), ("Unknown", True), ("Running", False)]
)
def test_coscheduling_podgroup_signals(phase: str, signalled: bool) -> None:
    pg = obj("PodGroup", "cg", {"minMember": 3}, {"phase": phase})
    pod = make_pod("a", labels={"scheduling.x-k8s.io/pod-group": "cg"})
    (g,), member = build_gangs({"coscheduling_podgroups": pages([pg])}, [pod])
    assert g.group == "scheduling.x-k8s.io" and g.needed == 3
    assert bool(g.signal) is signalled
    assert member[("ml", "a")] == g.id


def test_legacy_coscheduling_labels_give_the_size_without_the_object() -> None:
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "old",
        "pod-group.scheduling.sigs.k8s.io/min-available": "2",
    }
    (g,), _ = build_gangs({}, [make_pod("a", labels=labels)])
    assert (g.kind, g.name, g.needed) == ("PodGroup", "old", 2)
    assert "min-available" in g.source


def test_kueue_workload_admitted_without_pods_ready_owned_by_a_job() -> None:
    wl = obj(
        "Workload",
        "job-train-1a2b3",
        {"podSets": [{"name": "main", "count": 4}]},
        {
            "admission": {"podSetAssignments": [{"name": "main", "count": 3}]},
            "conditions": [
                {"type": "Admitted", "status": "True"},
                {"type": "PodsReady", "status": "False"},
            ],
        },
        ownerReferences=[{"kind": "Job", "name": "train", "controller": True}],
    )
    pod = make_pod("train-0-x", owner=("Job", "train"))
    (g,), member = build_gangs({"kueue_workloads": pages([wl])}, [pod])
    # Partial admission: the admitted count is what the gang needs.
    assert (g.kind, g.name, g.needed, g.phase) == ("Workload", "job-train-1a2b3", 3, "Admitted")
    assert g.signal == "Kueue Workload Admitted without PodsReady"
    assert member[("ml", "train-0-x")] == g.id


def test_kueue_plain_pod_group_from_labels_alone() -> None:
    meta = {
        "labels": {"kueue.x-k8s.io/pod-group-name": "grp"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
    }
    pods = [make_pod(f"p{i}", **meta) for i in range(2)]
    (g,), member = build_gangs({}, pods)
    assert (g.kind, g.name, g.needed) == ("Workload", "grp", 3)
    assert len(member) == 2


def test_pytorchjob_min_available_wins_over_replicas_and_volcano_outranks_it() -> None:
    job = obj(
        "PyTorchJob",
        "ft",
        {
            "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 4}},
        },
        {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Running", "status": "True"},
            ]
        },
    )
    plain = obj(
        "PyTorchJob", "plain", {"pytorchReplicaSpecs": {"Master": {}, "Worker": {"replicas": 2}}}
    )
    pod = make_pod("ft-worker-0", labels={"training.kubeflow.org/job-name": "ft"})
    pg = obj("PodGroup", "plain", {"minMember": 5})
    gang_pod = make_pod(
        "plain-worker-0",
        labels={"training.kubeflow.org/job-name": "plain"},
        annotations={"scheduling.k8s.io/group-name": "plain"},
    )
    found, member = build_gangs(
        {"pytorchjobs": pages([job, plain]), "volcano_podgroups": pages([pg])}, [pod, gang_pod]
    )
    g = by_id(found)
    ft = g["kubeflow.org/PyTorchJob/ml/ft"]
    assert (ft.needed, ft.phase) == (3, "Running") and "minAvailable" in ft.source
    assert g["kubeflow.org/PyTorchJob/ml/plain"].needed == 3  # 1 master by default + 2
    assert member[("ml", "ft-worker-0")] == ft.id
    assert member[("ml", "plain-worker-0")] == "scheduling.volcano.sh/PodGroup/ml/plain"


def test_mpijob_jobset_lws_and_raycluster_sizes() -> None:
    lists = {
        "mpijobs": pages(
            [
                obj(
                    "MPIJob",
                    "mpi",
                    {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 4}}},
                )
            ]
        ),
        "jobsets": pages(
            [
                obj(
                    "JobSet",
                    "js",
                    {
                        "replicatedJobs": [
                            {"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 4}}},
                            {"name": "driver", "template": {"spec": {}}},
                        ]
                    },
                )
            ]
        ),
        "leaderworkersets": pages(
            [obj("LeaderWorkerSet", "lws", {"replicas": 2, "leaderWorkerTemplate": {"size": 3}})]
        ),
        "rayclusters": pages(
            [
                obj(
                    "RayCluster",
                    "rc",
                    {"workerGroupSpecs": [{"replicas": 2, "numOfHosts": 2}, {"replicas": 1}]},
                )
            ]
        ),
    }
    pods = [
        make_pod(
            "mpi-worker-0",
            owner=("MPIJob", "mpi"),
            labels={"training.kubeflow.org/job-name": "mpi"},
        ),
        make_pod(
            "js-w-0-0", labels={"jobset.sigs.k8s.io/jobset-name": "js"}, owner=("Job", "js-w-0")
        ),
        make_pod(
            "lws-1-2",
            labels={
                "leaderworkerset.sigs.k8s.io/name": "lws",
                "leaderworkerset.sigs.k8s.io/group-index": "1",
            },
        ),
        make_pod("rc-worker-x", labels={"ray.io/cluster": "rc"}),
    ]
    found, member = build_gangs(lists, pods)
    g = by_id(found)
    assert g["kubeflow.org/MPIJob/ml/mpi"].needed == 5
    assert g["jobset.x-k8s.io/JobSet/ml/js"].needed == 9
    assert g["leaderworkerset.x-k8s.io/LeaderWorkerSet/ml/lws-1"].needed == 3
    # A group without pods holds no GPU: it is not made (replicas alone allocate nothing).
    assert "leaderworkerset.x-k8s.io/LeaderWorkerSet/ml/lws-0" not in g
    assert g["ray.io/RayCluster/ml/rc"].needed == 6
    assert member[("ml", "mpi-worker-0")] == "kubeflow.org/MPIJob/ml/mpi"
    assert member[("ml", "js-w-0-0")] == "jobset.x-k8s.io/JobSet/ml/js"
    assert member[("ml", "lws-1-2")] == "leaderworkerset.x-k8s.io/LeaderWorkerSet/ml/lws-1"
    assert member[("ml", "rc-worker-x")] == "ray.io/RayCluster/ml/rc"


def test_unknown_size_when_nothing_says() -> None:
    pod = make_pod("x", labels={"jobset.sigs.k8s.io/jobset-name": "gone"})
    (g,), _ = build_gangs({}, [pod])
    assert g.needed is None


def test_inventory_carries_gangs_and_the_pod_gang_column() -> None:
    pg = obj("PodGroup", "pg", {"minMember": 2}, {"phase": "Running"})
    pods = [
        make_pod("a", annotations={"scheduling.k8s.io/group-name": "pg"}),
        make_pod("solo"),
    ]
    s = Series(gpu_labels(pod="a", namespace="ml"), act=[0.5] * 3)
    inv = inventory([s], 3, pods=pods, lists={"volcano_podgroups": [pg]})
    assert list(inv.gangs[C.GANG_ID]) == ["scheduling.volcano.sh/PodGroup/ml/pg"]
    row = inv.gangs.iloc[0]
    assert (row[C.GANG_KIND], row[C.GANG_NAME], row[C.NEEDED]) == ("PodGroup", "pg", 2.0)
    gang_of = dict(zip(inv.pods[C.POD], inv.pods[C.GANG], strict=True))
    assert gang_of == {"a": "scheduling.volcano.sh/PodGroup/ml/pg", "solo": ""}
    assert "kubernetes.volcano_podgroups" in inv.capabilities
    assert "kubernetes.kueue_workloads" in inv.missing


def test_gang_table_is_empty_without_kubernetes() -> None:
    inv = inventory([Series(gpu_labels(), act=[0.0])], 1)
    assert inv.gangs.empty and list(inv.gangs.columns)[0] == C.GANG_ID


# ---- sizes from objects are bounded (issue 20) ------------------------------------------------


def test_two_billion_leaderworkerset_replicas_allocate_nothing() -> None:
    """Any tenant may create a LeaderWorkerSet of 2,000,000,000 replicas (5.8 GB, then
    MemoryError): groups are made only where pods are."""
    lws = obj("LeaderWorkerSet", "big", {"replicas": 2_000_000_000})
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "big",
        "leaderworkerset.sigs.k8s.io/group-index": "1999999",  # no label of pods is trusted
    }
    found, member = build_gangs({"leaderworkersets": pages([lws])}, [make_pod("w", labels=labels)])
    assert [g.name for g in found] == ["big-1999999"]
    assert member[("ml", "w")] == found[0].id
    found, _ = build_gangs({"leaderworkersets": pages([lws])}, [])
    assert found == []


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("PodGroup", {"minMember": 10**12}),
        (
            "JobSet",
            {"replicatedJobs": [{"replicas": 10**6, "template": {"spec": {"parallelism": 10**6}}}]},
        ),
        ("RayCluster", {"workerGroupSpecs": [{"replicas": 10**9, "numOfHosts": 10**9}]}),
    ],
)
def test_gang_sizes_past_the_bound_are_unknown_with_a_note(kind: str, spec: dict[str, Any]) -> None:
    key = {"PodGroup": "volcano_podgroups", "JobSet": "jobsets", "RayCluster": "rayclusters"}[kind]
    notes: list[str] = []
    found, _ = gangs.build(kube.index({key: pages([obj(kind, "g", spec)])}), notes)
    (g,) = found
    assert g.needed is None
    assert len(notes) == 1 and "more than the 100,000 allowed (GPUAUDIT_MAX_GANG_SIZE)" in notes[0]


@pytest.mark.parametrize("text", ["²", "٣", "8.0", "-1", "1e3", " "])
def test_digit_like_sizes_are_no_sizes(text: str) -> None:
    """Issue 20: `"²".isdigit()` is true and `int("²")` fails: a Kueue pod-group total count of
    `²` was an internal error."""
    pod = make_pod(
        "p",
        labels={"kueue.x-k8s.io/pod-group-name": "g"},
        annotations={"kueue.x-k8s.io/pod-group-total-count": text},
    )
    notes: list[str] = []
    (g,), _ = gangs.build(kube.index({"pods": pages([pod])}), notes)
    assert g.needed is None
    assert (
        notes
        == [
            f"pod ml/p: annotation kueue.x-k8s.io/pod-group-total-count {text!r} is not a count; "
            "the gang's size is unknown"
        ]
        or text == " "
    )


@pytest.mark.parametrize(
    ("count", "read", "note"),
    [
        ("8", 8.0, None),
        ("1e9", 0.0, "is more than the 1,024 GPUs one node may hold"),
        ("nan", 0.0, "is not a count"),
        ("Infinity", 0.0, "is not a count"),
        ("-5", 0.0, "is not a count"),
        ("²", 0.0, "is not a count"),
        (True, 0.0, "is not a count"),
    ],
)
def test_node_gpu_counts_are_bounded_by_what_a_node_holds(
    count: object, read: float, note: str | None
) -> None:
    """Issue 20: a node label `nvidia.com/gpu.count: "1e9"` grew to 24 GB; `nan` and
    `Infinity` were internal errors."""
    node = {
        "metadata": {"name": "n", "labels": {"nvidia.com/gpu.count": count}},
        "status": {"allocatable": {"nvidia.com/gpu": count}, "capacity": {"nvidia.com/gpu": "8"}},
    }
    notes: list[str] = []
    row = kube.node_row(node, notes)
    assert row["gpu_count"] == read and row["allocatable_gpu"] == read
    assert row["capacity_gpu"] == 8.0
    if note is None:
        assert notes == []
    else:
        assert len(notes) == 2 and all(note in n for n in notes)
        assert notes[0].startswith("node n: label nvidia.com/gpu.count")


def test_the_node_bound_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAUDIT_MAX_NODE_GPUS", "4")
    node = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.count": "8"}}}
    notes: list[str] = []
    assert kube.node_row(node, notes)["gpu_count"] == 0.0
    assert "more than the 4 GPUs one node may hold" in notes[0]


def test_a_gpu_label_spelled_with_other_digits_is_no_index() -> None:
    """Issue 20: a DCGM `gpu` label `²` was an internal error in the topology stage."""
    s = Series(gpu_labels(uuid="GPU-0", gpu="²", pod="p", namespace="ml"), act=[0.5] * 4)
    inv = inventory([s], hours=4)
    assert inv.holdings[C.GPU_INDEX].tolist() == [""]
