"""The scenario's HAMi pods whose GPU has no DCGM series (`gpuaudit.scenario.hami_dark_cases`):
each is charged its share of the GPU on the ledger's unattributed side, never the whole GPU,
and the audit finds what the truth plants."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.ledger import ledger
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import discover
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views, build
from gpuaudit.inventory import columns as C
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.hami_dark_cases import NODE

DAYS = 2
HOURS = 24 * DAYS


@functools.cache
def _audit() -> tuple[dict[str, Any], Inventory, AuditResult]:
    sc = generate(48, DAYS, 11)
    inv = build(to_snapshot(sc))
    return sc.truth, inv, run_checks(inv, Settings())


def _here(entries: list[dict[str, Any]], pods: set[str]) -> set[tuple[str, str]]:
    return {(e["kind"], e["name"]) for e in entries if e["name"] in pods | {NODE}}


@pytest.mark.parametrize("code", [c.code for c in discover()])
def test_each_check_finds_exactly_what_is_planted_on_the_node(code: str) -> None:
    truth, inv, res = _audit()
    pods = set(inv.pods.loc[inv.pods[C.NODE] == NODE, C.POD])
    found = {
        (f.resource.kind, f.resource.name)
        for f in res.findings
        if f.code == code and f.resource.name in pods | {NODE}
    }
    assert found == _here(truth["planted"].get(code, []), pods), code
    assert not found & _here(truth["near_misses"].get(code, []), pods), code


def test_each_pod_is_charged_its_share_without_series() -> None:
    """25 % and 50 % of one GPU for the 48 hours: 12 and 24 GPU-hours, unattributed for want of
    an exporter, at 0.25 and 0.5 GPU (not 1, nor 1/10, its nvidia.com/gpu over the split)."""
    truth, inv, res = _audit()
    case = truth["hami_dark"]
    assert case["node"] == NODE and len(case["pods"]) == 2
    views = Views(inv, DEFAULT_PRICES)
    un = views.unattributed
    mine = un[un[C.NODE] == NODE]
    got = {
        f"{ns}/{pod}": (reason, gpus, hours)
        for ns, pod, reason, gpus, hours in zip(
            mine[C.NAMESPACE], mine[C.POD], mine["reason"], mine["gpus"], mine[C.HOURS], strict=True
        )
    }
    want = {
        key: (case["reason"], pytest.approx(v["share"]), pytest.approx(HOURS))
        for key, v in case["pods"].items()
    }
    assert got == want
    assert sorted(v["gpu_hours"] for v in case["pods"].values()) == [0.25 * HOURS, 0.5 * HOURS]
    # No DCGM series names them: nothing of the node is measured, and the ledger adds up.
    h = inv.holdings
    assert not h.loc[h[C.NODE] == NODE, C.HELD].any()
    book = ledger(views)
    assert book.unattributed["no_exporter"] >= 0.75 * HOURS
    total = sum(book.attributed.values()) + sum(book.unattributed.values())
    assert total == pytest.approx(book.allocated_gpu_hours)
    assert {f.code for f in res.findings if f.resource.name == NODE} == {"GPU080"}
