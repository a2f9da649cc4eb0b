"""KAI Scheduler's objects live: the test API server serving the scenario's KAI Queues
(`scheduling.run.ai/v2`) and PodGroups (`v2alpha2`) beside its pods; they are listed, recorded
through the snapshot allowlist with exactly the fields gpuaudit reads, and the audit of the
recorded objects finds the scenario's KAI cases."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import build
from gpuaudit.scenario import generate, k8s_lists, to_snapshot
from gpuaudit.snapshot.fields import keep_page
from gpuaudit.sources.kubernetes.kubesource import collect
from tests.support.apiserver import KubeAPIServer

KAI_LISTS = ("kai_queues", "kai_podgroups")


def _items(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for page in pages for o in page["items"]]


def test_kai_objects_are_listed_recorded_and_audited(tmp_path: Path) -> None:
    sc = generate(60, 2, 11)
    lists = k8s_lists(sc)
    assert all(lists[k]["items"] for k in KAI_LISTS)
    with KubeAPIServer(lists) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, keep_page=keep_page)
        for key in KAI_LISTS:
            assert srv.list_requests(key), key
        assert srv.methods() == {"GET"}
    assert kc.objects["kai_queues"] == kc.objects["kai_podgroups"] == "ok"
    assert kc.api_versions["kai_queues"] == "scheduling.run.ai/v2"
    assert kc.api_versions["kai_podgroups"] == "scheduling.run.ai/v2alpha2"
    queues = {q["metadata"]["name"]: q for q in _items(kc.kubernetes["kai_queues"])}
    infer = queues["kai-infer"]
    # Exactly what gpuaudit reads: the GPU quota, limit and weight, not CPU or memory.
    assert infer["spec"] == {
        "parentQueue": "kai-org",
        "resources": {"gpu": {"quota": 1, "limit": 1, "overQuotaWeight": 1}},
    }
    assert infer["status"] == {"allocated": {"nvidia.com/gpu": "0.5"}}
    groups = {g["metadata"]["name"]: g for g in _items(kc.kubernetes["kai_podgroups"])}
    assert groups["pg-rerank"]["spec"] == {"minMember": 2, "queue": "kai-lab"}
    pods = {p["metadata"]["name"]: p for p in _items(kc.kubernetes["pods"])}
    frac = pods["embed-notebook-0"]["metadata"]
    assert frac["annotations"] == {"gpu-fraction": "0.5", "pod-group-name": "pg-embed-0"}
    assert frac["labels"]["kai.scheduler/queue"] == "kai-infer"
    res = next(p for n, p in pods.items() if n.startswith("gpu-reservation-"))
    assert res["metadata"]["annotations"] == {}  # the GPU's UUID annotation is not read
    assert res["metadata"]["labels"]["app"] == "kai-resource-reservation"
    # The recorded objects audited with the scenario's DCGM answers.
    snap = to_snapshot(sc)
    recorded = dataclasses.replace(snap, kubernetes=kc.kubernetes)
    res_audit = run_checks(build(recorded), Settings())
    found = {(f.code, f.resource.name) for f in res_audit.findings}
    assert {("GPU001", "embed-notebook-0"), ("GPU090", "kai-train")} <= found
    assert not any(f.resource.namespace == "kai-resource-reservation" for f in res_audit.findings)
