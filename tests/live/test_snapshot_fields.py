"""A saved snapshot keeps only the Kubernetes fields gpuaudit reads: secrets planted in every
object kind of the resource catalogue (container `env`, `last-applied-configuration`, pod
templates of jobs, managed fields, unread labels and annotations, a stray key in every object)
never reach the file, a scan of the saved snapshot equals the live scan, and the inventory built
from the kept objects equals the one built from the whole objects."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.inventory import build
from gpuaudit.inventory import columns as C
from gpuaudit.snapshot.fields import KEEP, keep_page
from gpuaudit.sources.kubernetes.resources import RESOURCES
from tests.support.apiserver import KNOWN, KubeAPIServer
from tests.support.paths import DEMO
from tests.support.promserver import Backfilled

runner = CliRunner()
SECRET = "PLANTED-SECRET"
_DATA_MAPS = {
    "labels",
    "nodeLabels",
    "nodeSelector",
    "annotations",
    "matchLabels",
    "pytorchReplicaSpecs",
    "mpiReplicaSpecs",
    "requests",
    "limits",
    "capacity",
    "allocatable",
}
"""Maps whose keys are data, not field names: a stray key is planted beside them instead."""


def _env(tag: str) -> list[dict[str, Any]]:
    return [{"name": "DB_PASSWORD", "value": f"{SECRET}-env-{tag}"}]


def _template(tag: str) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "env": _env(tag), "args": [f"--pw={SECRET}"]}
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [container]}}


def _extra_objects(ns: str) -> dict[str, list[dict[str, Any]]]:
    """An object of every gang and queue kind the scenario does not make, each with what
    gpuaudit reads of it and a pod template or spec full of secrets."""
    meta = {"namespace": ns}
    return {
        "volcano_podgroups": [
            {
                "metadata": {"name": "vpg", **meta},
                "spec": {"minMember": 4, "queue": "q"},
                "status": {"phase": "Unknown"},
            }
        ],
        "kueue_workloads": [
            {
                "metadata": {
                    "name": "wl",
                    **meta,
                    "ownerReferences": [{"kind": "JobSet", "name": "js", "controller": True}],
                },
                "spec": {
                    "queueName": "lq",
                    "podSets": [{"name": "w", "count": 4, "template": _template("wl")}],
                },
                "status": {
                    "admission": {
                        "clusterQueue": "cq",
                        "podSetAssignments": [{"name": "w", "count": 4}],
                    },
                    "conditions": [
                        {"type": "Admitted", "status": "True"},
                        {"type": "PodsReady", "status": "False", "message": SECRET},
                    ],
                },
            }
        ],
        "kueue_clusterqueues": [
            {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"note": SECRET}]}}
        ],
        "kueue_localqueues": [{"metadata": {"name": "lq", **meta}, "spec": {"clusterQueue": "cq"}}],
        # Owner keys are kept; any other label (a secret put there) is not.
        "namespaces": [
            {
                "metadata": {
                    "name": ns,
                    "labels": {"team": "ml", "example.com/secret": SECRET},
                    "annotations": {"gpuaudit.io/contact": "#ml"},
                }
            }
        ],
        "mpijobs": [
            {
                "metadata": {"name": "mpi", **meta},
                "spec": {
                    "runPolicy": {"schedulingPolicy": {"minAvailable": 5}},
                    "mpiReplicaSpecs": {
                        "Launcher": {"replicas": 1, "template": _template("launcher")},
                        "Worker": {"replicas": 4, "template": _template("worker")},
                    },
                },
                "status": {"conditions": [{"type": "Running", "status": "True"}]},
            }
        ],
        "jobsets": [
            {
                "metadata": {"name": "js", **meta},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "workers",
                            "replicas": 2,
                            "template": {"spec": {"parallelism": 4, "template": _template("js")}},
                        }
                    ]
                },
            }
        ],
        "leaderworkersets": [
            {
                "metadata": {"name": "lws", **meta},
                "spec": {
                    "replicas": 2,
                    "leaderWorkerTemplate": {"size": 4, "workerTemplate": _template("lws")},
                },
            }
        ],
        "rayclusters": [
            {
                "metadata": {"name": "ray", **meta},
                "spec": {
                    "headGroupSpec": {"template": _template("head")},
                    "workerGroupSpecs": [
                        {
                            "groupName": "g",
                            "replicas": 2,
                            "numOfHosts": 2,
                            "template": _template("ray"),
                        }
                    ],
                },
                "status": {"state": "ready"},
            }
        ],
        "resourceclaims": [
            {
                "metadata": {"name": "claim", **meta},
                "spec": {"devices": {"requests": [{"name": "gpu", "note": SECRET}]}},
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n"}
                                | {"device": "gpu-0"}
                            ]
                        }
                    },
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
                },
            }
        ],
    }


def _owner_objects(ns: str) -> dict[str, list[dict[str, Any]]]:
    """A GPU pod owned by each kind of controller gpuaudit walks (`OWNER_RESOURCES`), each
    controller with a pod template full of secrets: only GPU pods' owners are kept, so each
    allowlist is put to the test through a pod that leads to it."""
    pods: list[dict[str, Any]] = []
    out: dict[str, list[dict[str, Any]]] = {"pods": pods}

    def owned(key: str, name: str, by: tuple[str, str, str], **spec: Any) -> dict[str, Any]:
        api, kind, owner = by
        uid = f"owner-{name}"
        ref = {"apiVersion": api, "kind": kind, "name": owner, "uid": f"owner-{owner}"}
        meta = {
            "name": name,
            "namespace": ns,
            "uid": uid,
            "ownerReferences": [ref | {"controller": True}],
        }
        obj = {"metadata": meta, "spec": {"template": _template(name), **spec}}
        out.setdefault(key, []).append(obj)
        return obj

    def pod(name: str, api: str, kind: str, owner: str) -> None:
        container = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        ref = {"apiVersion": api, "kind": kind, "name": owner, "uid": f"owner-{owner}"}
        meta = {"name": name, "namespace": ns, "uid": f"pod-{name}", "ownerReferences": [ref]}
        pods.append({"metadata": meta, "spec": {"containers": [container]}})

    selector = {"selector": {"matchLabels": {"app": "x"}}}
    pod("own-rs-0", "apps/v1", "ReplicaSet", "rs")
    owned("replicasets", "rs", ("apps/v1", "Deployment", "dep"), replicas=1, **selector)
    owned("deployments", "dep", ("serving.kserve.io/v1beta1", "InferenceService", "isvc"))
    owned("inferenceservices", "isvc", ("v1", "Namespace", "none"))["spec"] = {
        "predictor": {"minReplicas": 1, "model": {"storageUri": f"s3://{SECRET}"}}
    }
    pod("own-sts-0", "apps/v1", "StatefulSet", "sts")
    owned("statefulsets", "sts", ("kubeflow.org/v1", "Notebook", "nb"), serviceName="s")
    owned("notebooks", "nb", ("v1", "Namespace", "none"))
    pod("own-job-0", "batch/v1", "Job", "job")
    owned("jobs", "job", ("batch/v1", "CronJob", "cron"), suspend=False)
    owned("cronjobs", "cron", ("v1", "Namespace", "none"))["spec"] = {
        "schedule": "0 1 * * *",
        "jobTemplate": {"spec": {"template": _template("cron")}},
    }
    for key, kind in (
        ("tfjobs", "TFJob"),
        ("xgboostjobs", "XGBoostJob"),
        ("paddlejobs", "PaddleJob"),
        ("jaxjobs", "JAXJob"),
    ):
        pod(f"own-{key}-0", "kubeflow.org/v1", kind, key)
        owned(key, key, ("v1", "Namespace", "none"))
    for objs in out.values():
        for obj in objs:
            if obj["metadata"]["ownerReferences"][0]["name"] == "none":
                del obj["metadata"]["ownerReferences"]
    return out


def _plant(value: Any, tag: str, inside: str = "") -> None:
    """A stray secret key in every object (not in maps whose keys are data)."""
    if isinstance(value, list):
        for v in value:
            _plant(v, tag, inside)
        return
    if not isinstance(value, dict):
        return
    if inside not in _DATA_MAPS:
        value["strayField"] = f"{SECRET}-{tag}"
    for k, v in list(value.items()):
        if k != "strayField":
            _plant(v, tag, k)


def _planted(k8s_dir: Path) -> dict[str, dict[str, Any]]:
    lists = {p.stem: json.loads(p.read_text()) for p in sorted(k8s_dir.glob("*.json"))}
    ns = str(lists["pods"]["items"][0]["metadata"]["namespace"])
    for key, objs in [*_extra_objects(ns).items(), *_owner_objects(ns).items()]:
        group, version, _, _, kind = KNOWN[key]
        lst = lists.setdefault(
            key, {"apiVersion": f"{group}/{version}", "kind": f"{kind}List", "items": []}
        )
        lst["items"].extend(objs)
    for key, lst in lists.items():
        for obj in lst["items"]:
            meta = obj.setdefault("metadata", {})
            notes = meta.setdefault("annotations", {})
            notes["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(
                {"spec": {"password": f"{SECRET}-last-applied-{key}"}}
            )
            notes["example.com/token"] = f"{SECRET}-annotation-{key}"
            meta["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:x": SECRET}}]
            if key == "nodes":
                # Node labels are kept whole (a pod's selector may name any): no secret there.
                status = obj.setdefault("status", {})
                status.setdefault("capacity", {})["example.com/secret"] = SECRET
            if key == "pods":
                for c in obj.get("spec", {}).get("containers", []):
                    c["env"] = _env(key)
                    c["command"] = ["sh", "-c", f"login --password {SECRET}"]
                    c.setdefault("resources", {}).setdefault("requests", {})["x/secret"] = SECRET
            _plant(obj, key)
    assert set(lists) >= {r.key for r in RESOURCES}
    return lists


@pytest.fixture(scope="module")
def planted(scenario_tsdb: Backfilled) -> dict[str, dict[str, Any]]:
    return _planted(scenario_tsdb.k8s_dir)


@pytest.fixture(scope="module")
def planted_server(
    planted: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KubeAPIServer, Path]]:
    with KubeAPIServer(copy.deepcopy(planted)) as srv:
        yield srv, srv.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")


def test_no_planted_secret_reaches_a_saved_snapshot(
    prom_url: str,
    planted_server: tuple[KubeAPIServer, Path],
    scenario_tsdb: Backfilled,
    tmp_path: Path,
) -> None:
    _, kubeconfig = planted_server
    live = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig)]
    live += ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    out = tmp_path / "s.json.gz"
    res = runner.invoke(app, ["snapshot", "save", str(out), *live, "-q"])
    assert res.exit_code == 0, res.output
    text = gzip.decompress(out.read_bytes()).decode()
    assert SECRET not in text
    assert "last-applied-configuration" not in text and "managedFields" not in text
    manifest = json.loads(text.splitlines()[0])["manifest"]
    # Every kind was read, so every kind's allowlist was put to the test.
    assert {k: v for k, v in manifest["objects"].items() if v != "ok"} == {}
    scanned = runner.invoke(app, ["scan", "-f", "json", "-q", *live])
    replay = runner.invoke(app, ["scan", "-f", "json", "-q", "--snapshot", str(out)])
    assert scanned.exit_code == replay.exit_code == 0, scanned.output + replay.output
    a, b = json.loads(scanned.stdout), json.loads(replay.stdout)
    a.pop("generated_at")
    b.pop("generated_at")
    assert a == b


def _kept(snap: snapshot.Snapshot) -> snapshot.Snapshot:
    pages = {k: [keep_page(k, copy.deepcopy(p)) for p in v] for k, v in snap.kubernetes.items()}
    return dataclasses.replace(snap, kubernetes=pages)


def _same_inventory(whole: snapshot.Snapshot) -> None:
    a, b = build(whole), build(_kept(whole))
    for table in ("pods", "nodes", "gangs", "holdings", "gpus"):
        left, right = getattr(a, table), getattr(b, table)
        assert left.equals(right), table
    assert a.capabilities == b.capabilities and a.missing == b.missing


def test_the_kept_fields_are_all_the_inventory_reads(
    planted: dict[str, dict[str, Any]], scenario_tsdb: Backfilled
) -> None:
    base = snapshot.read(scenario_tsdb.snapshot_path)
    _same_inventory(dataclasses.replace(base, kubernetes={k: [v] for k, v in planted.items()}))
    _same_inventory(snapshot.read(DEMO))
    gangs = build(_kept(dataclasses.replace(base, kubernetes={k: [v] for k, v in planted.items()})))
    # The planted gang objects were read through the allowlist: their sizes are there.
    needed = dict(zip(gangs.gangs[C.GANG_ID], gangs.gangs[C.NEEDED], strict=True))
    assert any(k.endswith("/mpi") and v == 5 for k, v in needed.items()), needed


def test_every_resource_of_the_catalogue_has_an_allowlist() -> None:
    assert set(KEEP) == {r.key for r in RESOURCES}
