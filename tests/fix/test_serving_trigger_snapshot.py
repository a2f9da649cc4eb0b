"""From snapshot to ScaledObject on the generated scenario's serving cases
(`gpuaudit.scenario.serving_cases`): the part-time Deployment whose pod exports vLLM's queue
gets a prometheus trigger beside its cron window, threshold its planted busy level, where the
snapshot records the Prometheus URL (as a live collection does); the near-miss, a part-time
Deployment that exports nothing, keeps cron alone. A generated snapshot records no URL: then
cron alone, and the note gives the trigger to add."""

from __future__ import annotations

from functools import cache
from typing import Any

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.fix.changes import Change
from gpuaudit.inventory import build
from gpuaudit.scenario.emit import to_snapshot
from gpuaudit.scenario.generator import Scenario, generate
from gpuaudit.sources.prometheus import catalogue

URL = "http://prometheus-operated.monitoring.svc:9090"


@cache
def _scenario() -> Scenario:
    return generate(60, 4, 7)


def _cases() -> tuple[dict[str, Any], dict[str, Any]]:
    served, near = _scenario().truth["serving_fixes"]
    assert served["metric"] == "vllm:num_requests_waiting" and near["metric"] is None
    return served, near


def _objects(result: AuditResult) -> dict[str, Change]:
    """Each GPU003 finding's pod -> the ScaledObject written for it."""
    out: dict[str, Change] = {}
    for f in result.findings:
        got = result.fixes.of(f) if f.code == "GPU003" else None
        if got is not None and got.file:
            out[f.resource.name] = next(c for c in result.fixes.changes if c.file == got.file)
    return out


def _triggers(change: Change) -> list[dict[str, Any]]:
    return list(change.body["spec"]["triggers"])


def test_the_snapshot_records_the_one_serving_answer() -> None:
    served, _ = _cases()
    snap = to_snapshot(_scenario())
    [entry] = snap.prometheus[catalogue.SERVING.id]
    [series] = entry["body"]["data"]["result"]
    assert series["metric"] == {
        "namespace": served["namespace"],
        "pod": served["pod"],
        catalogue.SERVING_NAME_LABEL: served["metric"],
    }
    assert float(series["value"][1]) == served["busy_level"]
    assert catalogue.SERVING.id in {q["id"] for q in snap.manifest.queries}


def test_the_deployment_exporting_a_queue_gets_a_prometheus_trigger_the_other_cron() -> None:
    served, near = _cases()
    snap = to_snapshot(_scenario()).with_manifest(prometheus_url=URL)
    objects = _objects(run_checks(build(snap), Settings()))
    assert {served["pod"], near["pod"]} <= set(objects)
    cron, prom = _triggers(objects[served["pod"]])
    assert cron["type"] == "cron" and cron["metadata"]["start"] == "30 12 * * *"
    meta = prom["metadata"]
    assert prom["type"] == "prometheus" and meta["serverAddress"] == URL
    assert meta["query"] == (
        f'sum(vllm:num_requests_waiting{{namespace="batch",pod=~"{served["owner"]}-[a-z0-9]+'
        '-[a-z0-9]+"})'
    )
    assert float(meta["threshold"]) == served["busy_level"]
    assert meta["activationThreshold"] == "0"
    assert objects[served["pod"]].validated == "KEDA v2.20.2 CRD"
    assert [t["type"] for t in _triggers(objects[near["pod"]])] == ["cron"]


def test_a_generated_snapshot_records_no_url_so_both_keep_cron() -> None:
    served, near = _cases()
    objects = _objects(run_checks(build(to_snapshot(_scenario())), Settings()))
    for pod in (served["pod"], near["pod"]):
        assert [t["type"] for t in _triggers(objects[pod])] == ["cron"]
    assert (
        objects[served["pod"]]
        .notes[-1]
        .startswith("prometheus trigger: not written: the snapshot records no Prometheus URL")
    )
