"""The scenario's KAI Scheduler cases (`gpuaudit.scenario.kai_cases`): their truth is what the
audit finds, the reservation pods are in no finding, and the ledger adds up."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import build
from gpuaudit.inventory.attribution import Method
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.kai_cases import RESERVATION_NS

DAYS = 2


@functools.cache
def _audit() -> tuple[dict[str, Any], AuditResult, dict[str, Any]]:
    sc = generate(60, DAYS, 11)
    snap = to_snapshot(sc)
    return sc.truth, run_checks(build(snap), Settings()), snap.prometheus


def _kai(entries: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (e["kind"], e["namespace"], e["name"])
        for e in entries
        if "kai" in e["namespace"] + e["name"]
    }


@pytest.mark.parametrize("code", ["GPU001", "GPU010", "GPU090"])
def test_the_kai_truth_is_what_the_audit_finds(code: str) -> None:
    truth, res, _ = _audit()
    found = {
        (f.resource.kind, f.resource.namespace, f.resource.name)
        for f in res.findings
        if f.code == code
    }
    planted = _kai(truth["planted"].get(code, []))
    near = _kai(truth["near_misses"].get(code, []))
    assert near
    assert planted <= found
    assert not near & found
    assert {k for k in found if "kai" in k[1] + k[2]} == planted


def test_the_idle_fraction_is_half_a_gpu() -> None:
    _, res, _ = _audit()
    (f,) = [f for f in res.findings if f.code == "GPU001" and f.resource.namespace == "kai-infer"]
    assert f.resource.gpus == 0.5
    assert f.impact.gpu_hours == pytest.approx(0.5 * 24 * DAYS)


def test_no_finding_names_a_reservation_pod() -> None:
    _, res, _ = _audit()
    for f in res.findings:
        text = json.dumps([f.message, f.recommendation, f.pods, f.evidence], default=str)
        assert RESERVATION_NS not in text and "gpu-reservation-" not in text, f.code


def test_the_reserved_gpus_add_up_in_the_ledger() -> None:
    truth, res, _ = _audit()
    book = res.attribution
    assert book is not None
    # GPU 0: the idle pod's half and the reservation's half; GPU 1: two halves; and
    # `kai_gap_cases`' GPU, its fraction pods' shares and the reservation pod's rest.
    hours = 24 * DAYS
    gaps = truth["kai_ended"]["gpu_hours"]
    reserved = sum(v for k, v in gaps.items() if k.startswith(RESERVATION_NS + "/"))
    fractions = sum(gaps.values()) - reserved
    assert book.attributed[Method.KAI_FRACTION.value] == pytest.approx(1.5 * hours + fractions)
    assert book.attributed[Method.KAI_RESERVED.value] == pytest.approx(0.5 * hours + reserved)
    assert book.allocated_gpu_hours == pytest.approx(res.summary.allocated_gpu_hours)


def test_dcgm_names_the_reservation_pods_only() -> None:
    _, _, prom = _audit()
    pods = {
        (r["metric"].get("exported_namespace"), r["metric"].get("exported_pod", ""))
        for a in prom["act_max"]
        for r in a["body"]["data"]["result"]
    }
    assert any(ns == RESERVATION_NS for ns, _ in pods)
    assert not any(ns in ("kai-infer", "kai-lab") for ns, _ in pods)
