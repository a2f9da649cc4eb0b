"""From snapshot to ScaledObject: a generated scenario's snapshot, recorded as a live collection
records it (the Prometheus URL, the `serving_busy` answer of the one serving metrics query),
built and audited. The part-time Deployment whose pod exports vLLM's queue gets a prometheus
trigger beside its cron window; the near-miss, a part-time Deployment that exports nothing,
keeps cron alone; without the answer, both keep cron."""

from __future__ import annotations

from functools import cache
from typing import Any

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.fix.changes import Change
from gpuaudit.inventory import build
from gpuaudit.scenario.emit import to_snapshot
from gpuaudit.scenario.generator import Scenario, generate
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.prometheus import catalogue

URL = "http://prometheus-operated.monitoring.svc:9090"


@cache
def _scenario() -> Scenario:
    return generate(60, 4, 7)


def _pods() -> list[tuple[str, str]]:
    return [(p["namespace"], p["name"]) for p in _scenario().truth["planted"]["GPU003"]]


def _recorded(served: tuple[str, str]) -> Snapshot:
    """The scenario's snapshot with the serving answer a live collection records: `served`'s
    queue at a busy level of 2.5 (its series named by the scrape target's labels)."""
    sc = _scenario()
    snap = to_snapshot(sc)
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {
                    "metric": {
                        "namespace": served[0],
                        "pod": served[1],
                        catalogue.SERVING_NAME_LABEL: "vllm:num_requests_waiting",
                    },
                    "value": [sc.end, "2.5"],
                }
            ],
        },
    }
    query = catalogue.SERVING.promql(int(sc.end - sc.start), "exported")
    prom = dict(snap.prometheus)
    prom[catalogue.SERVING.id] = [{"query": query, "params": {}, "body": body}]
    return Snapshot(snap.manifest, prom, snap.kubernetes).with_manifest(prometheus_url=URL)


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


def test_the_deployment_exporting_a_queue_gets_a_prometheus_trigger_the_other_cron() -> None:
    served, near = _pods()
    result = run_checks(build(_recorded(served)), Settings())
    objects = _objects(result)
    assert set(objects) == {served[1], near[1]}
    cron, prom = _triggers(objects[served[1]])
    assert cron["type"] == "cron"
    meta = prom["metadata"]
    assert prom["type"] == "prometheus" and meta["serverAddress"] == URL
    assert meta["query"].startswith(
        f'sum(vllm:num_requests_waiting{{namespace="{served[0]}",pod=~"'
    )
    assert meta["threshold"] == "2.5" and meta["activationThreshold"] == "0"
    assert objects[served[1]].validated == "KEDA v2.20.2 CRD"
    assert [t["type"] for t in _triggers(objects[near[1]])] == ["cron"]


def test_without_the_serving_answer_both_keep_cron() -> None:
    result = run_checks(build(to_snapshot(_scenario())), Settings())
    for change in _objects(result).values():
        assert [t["type"] for t in _triggers(change)] == ["cron"]
        assert change.notes[-1] == "prometheus trigger: none (the snapshot holds no serving answer)"
