"""GPU003's change: a KEDA ScaledObject with cron triggers fitted to the busy hours, in the
cluster's time zone, validated against KEDA's CRD; and the near-misses that get none."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuaudit.app import config
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.core.errors import ConfigError
from gpuaudit.fix import parttime
from gpuaudit.fix.changes import ChangeKind, Plan, key
from gpuaudit.fix.context import Context
from gpuaudit.fix.directory import About, files, write
from gpuaudit.fix.plans import _validated
from gpuaudit.fix.validate import Invalid, check
from gpuaudit.inventory.owners import build
from gpuaudit.inventory.serving_metrics import Serving
from tests.fix.conftest import STATES, lists, pods_table
from tests.fix.kubectl import overlay

WINTER = datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp()
"""A window's end in winter: Europe/Berlin is UTC+01:00."""


def context(
    running: list[tuple[str, str]],
    tz: str = "UTC",
    end: float = WINTER,
    kube: dict[str, list[dict[str, Any]]] | None = None,
    serving: Serving | None = None,
) -> Context:
    owners = build(kube or lists(), {"objects": STATES})
    inv = SimpleNamespace(
        owners=owners,
        pods=pods_table(running),
        window_hours=168.0,
        window_end=end,
        serving=serving or Serving(),
    )
    return Context(inv, "USD", "1.34", tz)  # type: ignore[arg-type]


def part_time(pod: str, hours: list[int], ns: str = "ml", wasted: float = 147.0) -> Finding:
    return Finding(
        code="GPU003",
        severity=Severity.MEDIUM,
        resource=Resource("Pod", ns, pod, "node-1", 1.0),
        message=f"Pod {ns}/{pod} held 1 GPU around the clock but worked only part of the day.",
        impact=Impact(gpu_hours=wasted, cost=wasted * 2.0),
        recommendation="Run it as a CronJob.",
        evidence={"active_hours_utc": hours, "days_held": 7.0, "gpus": 1.0},
    )


LLM = [("ml", "llm-5d9f-a"), ("ml", "llm-5d9f-b")]


def test_a_deployment_busy_a_few_hours_a_day_gets_a_scaled_object_in_its_time_zone() -> None:
    a = part_time("llm-5d9f-a", [1, 2, 3])
    b = part_time("llm-5d9f-b", [2, 3, 9], wasted=140.0)
    made, fixes = parttime.changes([a, b], context(LLM, "Europe/Berlin"))
    [change] = made
    assert change.kind is ChangeKind.OBJECT
    # 01:00-04:00 and 09:00-10:00 UTC, each opened 30 min early, at UTC+01:00.
    assert change.body == {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "llm-gpu-hours", "namespace": "ml"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
            "minReplicaCount": 0,
            "maxReplicaCount": 2,
            "triggers": [
                {
                    "type": "cron",
                    "metadata": {
                        "timezone": "Europe/Berlin",
                        "start": "30 1 * * *",
                        "end": "0 5 * * *",
                        "desiredReplicas": "2",
                    },
                },
                {
                    "type": "cron",
                    "metadata": {
                        "timezone": "Europe/Berlin",
                        "start": "30 9 * * *",
                        "end": "0 11 * * *",
                        "desiredReplicas": "2",
                    },
                },
            ],
        },
    }
    assert change.title == (
        "Scale Deployment ml/llm to zero outside 01:30-05:00, 09:30-11:00 Europe/Berlin (KEDA cron)"
    )
    assert change.file == f"GPU003-{change.file.split('-')[1]}-scaledobject-ml-llm.yaml"
    # 5 h kept a day: pod a is busy 3 of them (2 h more x 7 days), pod b 3 (2 h more).
    assert change.savings.gpu_hours == pytest.approx(147.0 + 140.0 - 28.0)
    assert change.savings.cost == pytest.approx((147.0 + 140.0) * 2.0 * 259.0 / 287.0)
    assert "remove `replicas` from its manifest" in change.risk
    assert any("UTC+01:00" in n for n in change.notes)
    assert fixes[key(a)].file == fixes[key(b)].file == change.file
    kept, why = _validated(change, "1.34")
    assert kept is not None and kept.validated == "KEDA v2.20.2 CRD", why


def test_windows_join_across_midnight_and_when_they_nearly_touch() -> None:
    assert parttime._windows([22, 23, 0]) == [(21 * 60 + 30, 60)]
    assert parttime._windows([1, 3]) == [(30, 240)]
    assert parttime._windows([1, 5]) == [(30, 120), (270, 360)]


def test_utc_by_default_and_a_summer_offset() -> None:
    f = part_time("embed-0", [6], ns="ml")
    [utc], _ = parttime.changes([f], context([("ml", "embed-0")]))
    assert utc.body["spec"]["triggers"][0]["metadata"] == {
        "timezone": "UTC",
        "start": "30 5 * * *",
        "end": "0 7 * * *",
        "desiredReplicas": "1",
    }
    assert utc.body["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"
    summer = datetime(2026, 7, 1, tzinfo=timezone.utc).timestamp()
    [ny], _ = parttime.changes([f], context([("ml", "embed-0")], "America/New_York", summer))
    assert ny.body["spec"]["triggers"][0]["metadata"]["start"] == "30 1 * * *"
    assert "UTC-04:00" in ny.notes[1]


def test_near_misses_get_no_scaled_object_and_say_why() -> None:
    busy = part_time("llm-5d9f-a", [1])
    job = part_time("train-x", [1])
    bare = part_time("scratch", [1])
    orphan = part_time("orphan", [1])
    made, fixes = parttime.changes([busy, job, bare, orphan], context([*LLM, ("ml", "train-x")]))
    assert made == []
    assert fixes[key(busy)].reason.startswith(
        "1 of the 2 pods of Deployment ml/llm holding GPUs were not part-time"
    )
    assert "only for a Deployment or StatefulSet, and Job ml/train owns the pod" in (
        fixes[key(job)].reason
    )
    assert fixes[key(bare)].reason == (
        "pod ml/scratch is a bare pod (no owner): there is nothing to scale"
    )
    assert "ReplicaSet ml/gone is not among the replicasets read" in fixes[key(orphan)].reason
    assert all(fixes[key(f)].kind is None for f in (busy, job, bare, orphan))


def test_busy_hours_that_cover_the_day_with_their_margins_get_none() -> None:
    f = part_time("embed-0", list(range(0, 24, 2)))
    made, fixes = parttime.changes([f], context([("ml", "embed-0")]))
    assert made == [] and "cover the whole day" in fixes[key(f)].reason


def test_a_long_owner_name_is_cut_to_a_label_value() -> None:
    name = parttime._name("a" * 60 + "-b")
    assert len(name) <= 63 and name == "a" * 53 + "-gpu-hours"


def test_a_deployment_scaled_to_zero_when_read_gets_none() -> None:
    kube = lists()
    kube["deployments"][0]["items"][0]["spec"]["replicas"] = 0
    f = part_time("llm-5d9f-a", [1])
    made, fixes = parttime.changes([f], context([("ml", "llm-5d9f-a")], kube=kube))
    assert made == []
    assert fixes[key(f)].reason == "Deployment ml/llm was already scaled to zero when it was read"


def test_the_keda_crd_refuses_a_scaled_object_without_triggers() -> None:
    bad = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "x", "namespace": "ml"},
        "spec": {"scaleTargetRef": {"name": "llm"}, "triggers": []},
    }
    with pytest.raises(Invalid, match="triggers"):
        check(bad, "1.34")


def test_the_time_zone_is_an_iana_name_resolved_once() -> None:
    assert config.for_scan({"demo": True}).settings.timezone == "UTC"
    assert config.for_scan({"demo": True, "timezone": "Asia/Kolkata"}).settings.timezone == (
        "Asia/Kolkata"
    )
    with pytest.raises(ConfigError, match=r"--timezone 'Mars/Base' is not a time zone"):
        config.for_scan({"demo": True, "timezone": "Mars/Base"})
    with pytest.raises(ConfigError, match="not a time zone"):
        config.for_scan({"demo": True, "timezone": "../../etc/passwd"})


def _served(
    levels: dict[tuple[str, str], dict[str, float]],
    server: str = "http://prometheus.monitoring.svc:9090",
    label: str = "pod",
    selector: str = "",
) -> Serving:
    return Serving(levels, dict.fromkeys(levels, label), True, server, selector)


WAITING = "vllm:num_requests_waiting"


def test_pods_that_export_a_queue_get_a_prometheus_trigger_beside_the_cron_floor() -> None:
    """Both pods export vLLM's queue (busy levels 3 and 4): a prometheus trigger on its sum
    over the Deployment's pods, threshold their mean busy level, activationThreshold 0, the
    Prometheus gpuaudit read as serverAddress; the cron window stays (the floor)."""
    served = _served(
        {LLM[0]: {WAITING: 3.0}, LLM[1]: {WAITING: 4.0, "vllm:num_requests_running": 9.0}}
    )
    a, b = part_time("llm-5d9f-a", [1, 2]), part_time("llm-5d9f-b", [1, 2])
    [change], fixes = parttime.changes([a, b], context(LLM, serving=served))
    cron, prom = change.body["spec"]["triggers"]
    assert cron["type"] == "cron"
    assert prom == {
        "type": "prometheus",
        "metadata": {
            "serverAddress": "http://prometheus.monitoring.svc:9090",
            "query": 'sum(vllm:num_requests_waiting{namespace="ml",'
            'pod=~"llm-[a-z0-9]+-[a-z0-9]+"})',
            "threshold": "3.5",
            "activationThreshold": "0",
        },
    }
    assert change.title.endswith("(KEDA cron and prometheus)")
    assert "busy level 3.50 per pod" in change.notes[-2]
    assert "the cron windows stay as a floor" in change.notes[-1]
    assert not any(n.startswith("review: ") for n in change.notes)
    assert "keeps pods up outside them while vllm:num_requests_waiting shows work" in (
        fixes[key(a)].reason
    )
    kept, why = _validated(change, "1.34")
    assert kept is not None and kept.validated == "KEDA v2.20.2 CRD", why


def test_a_near_miss_without_a_serving_metric_keeps_cron_alone() -> None:
    served = _served({("ml", "other-0"): {WAITING: 2.0}})
    f = part_time("llm-5d9f-a", [1, 2])
    [change], _ = parttime.changes([f], context([LLM[0]], serving=served))
    assert [t["type"] for t in change.body["spec"]["triggers"]] == ["cron"]
    assert change.title.endswith("(KEDA cron)")
    assert change.notes[-1].startswith("prometheus trigger: none (its pods exported no serving")
    [unread], _ = parttime.changes([f], context([LLM[0]]))
    assert unread.notes[-1] == "prometheus trigger: none (the snapshot holds no serving answer)"


def test_the_trigger_honours_exported_labels_and_the_cluster_selector() -> None:
    served = _served(
        {("ml", "embed-0"): {"tgi_queue_size": 1.234}},
        label="exported_pod",
        selector='cluster="prod"',
    )
    f = part_time("embed-0", [5])
    [change], _ = parttime.changes([f], context([("ml", "embed-0")], serving=served))
    prom = change.body["spec"]["triggers"][-1]["metadata"]
    assert prom["query"] == (
        'sum(tgi_queue_size{exported_namespace="ml",exported_pod=~"embed-[0-9]+",cluster="prod"})'
    )
    assert prom["threshold"] == "1.24"


def test_a_port_forward_address_asks_for_review_and_no_address_writes_no_trigger() -> None:
    f = part_time("llm-5d9f-a", [1, 2])
    local = _served({LLM[0]: {WAITING: 2.0}}, server="http://127.0.0.1:9090")
    [change], _ = parttime.changes([f], context([LLM[0]], serving=local))
    assert change.body["spec"]["triggers"][-1]["metadata"]["serverAddress"] == (
        "http://127.0.0.1:9090"
    )
    [review] = [n for n in change.notes if n.startswith("review: ")]
    assert "a loopback address (a port-forward, most likely), which pods cannot reach" in review
    texts = files(Plan((_validated(change, "1.34")[0],), {}, ""), About("c", "w", "s"))  # type: ignore[arg-type]
    assert "# review: gpuaudit read Prometheus at http://127.0.0.1:9090" in texts[change.file]
    none = _served({LLM[0]: {WAITING: 2.0}}, server="")
    [cron], _ = parttime.changes([f], context([LLM[0]], serving=none))
    assert [t["type"] for t in cron.body["spec"]["triggers"]] == ["cron"]
    assert cron.notes[-1].startswith(
        "prometheus trigger: not written: the snapshot records no Prometheus URL"
    )
    assert "sum(vllm:num_requests_waiting{" in cron.notes[-1]


@pytest.mark.server
def test_the_scaled_object_with_its_prometheus_trigger_builds_in_an_overlay(tmp_path: Path) -> None:
    """The real kubectl builds a kustomize overlay holding the ScaledObject (offline: kubectl
    apply needs a server that knows KEDA's CRD), and what it builds validates."""
    served = _served({LLM[0]: {WAITING: 3.0}, LLM[1]: {WAITING: 3.0}})
    made, _ = parttime.changes(
        [part_time("llm-5d9f-a", [1, 2]), part_time("llm-5d9f-b", [1, 2])],
        context(LLM, serving=served),
    )
    [change] = [_validated(c, "1.34")[0] for c in made]
    assert change is not None
    fix = tmp_path / "fix"
    write(files(Plan((change,), {}, ""), About("c", "w", "s")), fix)
    [built] = overlay([], fix, tmp_path)
    assert built == change.body
    check(built, "1.34")
