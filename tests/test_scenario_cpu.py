"""The scenario's CPU-starved cases (`gpuaudit.scenario.cpu_cases`): GPU041 finds exactly the
planted pod with the truth's starved hours, idle GPU-hours and recommendation; its near-misses
stay quiet; and the same cluster without cAdvisor's series skips GPU041 with the reason."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import Capability, Inventory, build
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.cpu_cases import NODE, without_cadvisor
from gpuaudit.scenario.generator import Scenario


@functools.cache
def _scenario() -> Scenario:
    return generate(48, 2, 3)


@functools.cache
def _audit() -> tuple[dict[str, Any], Inventory, AuditResult]:
    sc = _scenario()
    inv = build(to_snapshot(sc))
    return sc.truth, inv, run_checks(inv, Settings())


def test_the_truth_is_what_gpu041_finds() -> None:
    truth, _, res = _audit()
    found = {(f.resource.namespace, f.resource.name) for f in res.findings if f.code == "GPU041"}
    planted = {(e["namespace"], e["name"]) for e in truth["planted"]["GPU041"]}
    near = {(e["namespace"], e["name"]) for e in truth["near_misses"]["GPU041"]}
    assert found == planted == {("ml-train", "cpu-starved-trainer-0")}
    assert len(near) == 3 and not near & found


def test_figures_are_the_truths() -> None:
    truth, _, res = _audit()
    by_pod = {
        f"{f.resource.namespace}/{f.resource.name}": f for f in res.findings if f.code == "GPU041"
    }
    for t in truth["cpu_starved"]:
        f = by_pod.get(t["pod"])
        if not t["starved_hours"]:
            assert f is None
            continue
        assert f is not None and f.resource.node == NODE
        assert f.evidence["starved_hours"] == t["starved_hours"]
        assert f.impact.gpu_hours == pytest.approx(t["idle_gpu_hours"])
        (c,) = f.evidence["containers"]
        assert c["cpu_limit_cores"] == 2.0 and c["throttled_share"] == pytest.approx(0.6)
        assert c["recommended_cpu_limit"] == t["recommended_cpu_limit"]
        assert c["recommended_cpu_request"] == t["recommended_cpu_request"]


def test_only_the_pods_cadvisor_reports_have_cpu() -> None:
    _, inv, _ = _audit()
    assert Capability.CONTAINER_CPU in inv.capabilities
    assert {ns for ns, _ in inv.cpu.use} == {"ml-train"}
    assert len(inv.cpu.use) == 4
    assert inv.cpu.resources[("ml-train", "mildly-throttled-0")]["trainer"].limit == 4.0


def test_without_cadvisor_gpu041_is_skipped_with_the_reason() -> None:
    sc = without_cadvisor(_scenario())
    assert all(p.cpu is None for p in sc.pods)
    assert any(p.cpu is not None for p in _scenario().pods)  # the original is untouched
    inv = build(to_snapshot(sc))
    assert Capability.CONTAINER_CPU not in inv.capabilities
    res = run_checks(inv, Settings())
    assert not [f for f in res.findings if f.code == "GPU041"]
    skipped = {s.code: s.reason for s in res.skipped}
    assert "cadvisor" in skipped["GPU041"].lower()


def test_gpu041s_change_sets_the_starved_containers_cpu() -> None:
    """`gpuaudit fix`: the trainer's StatefulSet template gets the recommended CPU."""
    _, _, res = _audit()
    (change,) = [c for c in res.fixes.changes if any(f.code == "GPU041" for f in c.findings)]
    spec = change.body["spec"]["template"]["spec"]  # type: ignore[index]
    resources = {"limits": {"cpu": "3"}, "requests": {"cpu": "2"}}
    assert spec == {"containers": [{"name": "trainer", "resources": resources}]}
    assert "CPU limit goes from 2 to 3" in change.risk
