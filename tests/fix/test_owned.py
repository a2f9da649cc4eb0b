"""GPU001/GPU002's changes: made to the object a team edits, or a command where there is none."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from gpuaudit.fix import owned
from gpuaudit.fix.changes import ChangeKind, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.plans import _validated
from gpuaudit.inventory.owners import build
from tests.fix.conftest import STATES, context, idle, lists, obj, page, ref


def test_a_deployment_whose_every_gpu_pod_is_idle_is_scaled_to_zero(ctx: Context) -> None:
    a, b = idle("GPU001", "llm-5d9f-a"), idle("GPU002", "llm-5d9f-b", hours=20.0)
    made, fixes = owned.changes([a, b], ctx)
    [change] = made
    assert change.kind is ChangeKind.PATCH and change.patch_type == "strategic"
    assert change.title == "Scale Deployment ml/llm to zero"
    assert change.file == f"GPU001-{change.file.split('-')[1]}-deployment-ml-llm.yaml"
    assert change.body == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"replicas": 0},
    }
    assert change.findings == (a, b)
    # Both pods' GPU-hours, at the window's rate (a week's window: as they are).
    assert change.savings.gpu_hours == 188.0 and change.savings.cost == 376.0
    assert "drops its traffic" in change.risk and "--replicas=2" in change.risk
    assert fixes[key(a)].file == fixes[key(b)].file == change.file
    kept, why = _validated(change, "1.34")
    assert kept is not None and kept.validated == "Kubernetes 1.34", why


def test_a_deployment_with_a_busy_pod_gets_no_change(ctx: Context) -> None:
    a = idle("GPU001", "llm-5d9f-a")
    made, fixes = owned.changes([a], ctx)
    assert made == []
    assert fixes[key(a)].kind is None
    assert fixes[key(a)].reason.startswith("1 of the 2 pods of Deployment ml/llm holding GPUs")


def test_a_job_of_its_own_is_suspended() -> None:
    f = idle("GPU002", "train-x")
    [change], _ = owned.changes([f], context(running=[("ml", "train-x")]))
    assert change.title == "Suspend Job ml/train"
    assert change.body["spec"] == {"suspend": True}
    assert _validated(change, "1.30")[0] is not None


def test_a_cronjobs_run_is_suspended_by_a_command_not_a_patch() -> None:
    f = idle("GPU001", "nightly-29000-x")
    [change], fixes = owned.changes([f], context(running=[]))
    assert change.kind is ChangeKind.COMMAND and change.file == "commands.sh"
    assert change.commands[-1] == (
        'k patch job nightly-29000 -n ml --type merge -p \'{"spec":{"suspend":true}}\''
    )
    assert "would stop the runs to come" in fixes[key(f)].reason


def test_a_bare_pod_and_an_unread_owner_get_a_commented_deletion_and_say_why() -> None:
    bare, orphan = idle("GPU001", "scratch"), idle("GPU001", "orphan")
    made, fixes = owned.changes([bare, orphan], context(running=[]))
    assert [c.kind for c in made] == [ChangeKind.COMMAND, ChangeKind.COMMAND]
    assert made[0].commands == (
        "# Bare pod ml/scratch: nothing recreates it once deleted.",
        "# k delete pod scratch -n ml",
    )
    assert fixes[key(bare)].reason.startswith("pod ml/scratch is a bare pod (no owner)")
    assert fixes[key(orphan)].reason.startswith(
        "no patch: its owner ReplicaSet ml/gone is not among the replicasets read"
    )
    assert made[1].commands[-1] == "# k delete pod orphan -n ml"


def test_a_notebook_is_stopped_by_its_annotation_and_an_inference_service_gets_none() -> None:
    f = idle("GPU001", "nb-0")
    [change], fixes = owned.changes([f], context(running=[]))
    assert change.kind is ChangeKind.COMMAND and change.title == "Stop Notebook ml/nb"
    assert change.commands[-1] == (
        "k annotate notebooks.kubeflow.org nb -n ml kubeflow-resource-stopped=2026-11-23T00:00:00Z"
    )
    assert "kubeflow-resource-stopped-" in change.risk
    assert "scales it to zero while the annotation" in fixes[key(f)].reason
    kube = lists()
    isvc = ref("serving.kserve.io/v1beta1", "InferenceService", "chat")
    predictor = ref("apps/v1", "Deployment", "chat-predictor")
    kube["inferenceservices"] = [
        page("serving.kserve.io/v1beta1", "InferenceService", obj("InferenceService", "chat"))
    ]
    kube["deployments"][0]["items"].append(obj("Deployment", "chat-predictor", isvc))
    kube["pods"][0]["items"].append(obj("Pod", "chat-predictor-0", predictor))
    g = idle("GPU001", "chat-predictor-0")
    states = {**STATES, "inferenceservices": "ok"}
    owners = build(kube, {"objects": states})
    ctx = context(running=[("ml", "chat-predictor-0")])
    ctx = dataclasses.replace(ctx, inv=SimpleNamespace(**{**vars(ctx.inv), "owners": owners}))
    made, fixes = owned.changes([g], ctx)
    assert made == []
    assert "raw deployment (Standard) mode, which does not scale to zero" in fixes[key(g)].reason


def test_a_deployment_already_at_zero_gets_no_change() -> None:
    kube = lists()
    kube["deployments"][0]["items"][0]["spec"]["replicas"] = 0
    f = idle("GPU001", "llm-5d9f-a")
    made, fixes = owned.changes([f], context(running=[("ml", "llm-5d9f-a")], kube=kube))
    assert made == [] and "already scaled to zero" in fixes[key(f)].reason


def test_a_name_from_the_cluster_is_quoted_for_the_shell() -> None:
    f = idle("GPU001", "x; rm -rf ~", ns="ml")
    [change], _ = owned.changes([f], context(running=[]))
    assert change.commands[-1] == "# k delete pod 'x; rm -rf ~' -n ml"
