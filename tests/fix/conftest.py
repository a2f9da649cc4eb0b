"""Tiny inventories and findings for the change makers' tests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from gpuaudit.checks.findings import Category, Drain, Finding, Impact, Resource, Severity
from gpuaudit.fix.context import Context
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.owners import build


def ref(api: str, kind: str, name: str, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "name": name,
        "uid": f"uid-{kind}-{name}",
        "controller": controller,
    }


def obj(
    kind: str, name: str, *owners: dict[str, Any], ns: str = "ml", **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{kind}-{name}"}
    if owners:
        meta["ownerReferences"] = list(owners)
    return {"metadata": meta, "spec": dict(spec)}


def template() -> dict[str, Any]:
    gpu = {"name": "server", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"spec": {"containers": [gpu]}}


def page(api: str, kind: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": f"{kind}List", "items": list(items)}


RS = ref("apps/v1", "ReplicaSet", "llm-5d9f")
DEPLOY = ref("apps/v1", "Deployment", "llm")
SELECTOR = {"matchLabels": {"app": "llm"}}


def lists() -> dict[str, list[dict[str, Any]]]:
    """Pods of a Deployment (two), a StatefulSet, a Job, a CronJob's Job, a Notebook's
    StatefulSet, a bare pod and a pod whose ReplicaSet is gone; a ClusterQueue."""
    sts = ref("apps/v1", "StatefulSet", "embed")
    job = ref("batch/v1", "Job", "train")
    run = ref("batch/v1", "Job", "nightly-29000")
    nb_sts = ref("apps/v1", "StatefulSet", "nb")
    return {
        "pods": [
            page(
                "v1",
                "Pod",
                obj("Pod", "llm-5d9f-a", RS),
                obj("Pod", "llm-5d9f-b", RS),
                obj("Pod", "embed-0", sts),
                obj("Pod", "train-x", job),
                obj("Pod", "nightly-29000-x", run),
                obj("Pod", "nb-0", nb_sts),
                obj("Pod", "scratch"),
                obj("Pod", "orphan", ref("apps/v1", "ReplicaSet", "gone")),
            )
        ],
        "replicasets": [
            page(
                "apps/v1",
                "ReplicaSet",
                obj(
                    "ReplicaSet",
                    "llm-5d9f",
                    DEPLOY,
                    replicas=2,
                    selector=SELECTOR,
                    template=template(),
                ),
            )
        ],
        "deployments": [
            page(
                "apps/v1",
                "Deployment",
                obj("Deployment", "llm", replicas=2, selector=SELECTOR, template=template()),
            )
        ],
        "statefulsets": [
            page(
                "apps/v1",
                "StatefulSet",
                obj(
                    "StatefulSet",
                    "embed",
                    replicas=1,
                    selector=SELECTOR,
                    serviceName="embed",
                    template=template(),
                ),
                obj(
                    "StatefulSet",
                    "nb",
                    ref("kubeflow.org/v1", "Notebook", "nb"),
                    replicas=1,
                    selector=SELECTOR,
                    serviceName="nb",
                    template=template(),
                ),
            )
        ],
        "jobs": [
            page(
                "batch/v1",
                "Job",
                obj("Job", "train", template=template()),
                obj(
                    "Job",
                    "nightly-29000",
                    ref("batch/v1", "CronJob", "nightly"),
                    template=template(),
                ),
            )
        ],
        "cronjobs": [
            page(
                "batch/v1",
                "CronJob",
                obj(
                    "CronJob",
                    "nightly",
                    schedule="0 1 * * *",
                    jobTemplate={"spec": {"template": template()}},
                ),
            )
        ],
        "notebooks": [
            page("kubeflow.org/v1", "Notebook", obj("Notebook", "nb", template=template()))
        ],
        "kueue_clusterqueues": [
            page(
                "kueue.x-k8s.io/v1beta2",
                "ClusterQueue",
                {
                    "metadata": {"name": "team-a"},
                    "spec": {
                        "cohort": "all",
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {
                                        "name": "default",
                                        "resources": [{"name": "cpu", "nominalQuota": "64"}],
                                    }
                                ],
                            },
                            {
                                "coveredResources": ["nvidia.com/gpu"],
                                "flavors": [
                                    {
                                        "name": "a100",
                                        "resources": [
                                            {"name": "nvidia.com/gpu", "nominalQuota": 8}
                                        ],
                                    },
                                    {
                                        "name": "h100",
                                        "resources": [
                                            {"name": "nvidia.com/gpu", "nominalQuota": "16"}
                                        ],
                                    },
                                ],
                            },
                        ],
                    },
                },
            )
        ],
    }


STATES = dict.fromkeys(
    ("pods", "replicasets", "deployments", "statefulsets", "jobs", "cronjobs", "notebooks"),
    "ok",
) | {"kueue_clusterqueues": "ok"}


def pods_table(running: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {C.NAMESPACE: ns, C.POD: pod, C.PHASE: "Running", C.GPU_REQUEST: 1.0, C.MIG_REQUEST: ""}
            for ns, pod in running
        ],
        columns=[C.NAMESPACE, C.POD, C.PHASE, C.GPU_REQUEST, C.MIG_REQUEST],
    )


def context(
    running: list[tuple[str, str]] | None = None,
    kube: dict[str, list[dict[str, Any]]] | None = None,
    version: str = "1.34",
) -> Context:
    owners = build(kube or lists(), {"objects": STATES})
    pods = pods_table(
        running if running is not None else [("ml", "llm-5d9f-a"), ("ml", "llm-5d9f-b")]
    )
    inv = SimpleNamespace(owners=owners, pods=pods, window_hours=168.0, window_end=1795392000.0)
    return Context(inv, "USD", version)  # type: ignore[arg-type]


def idle(code: str, pod: str, ns: str = "ml", hours: float = 168.0) -> Finding:
    return Finding(
        code=code,
        severity=Severity.HIGH,
        resource=Resource("Pod", ns, pod, "node-1", 1.0),
        message=f"Pod {ns}/{pod} held 1 GPU for {hours:.0f} h at 0.4 % average engine activity.",
        impact=Impact(gpu_hours=hours, cost=hours * 2.0),
        recommendation="Scale it to zero.",
        evidence={"hours_held": hours, "owner": ""},
    )


def quota(rule: str, **evidence: Any) -> Finding:
    queue = str(evidence.get("queue", evidence.get("flavor", "")))
    return Finding(
        code="GPU090",
        severity=Severity.MEDIUM,
        resource=Resource("ClusterQueue", "", queue, "", 1.0),
        message=f"ClusterQueue {queue} holds quota.",
        impact=Impact(gpu_hours=24.0 * 7, cost=100.0),
        recommendation="Lower it.",
        evidence={"rule": rule, "owner": f"ClusterQueue/{queue}:{rule}", **evidence},
        category=Category.WASTE,
    )


def sick(node: str, gpu: str = "", pods: tuple[str, ...] = ()) -> Finding:
    return Finding(
        code="GPU070",
        severity=Severity.CRITICAL,
        resource=Resource("GPU", "", gpu or "GPU-1", node, 1.0),
        message=f"GPU 3 on node {node} reported XID 79.",
        impact=Impact(gpu_hours=10.0, cost=20.0),
        recommendation="Cordon and drain it.",
        evidence={"gpu_index": "3", "gpu_uuid": gpu or "GPU-1"},
        drains=(Drain(node, gpu),),
        pods=pods,
        category=Category.RISK,
    )


@pytest.fixture
def ctx() -> Context:
    return context()
