"""The scenario's cause cases (`gpuaudit.scenario.cause_cases`): the crash-looping trainer and
the cold-start server are found with the GPU-hours their truth states, the near-misses (a pod
that restarted once long ago, a training job's 10-minute warm-up) are not, and the ledger by
cause counts the same hours and adds up exactly to the allocated GPU-hours."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import Inventory, build
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.cause_cases import NODE
from gpuaudit.scenario.cpu_cases import without_cadvisor


@functools.cache
def _audit() -> tuple[dict[str, Any], Inventory, AuditResult]:
    sc = generate(60, 2, 5)
    inv = build(to_snapshot(sc))
    return sc.truth, inv, run_checks(inv, Settings(), group_label="team")


def _found(res: AuditResult, code: str) -> dict[str, float]:
    return {
        f"{f.resource.namespace}/{f.resource.name}": f.impact.gpu_hours
        for f in res.findings
        if f.code == code and f.resource.node == NODE
    }


@pytest.mark.parametrize(("code", "key"), [("GPU004", "restarting"), ("GPU005", "starting")])
def test_the_truth_is_what_the_audit_finds(code: str, key: str) -> None:
    truth, _, res = _audit()
    expected = {e["pod"]: e[f"{key}_gpu_hours"] for e in truth["causes"] if f"{key}_gpu_hours" in e}
    planted = {f"{e['namespace']}/{e['name']}" for e in truth["planted"][code]}
    missed = {f"{e['namespace']}/{e['name']}" for e in truth["near_misses"][code]}
    found = _found(res, code)
    assert set(found) == {p for p, v in expected.items() if v > 0} == planted & set(expected)
    assert not missed & set(found)
    for pod, hours in found.items():
        assert hours == pytest.approx(expected[pod], abs=1e-6)


def test_the_ledger_counts_the_cases_and_adds_up() -> None:
    truth, _, res = _audit()
    book = res.causes
    assert book is not None and res.attribution is not None
    assert book.allocated_gpu_hours == pytest.approx(res.attribution.allocated_gpu_hours)
    planted = sum(e.get("starting_gpu_hours", 0.0) for e in truth["causes"])
    assert book.fleet["starting"] >= planted - 1e-9
    assert book.by_namespace["inference"]["starting"] >= 10.0 - 1e-9
    assert book.by_namespace["ml-train"]["restarting"] >= 5.0 - 1e-9
    for groups in (book.by_namespace, book.by_group):
        assert sum(sum(g.values()) for g in groups.values()) == pytest.approx(
            book.allocated_gpu_hours, rel=1e-12
        )


def test_the_oom_killed_trainers_memory_is_the_truths_and_a_limit_is_recommended() -> None:
    truth, inv, res = _audit()
    (t,) = [e for e in truth["causes"] if "memory_limit" in e]
    (f,) = [x for x in res.findings if x.code == "GPU004" and x.resource.node == NODE]
    assert f"{f.resource.namespace}/{f.resource.name}" == t["pod"]
    ev = f.evidence
    assert ev["memory_working_set_max_bytes"] == t["memory_working_set_max_bytes"]
    assert ev["memory_limit_bytes"] == 16 * 2**30
    assert ev["memory_recommended_limit"] == t["memory_recommended_limit"] == "20Gi"
    assert f.message.endswith(
        "Container main used at most 15.5 GiB of memory against its 16.0 GiB limit (97 %)."
    )
    # The near-miss's memory is read too, and says nothing by itself.
    assert inv.memory.used("ml-train", "restarted-once-0", "main") == 8 * 2**30


def test_without_cadvisor_the_memory_is_not_measured_and_says_why() -> None:
    sc = without_cadvisor(generate(60, 2, 5))
    res = run_checks(build(to_snapshot(sc)), Settings())
    (f,) = [x for x in res.findings if x.code == "GPU004" and x.resource.node == NODE]
    assert f.evidence["host_memory_needed"].startswith("not measured: no cAdvisor")
    assert "memory_recommended_limit" not in f.evidence
