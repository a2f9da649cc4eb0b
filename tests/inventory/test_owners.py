"""The walk from a pod to the object a team edits (`gpuaudit.inventory.owners`), and the
snapshot keeping only the owners of GPU pods (`gpuaudit.snapshot.fields.PageKeeper`)."""

from __future__ import annotations

from typing import Any

from gpuaudit.inventory.owners import Outcome, build
from gpuaudit.snapshot.fields import PageKeeper, holds_gpus


def _ref(api: str, kind: str, name: str, uid: str, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": controller}


def _obj(name: str, uid: str, *owners: dict[str, Any], ns: str = "ml", **spec: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid}
    if owners:
        meta["ownerReferences"] = list(owners)
    return {"metadata": meta, "spec": dict(spec)}


def _gpu_pod(name: str, uid: str, *owners: dict[str, Any]) -> dict[str, Any]:
    pod = _obj(name, uid, *owners)
    pod["spec"] = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    return pod


def _page(api: str, kind: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": f"{kind}List", "items": list(items)}


RS = _ref("apps/v1", "ReplicaSet", "llm-5d9f", "rs-1")
DEPLOY = _ref("apps/v1", "Deployment", "llm", "dep-1")
JOB = _ref("batch/v1", "Job", "nightly-29000", "job-1")
CRON = _ref("batch/v1", "CronJob", "nightly", "cron-1")


def _lists() -> dict[str, list[dict[str, Any]]]:
    return {
        "pods": [
            _page(
                "v1",
                "Pod",
                _gpu_pod("llm-5d9f-abcde", "p1", RS),
                _gpu_pod("nightly-29000-xyz", "p2", JOB),
                _gpu_pod("scratch", "p3"),
                _gpu_pod("ksvc-pod", "p4", _ref("apps/v1", "ReplicaSet", "gone", "rs-gone")),
                _gpu_pod("ds-pod", "p5", _ref("apps/v1", "DaemonSet", "burn", "ds-1")),
                _gpu_pod("tf-0", "p6", _ref("kubeflow.org/v1", "TFJob", "tf", "tf-1")),
            )
        ],
        "replicasets": [
            _page("apps/v1", "ReplicaSet", _obj("llm-5d9f", "rs-1", DEPLOY, replicas=2))
        ],
        "deployments": [_page("apps/v1", "Deployment", _obj("llm", "dep-1", replicas=2))],
        "jobs": [_page("batch/v1", "Job", _obj("nightly-29000", "job-1", CRON))],
        "cronjobs": [_page("batch/v1", "CronJob", _obj("nightly", "cron-1", schedule="0 1 * * *"))],
    }


STATES = {
    "pods": "ok",
    "replicasets": "ok",
    "deployments": "ok",
    "jobs": "ok",
    "cronjobs": "ok",
    "tfjobs": "forbidden: tfjobs.kubeflow.org is forbidden",
}


def test_a_deployments_pod_resolves_to_the_deployment_through_its_replicaset() -> None:
    owners = build(_lists(), {"objects": STATES})
    walk = owners.walk("ml", "llm-5d9f-abcde")
    assert walk.outcome is Outcome.RESOLVED
    assert [r.kind for r in walk.chain] == ["ReplicaSet", "Deployment"]
    target = walk.target
    assert target is not None and target.describe() == "Deployment ml/llm"
    assert target.api_version == "apps/v1"
    read = owners.read(target)
    assert read is not None and read["spec"]["replicas"] == 2 and read["kind"] == "Deployment"


def test_a_cronjobs_pod_resolves_to_the_cronjob() -> None:
    walk = build(_lists(), {"objects": STATES}).walk("ml", "nightly-29000-xyz")
    assert walk.target is not None and walk.target.describe() == "CronJob ml/nightly"


def test_a_pod_without_owner_is_a_bare_pod() -> None:
    walk = build(_lists(), {"objects": STATES}).walk("ml", "scratch")
    assert walk.outcome is Outcome.BARE and walk.target is None


def test_an_owner_not_read_makes_the_walk_unread_and_says_why() -> None:
    owners = build(_lists(), {"objects": STATES})
    gone = owners.walk("ml", "ksvc-pod")
    assert gone.outcome is Outcome.UNREAD and gone.target is None
    assert gone.why == (
        "its owner ReplicaSet ml/gone is not among the replicasets read: deleted since, or left out"
    )
    ds = owners.walk("ml", "ds-pod")
    assert (
        ds.why
        == "its owner DaemonSet ml/burn is a DaemonSet (apps/v1), a kind gpuaudit does not read"
    )
    tf = owners.walk("ml", "tf-0")
    assert tf.why == (
        "its owner TFJob ml/tf was not read (tfjobs: forbidden: tfjobs.kubeflow.org is forbidden)"
    )


def test_an_owner_of_another_kind_with_the_uid_is_not_taken() -> None:
    lists = _lists()
    lists["pods"][0]["items"][0]["metadata"]["ownerReferences"] = [
        _ref("apps/v1", "StatefulSet", "llm-5d9f", "rs-1")
    ]
    walk = build(lists, {"objects": {**STATES, "statefulsets": "ok"}}).walk("ml", "llm-5d9f-abcde")
    assert walk.outcome is Outcome.UNREAD


def test_a_loop_of_owner_references_ends_as_unread() -> None:
    lists = _lists()
    lists["deployments"][0]["items"][0]["metadata"]["ownerReferences"] = [RS]
    walk = build(lists, {"objects": STATES}).walk("ml", "llm-5d9f-abcde")
    assert walk.outcome is Outcome.UNREAD and "loop" in walk.why


def test_a_snapshot_without_owner_lists_says_so() -> None:
    lists = {"pods": _lists()["pods"]}
    walk = build(lists, {"objects": {"pods": "ok"}}).walk("ml", "llm-5d9f-abcde")
    assert walk.why == (
        "its owner ReplicaSet ml/llm-5d9f was not read (the snapshot holds no replicasets)"
    )


def test_the_snapshot_keeps_only_the_owners_of_gpu_pods() -> None:
    keeper = PageKeeper()
    cpu_pod = _obj("web-1", "p9", _ref("apps/v1", "ReplicaSet", "web-1", "rs-web"))
    cpu_pod["spec"] = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}
    pods = keeper("pods", _page("v1", "Pod", _gpu_pod("a", "p1", RS), cpu_pod))
    assert len(pods["items"]) == 2  # every pod is kept
    web = _obj("web-1", "rs-web", _ref("apps/v1", "Deployment", "web", "dep-web"))
    rs = keeper(
        "replicasets", _page("apps/v1", "ReplicaSet", web, _obj("llm-5d9f", "rs-1", DEPLOY))
    )
    assert [o["metadata"]["name"] for o in rs["items"]] == ["llm-5d9f"]
    deps = keeper(
        "deployments",
        _page("apps/v1", "Deployment", _obj("web", "dep-web"), _obj("llm", "dep-1", replicas=1)),
    )
    assert [o["metadata"]["name"] for o in deps["items"]] == ["llm"]
    assert deps["items"][0]["spec"] == {"replicas": 1}


def test_the_snapshot_keeps_a_gpu_deployment_scaled_to_zero() -> None:
    # No pod leads to it; it is how a fixed finding is told scaled down from gone (issue 34).
    keeper = PageKeeper()
    keeper("pods", _page("v1", "Pod"))
    template = {"spec": _gpu_pod("t", "t")["spec"]}
    cpu = {"spec": {"containers": [{"name": "c"}]}}
    deps = keeper(
        "deployments",
        _page(
            "apps/v1",
            "Deployment",
            _obj("llm", "dep-1", replicas=0, template=template),
            _obj("web", "dep-web", replicas=0, template=cpu),
            _obj("busy", "dep-2", replicas=1, template=template),
        ),
    )
    assert [o["metadata"]["name"] for o in deps["items"]] == ["llm"]
    assert deps["items"][0]["spec"]["replicas"] == 0
    rs = keeper("replicasets", _page("apps/v1", "ReplicaSet", _obj("llm-1", "rs", replicas=0)))
    assert rs["items"] == []


def test_a_gpu_pod_is_one_that_asks_for_an_nvidia_resource_a_claim_or_a_fraction() -> None:
    assert holds_gpus(_gpu_pod("a", "1"))
    assert holds_gpus({"metadata": {}, "spec": {"resourceClaims": [{"name": "gpu"}]}})
    assert holds_gpus({"metadata": {"annotations": {"gpu-fraction": "0.5"}}, "spec": {}})
    assert not holds_gpus({"metadata": {}, "spec": {"containers": [{"name": "c"}]}})
