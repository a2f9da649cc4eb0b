"""Owner cases (issue 33): idle pods whose owners `gpuaudit fix` walks to the object a team
edits, on an L40S node of their own (all four GPUs held by them, idle all window: GPU001 finds
each, GPU021 too, at a fifth of the framebuffer, and GPU060 the node), planted last so that
every case before stays as it was.

- `serving/fixable-llm-*`: the one pod of Deployment `fixable-llm` (through its ReplicaSet):
  every pod of it idle, so the fix is a patch, `replicas: 0` on the Deployment.
- `batch/nightly-embed-29412000-*`: the run of CronJob `nightly-embed` (its Job
  `nightly-embed-29412000`): the fix is a command that suspends the Job, not a patch (a patch
  of the CronJob would stop the runs to come).
- near-miss `research/scratch-gpu`: a bare pod (no owner): no patch; a commented deletion.
- near-miss `serving/ghost-llm-7c9d8f6b5-*`: its ReplicaSet `ghost-llm-7c9d8f6b5` is not in
  the API's list (deleted since): the owner was not read, so no patch; a commented deletion.

Besides, `owner_hints` (read by `gpuaudit.scenario.owner_objects`, which emits every owner of
the scenario's pods) makes the first `serving` Deployment named `tiny-llm-*`, where there is
one, the predictor of a KServe InferenceService: its idle pod gets no change (gpuaudit writes
none for an InferenceService yet), a near-miss of the patch.

The truth of each is under `fixes` (kind, namespace, name, `fix`: patch, command or none, and
the target a patch changes), besides GPU001's.
"""

from __future__ import annotations

from gpuaudit.scenario import teams
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import PodSpec

HINTS = "owner_hints"
"""The `Builder.api` key of the hints `owner_objects` reads (not a Kubernetes list)."""
CRON_JOB = "nightly-embed-29412000"
GHOST_RS = "ghost-llm-7c9d8f6b5"


def plant_owners(b: Builder) -> None:
    """Place the owner cases (see the module's docstring) and record their truth."""
    if b.H < 24:
        return
    hints = b.api.setdefault(HINTS, [])
    node = b.add_node("l40s", len(b.of_kind("l40s")))
    slots = b.free_slots(node)
    deploy = b.deployment_pod("serving", "fixable-llm", node, 0, gpus=1)
    run = b.pod("batch", f"{CRON_JOB}-{b.ids.suffix()}", node, "main", ("Job", CRON_JOB), 0, gpus=1)
    hints.append(
        {"hint": "cronjob", "namespace": "batch", "job": CRON_JOB, "name": "nightly-embed"}
    )
    bare = b.pod("research", "scratch-gpu", node, "main", ("", ""), 0, gpus=1)
    ghost = b.pod(
        "serving",
        f"{GHOST_RS}-{b.ids.suffix()}",
        node,
        "server",
        ("ReplicaSet", GHOST_RS),
        0,
        gpus=1,
        labels={"app": "ghost-llm", "pod-template-hash": GHOST_RS.rsplit("-", 1)[1]},
    )
    hints.append(
        {"hint": "unlisted", "kind": "ReplicaSet", "namespace": "serving", "name": GHOST_RS}
    )
    for slot, p in zip(slots, (deploy, run, bare, ghost), strict=False):
        b.hold(slot, p, 0, b.H, b.pattern("idle", b.H, 0), 0.2)
        b.plant("GPU001", p)
        b.plant("GPU021", p)  # a whole L40S for a fifth of its memory
    b.plant_name("GPU060", "Node", "", node.name)  # every GPU idle all window
    _fix(b, deploy, "patch", "Deployment serving/fixable-llm")
    _fix(b, run, "command", f"Job batch/{CRON_JOB}")
    _fix(b, bare, "command", "", "a bare pod: nothing to patch")
    _fix(b, ghost, "command", "", "its ReplicaSet was not read: nothing to patch")
    _inference_service(b)
    b.free_rest()
    teams.label(b)


def _fix(b: Builder, p: PodSpec, fix: str, target: str, near_miss: str = "") -> None:
    entry = {"kind": "Pod", "namespace": p.namespace, "name": p.name, "fix": fix}
    if target:
        entry["target"] = target
    if near_miss:
        entry["why"] = near_miss
    b.truth.setdefault("fixes", []).append(entry)


def _inference_service(b: Builder) -> None:
    """The first `serving` Deployment named `tiny-llm-*` becomes an InferenceService's predictor."""
    for p in b.pods:
        app = p.labels.get("app", "")
        if p.namespace == "serving" and p.owner_kind == "ReplicaSet" and app.startswith("tiny-llm"):
            b.api[HINTS].append(
                {"hint": "inferenceservice", "namespace": "serving", "deployment": app, "name": app}
            )
            _fix(b, p, "none", "", "its Deployment is an InferenceService's: no change yet")
            return
