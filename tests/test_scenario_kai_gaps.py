"""The scenario's KAI Scheduler cases beyond the simple ones (`gpuaudit.scenario.kai_gap_cases`):
a fraction pod that ended holds its share for exactly the hours it ran, and a KAI node without an
exporter is found by GPU080 naming the fraction pod, never the reservation pod."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import Inventory, build
from gpuaudit.inventory import columns as C
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.kai_cases import RESERVATION_NS
from gpuaudit.scenario.kai_gap_cases import DARK_NODE, ENDED_NODE

DAYS = 2


@functools.cache
def _audit() -> tuple[dict[str, Any], Inventory, AuditResult]:
    sc = generate(60, DAYS, 11)
    inv = build(to_snapshot(sc))
    return sc.truth, inv, run_checks(inv, Settings())


def _here(e: dict[str, Any]) -> bool:
    return e["namespace"] in ("kai-vision", RESERVATION_NS) or e["name"] in (
        ENDED_NODE,
        DARK_NODE,
    )


@pytest.mark.parametrize("code", ["GPU001", "GPU080"])
def test_the_truth_is_what_the_audit_finds(code: str) -> None:
    truth, inv, res = _audit()
    nodes = {ENDED_NODE, DARK_NODE}
    found = {
        (f.resource.kind, f.resource.namespace, f.resource.name)
        for f in res.findings
        if f.code == code and (f.resource.node in nodes or f.resource.name in nodes)
    }
    planted = {
        (e["kind"], e["namespace"], e["name"]) for e in truth["planted"].get(code, []) if _here(e)
    }
    near = {
        (e["kind"], e["namespace"], e["name"])
        for e in truth["near_misses"].get(code, [])
        if _here(e)
    }
    assert near and not near & found
    assert found == planted


def test_an_ended_fraction_pod_holds_its_share_for_the_hours_it_ran() -> None:
    truth, inv, _ = _audit()
    want = truth["kai_ended"]
    h = inv.holdings[inv.holdings[C.NODE] == want["node"]]
    got: dict[str, float] = {}
    for ns, pod, gh in zip(h[C.NAMESPACE], h[C.POD], h[C.GPU_HOURS], strict=True):
        if pod:
            got[f"{ns}/{pod}"] = got.get(f"{ns}/{pod}", 0.0) + float(gh)
    assert got == pytest.approx(want["gpu_hours"])
    assert want["gpu_hours"][want["ended_pod"]] == 0.5 * want["ended_h"] > 0


def test_the_dark_kai_node_names_its_fraction_pod() -> None:
    _, _, res = _audit()
    (f,) = [f for f in res.findings if f.code == "GPU080" and f.resource.name == DARK_NODE]
    assert RESERVATION_NS not in f.message + " ".join(f.pods)
    assert [p.split("/")[0] for p in f.pods] == ["kai-vision"]
    assert "reserved by KAI Scheduler for GPU fractions" in f.message
