"""Who owns a finding among people (`gpuaudit.inventory.ownership`): the object that owns the
pod wins over the pod, the pod over its namespace; keys in their order; the contact checked for
its shape; nodes and queues read from their own objects; unknown otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.app import config
from gpuaudit.core.errors import ConfigError
from gpuaudit.inventory import ownership
from gpuaudit.inventory.owners import build
from gpuaudit.inventory.ownership import UNKNOWN, Owner

STATES = {"pods": "ok", "replicasets": "ok", "deployments": "ok", "namespaces": "ok"}


def _meta(
    name: str, ns: str = "", uid: str = "", owner: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    if uid:
        meta["uid"] = uid
    if owner:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    meta.update(kw)
    return {"metadata": meta}


def _page(api: str, kind: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": f"{kind}List", "items": list(items)}


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "llm-5d9f", "uid": "rs-1"}
DEP = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm", "uid": "dep-1"}


def _owners(
    deployment: dict[str, Any] | None = None,
    replicaset: dict[str, Any] | None = None,
    pod: dict[str, Any] | None = None,
    namespace: dict[str, Any] | None = None,
    extra: dict[str, list[dict[str, Any]]] | None = None,
) -> Any:
    kube: dict[str, list[dict[str, Any]]] = {
        "pods": [
            _page(
                "v1",
                "Pod",
                _meta("llm-5d9f-a", "ml", "pod-1", RS, **(pod or {})),
                _meta("bare", "ml", "pod-2", **(pod or {})),
            )
        ],
        "replicasets": [
            _page(
                "apps/v1", "ReplicaSet", _meta("llm-5d9f", "ml", "rs-1", DEP, **(replicaset or {}))
            )
        ],
        "deployments": [
            _page("apps/v1", "Deployment", _meta("llm", "ml", "dep-1", **(deployment or {})))
        ],
        "namespaces": [_page("v1", "Namespace", _meta("ml", **(namespace or {})))],
        **(extra or {}),
    }
    return build(kube, {"objects": STATES})


def test_the_owning_object_wins_over_the_pod_and_the_pod_over_the_namespace() -> None:
    everywhere = _owners(
        deployment={"labels": {"team": "serving"}},
        pod={"labels": {"owner": "alice"}},
        namespace={"labels": {"owner": "ml-platform"}},
    )
    # The Deployment's `team` wins although `owner` comes first in the keys: objects first.
    assert ownership.of_pod(everywhere, "ml", "llm-5d9f-a") == Owner(
        "serving", "label team of Deployment ml/llm"
    )
    # A bare pod has no owner object: its own label.
    assert ownership.of_pod(everywhere, "ml", "bare") == Owner(
        "alice", "label owner of Pod ml/bare"
    )
    only_ns = _owners(namespace={"labels": {"team": "ml-platform"}})
    assert ownership.of_pod(only_ns, "ml", "llm-5d9f-a") == Owner(
        "ml-platform", "label team of Namespace ml"
    )
    # The ReplicaSet between them counts after the Deployment, before the pod.
    middle = _owners(replicaset={"annotations": {"owner": "bob"}}, pod={"labels": {"team": "x"}})
    assert ownership.of_pod(middle, "ml", "llm-5d9f-a") == Owner(
        "bob", "annotation owner of ReplicaSet ml/llm-5d9f"
    )


def test_keys_in_order_labels_before_annotations_and_a_custom_list() -> None:
    o = _owners(
        deployment={
            "labels": {"app.kubernetes.io/part-of": "search", "team": "ranking"},
            "annotations": {"owner": "carol"},
        }
    )
    # `owner` is the first key: as an annotation it still wins over the later keys' labels.
    assert ownership.of_pod(o, "ml", "llm-5d9f-a").name == "carol"
    assert ownership.of_pod(o, "ml", "llm-5d9f-a", ("team", "owner")).name == "ranking"
    assert ownership.of_pod(o, "ml", "llm-5d9f-a", ("app.kubernetes.io/part-of",)) == Owner(
        "search", "label app.kubernetes.io/part-of of Deployment ml/llm"
    )


def test_unknown_when_nothing_names_an_owner_and_bad_values_are_no_owner() -> None:
    assert ownership.of_pod(_owners(), "ml", "llm-5d9f-a") == UNKNOWN
    assert ownership.of_pod(_owners(), "ml", "not-read") == UNKNOWN
    # A value with a control character names no one; an empty one neither: the next wins.
    o = _owners(
        deployment={"labels": {"owner": ""}, "annotations": {"team": "evil\x1b[2J"}},
        pod={"labels": {"team": "ok-team"}},
    )
    assert ownership.of_pod(o, "ml", "llm-5d9f-a").name == "ok-team"
    long = _owners(pod={"annotations": {"owner": "x" * 1000}})
    assert ownership.of_pod(long, "ml", "bare").name == "x" * ownership.MAX_NAME


def test_the_contact_is_read_from_the_naming_object_onward_and_checked() -> None:
    o = _owners(
        deployment={"labels": {"team": "serving"}},
        pod={"annotations": {"gpuaudit.io/contact": "#serving-oncall"}},
        namespace={"annotations": {"gpuaudit.io/contact": "ml@example.com"}},
    )
    assert ownership.of_pod(o, "ml", "llm-5d9f-a").contact == "#serving-oncall"
    bad = _owners(
        deployment={
            "labels": {"team": "serving"},
            "annotations": {"gpuaudit.io/contact": "<script>@x"},
        },
        namespace={"annotations": {"gpuaudit.io/contact": "ml@example.com"}},
    )
    assert ownership.of_pod(bad, "ml", "llm-5d9f-a").contact == "ml@example.com"
    # Unknown owner, a contact still.
    assert ownership.of_pod(
        _owners(namespace={"annotations": {"gpuaudit.io/contact": "ml@example.com"}}),
        "ml",
        "llm-5d9f-a",
    ) == Owner(None, "", "ml@example.com")
    for good in ("a.b+c@example.co.uk", "#gpu-team", "#x"):
        assert ownership.valid_contact(good)
    for wrong in ("a@b", "#", "# space", "javascript:alert(1)", "a@b.c\n", "x" * 300 + "@a.com"):
        assert not ownership.valid_contact(wrong)


def test_cluster_scoped_findings_read_their_own_object() -> None:
    extra = {
        "nodes": [_page("v1", "Node", _meta("gpu-1", labels={"team": "infra"}))],
        "kueue_clusterqueues": [
            _page("kueue.x-k8s.io/v1beta2", "ClusterQueue", _meta("cq", labels={"owner": "q-team"}))
        ],
        "kai_queues": [
            _page("scheduling.run.ai/v2", "Queue", _meta("kq", annotations={"team": "k"}))
        ],
    }
    o = _owners(namespace={"labels": {"team": "ml-platform"}}, extra=extra)
    assert ownership.of_resource(o, "Node", "", "gpu-1") == Owner(
        "infra", "label team of Node gpu-1"
    )
    assert ownership.of_resource(o, "GPU", "", "GPU-abc", node="gpu-1").name == "infra"
    assert ownership.of_resource(o, "ClusterQueue", "", "cq").name == "q-team"
    assert ownership.of_resource(o, "Queue", "", "kq").name == "k"
    assert ownership.of_resource(o, "Node", "", "gpu-2") == UNKNOWN
    assert ownership.of_resource(o, "ResourceFlavor", "", "h100") == UNKNOWN
    # A gang: its pods' owner, else its namespace's.
    assert (
        ownership.of_resource(o, "PodGroup", "ml", "g", pods=("ml/llm-5d9f-a",)).name
        == "ml-platform"
    )
    assert ownership.of_resource(o, "PodGroup", "other", "g") == UNKNOWN


def test_owner_keys_are_checked_once_by_the_resolver() -> None:
    cfg = config.for_scan({"demo": True, "owner_keys": ["team", "example.com/owner"]})
    assert cfg.settings.owner_keys == ("team", "example.com/owner")
    assert config.for_scan({"demo": True}).settings.owner_keys == ownership.DEFAULT_KEYS
    for bad, why in (
        (["bad key"], "is not a Kubernetes label or annotation key"),
        (["team", "team"], "names a key twice"),
        ([f"k{i}" for i in range(17)], "at most 16"),
    ):
        with pytest.raises(ConfigError, match=why):
            config.for_scan({"demo": True, "owner_keys": bad})
