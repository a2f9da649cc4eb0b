"""The owners of a scenario's pods, as the API server lists them: each pod's ReplicaSet and its
Deployment, StatefulSet (and a notebook's Kubeflow Notebook), Job (and a CronJob's or a
JobSet's), and the InferenceService the hints name (`owner_cases.HINTS`). Derived from the pods
alone, with no random draw: a scenario's other bytes stay as they were. An owner a hint marks
`unlisted` is left out (deleted since it made its pod); the ReplicaSet a hint marks
`scaled_down`, and its Deployment, are listed with `replicas: 0` for its pod that is gone
(`next_week_cases`).

Each owner's uid is derived from its kind, namespace and name (`owner_uid`), and a pod's
`ownerReferences` name it by that uid (`gpuaudit.scenario.emit`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

_UIDS = uuid.UUID("6f1d1c2e-0b7a-4d55-9d0e-3c1f5a7e9b21")
"""The namespace of the owners' uids (uuid5)."""

API = {
    "ReplicaSet": "apps/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "Notebook": "kubeflow.org/v1",
    "InferenceService": "serving.kserve.io/v1beta1",
}
LISTS = {
    "replicasets": "ReplicaSet",
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "jobs": "Job",
    "cronjobs": "CronJob",
    "notebooks": "Notebook",
    "inferenceservices": "InferenceService",
}
"""List key -> the kind it holds, in the order they are emitted."""


def owner_uid(kind: str, namespace: str, name: str) -> str:
    """The uid of a scenario's owner object."""
    return str(uuid.uuid5(_UIDS, f"{kind}/{namespace}/{name}"))


def _ref(kind: str, namespace: str, name: str, uid: str = "") -> dict[str, Any]:
    return {
        "apiVersion": API.get(kind, "v1"),
        "kind": kind,
        "name": name,
        "uid": uid or owner_uid(kind, namespace, name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


class _Owners:
    def __init__(self, hints: list[Mapping[str, Any]], jobsets: list[Mapping[str, Any]]) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in LISTS}
        self.cron = {(h["namespace"], h["job"]): h["name"] for h in hints if h["hint"] == "cronjob"}
        self.isvc = {
            (h["namespace"], h["deployment"]): h["name"]
            for h in hints
            if h["hint"] == "inferenceservice"
        }
        self.unlisted = {
            (h["kind"], h["namespace"], h["name"]) for h in hints if h["hint"] == "unlisted"
        }
        self.scaled_down = {
            (h["namespace"], h["name"]) for h in hints if h["hint"] == "scaled_down"
        }
        self.jobsets = {
            (str(j["metadata"]["namespace"]), str(j["metadata"]["name"])): str(
                j["metadata"].get("uid", "")
            )
            for j in jobsets
            if isinstance(j.get("metadata"), Mapping)
        }

    def add(
        self,
        kind: str,
        ns: str,
        name: str,
        spec: dict[str, Any],
        owner: dict[str, Any] | None,
        uid: str = "",
    ) -> dict[str, Any]:
        """The owner object (made once, the first time it is named); `uid` where the pods
        name their owner by a uid of their own (`PodSpec.owner_uid`)."""
        key = next(k for k, v in LISTS.items() if v == kind)
        obj = self.objects[key].get((ns, name))
        if obj is None:
            uid = uid or owner_uid(kind, ns, name)
            meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid}
            if owner is not None:
                meta["ownerReferences"] = [owner]
            obj = {"apiVersion": API[kind], "kind": kind, "metadata": meta, "spec": spec}
            self.objects[key][(ns, name)] = obj
        return obj


def _template(p: Any) -> dict[str, Any]:
    limits = {f"nvidia.com/mig-{prof}": str(n) for prof, n in p.mig.items()}
    if p.gpus and not p.dra:
        limits["nvidia.com/gpu"] = str(p.gpus)
    if "cpu" in p.resources:  # the CPU-starved cases' limit (`cpu_cases`), as the pod has it
        limits["cpu"] = p.resources["cpu"]
    container = {"name": p.container, "resources": {"limits": limits, "requests": dict(limits)}}
    return {"metadata": {"labels": {"app": _app(p)}}, "spec": {"containers": [container]}}


def _app(p: Any) -> str:
    return str(p.labels.get("app") or p.owner_name)


def _scaled(p: Any, replicas: int = 0) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": _app(p)}},
        "template": _template(p),
    }


def owner_lists(
    pods: list[Any], objects: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """The list responses of the owners of `pods` (a scenario's), by list key."""
    o = _Owners(list(objects.get("owner_hints", [])), list(objects.get("jobsets", [])))
    for p in pods:
        if not p.alive and (p.namespace, p.owner_name) in o.scaled_down:
            _replicaset(o, p, 0)
            continue
        if not p.alive or (p.owner_kind, p.namespace, p.owner_name) in o.unlisted:
            continue
        if p.owner_kind == "ReplicaSet":
            _replicaset(o, p)
        elif p.owner_kind == "StatefulSet":
            _statefulset(o, p)
        elif p.owner_kind == "Job":
            _job(o, p)
    rv = {"resourceVersion": "999999"}
    return {
        key: {
            "kind": f"{kind}List",
            "apiVersion": API[kind],
            "metadata": rv,
            "items": list(o.objects[key].values()),
        }
        for key, kind in LISTS.items()
    }


def _replicaset(o: _Owners, p: Any, pods: int = 1) -> None:
    ns, rs = p.namespace, p.owner_name
    h = str(p.labels.get("pod-template-hash", ""))
    deploy = rs[: -len(h) - 1] if h and rs.endswith("-" + h) else _app(p)
    isvc = o.isvc.get((ns, deploy))
    if isvc is not None:
        o.add("InferenceService", ns, isvc, {"predictor": {"minReplicas": 1}}, None)
    owner = _ref("InferenceService", ns, isvc) if isvc else None
    d = o.add("Deployment", ns, deploy, _scaled(p), owner)
    d["spec"]["replicas"] += pods
    r = o.add("ReplicaSet", ns, rs, _scaled(p), _ref("Deployment", ns, deploy), p.owner_uid)
    r["spec"]["replicas"] += pods


def _statefulset(o: _Owners, p: Any) -> None:
    ns, name = p.namespace, p.owner_name
    notebook = p.labels.get("notebook-name")
    owner = None
    if notebook:
        o.add("Notebook", ns, notebook, {"template": {"spec": _template(p)["spec"]}}, None)
        owner = _ref("Notebook", ns, notebook)
    s = o.add("StatefulSet", ns, name, {**_scaled(p), "serviceName": name}, owner, p.owner_uid)
    s["spec"]["replicas"] += 1


def _job(o: _Owners, p: Any) -> None:
    ns, name = p.namespace, p.owner_name
    owner = None
    cron = o.cron.get((ns, name))
    if cron is not None:
        spec = {"schedule": "0 1 * * *", "jobTemplate": {"spec": {"template": _template(p)}}}
        o.add("CronJob", ns, cron, spec, None)
        owner = _ref("CronJob", ns, cron)
    for (js_ns, js), uid in o.jobsets.items():
        if js_ns == ns and name.startswith(js + "-"):
            owner = _ref("JobSet", ns, js, uid) | {"apiVersion": "jobset.x-k8s.io/v1alpha2"}
    o.add("Job", ns, name, {"template": _template(p)}, owner, p.owner_uid)
