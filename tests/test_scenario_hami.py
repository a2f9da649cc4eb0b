"""GPUs shared by HAMi, end to end on a generated scenario (`gpuaudit.scenario.hami_cases`): in
each of HAMi's metric spellings, each check names exactly the planted pods of the node and none
of its near-misses, every pod holds its share of its GPU (a 25 % pod 0.25 GPU, not the whole GPU
OpenCost charges it, opencost/opencost#3828), and the ledger adds up to the allocated GPU-hours."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.ledger import ledger
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import discover
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Capability, Inventory, Views, build
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.hami_cases import ENDED_NODE, NODE

DAYS = 2
HOURS = 24 * DAYS


@pytest.fixture(scope="module", params=["helm", "old"])
def audited(request: pytest.FixtureRequest) -> tuple[dict[str, Any], AuditResult, Inventory]:
    # `helm`: HAMi's current metric names, renamed `exported_*` by the ServiceMonitor;
    # `old`: a cluster of HAMi v2.8, its legacy names.
    sc = generate(48, DAYS, 11)
    inv = build(to_snapshot(sc, request.param))
    return sc.truth, run_checks(inv, Settings()), inv


def _pods(inv: Inventory, node: str = NODE) -> set[str]:
    pods = inv.pods
    return set(pods.loc[pods[C.NODE] == node, C.POD])


def _mine(truth: dict[str, Any], key: str, code: str, pods: set[str]) -> set[str]:
    return {e["name"] for e in truth[key].get(code, []) if e["name"] in pods}


@pytest.mark.parametrize("node", [NODE, ENDED_NODE])
@pytest.mark.parametrize("code", [c.code for c in discover()])
def test_each_check_names_exactly_the_planted_pods_of_the_node(
    audited: tuple[dict[str, Any], AuditResult, Inventory], code: str, node: str
) -> None:
    truth, result, inv = audited
    pods = _pods(inv, node)
    found = {f.resource.name for f in result.findings if f.code == code and f.resource.name in pods}
    assert found == _mine(truth, "planted", code, pods), code
    assert not found & _mine(truth, "near_misses", code, pods)


def test_the_cases_are_planted() -> None:
    truth = generate(48, DAYS, 11).truth
    assert {e["name"].rsplit("-", 2)[0] for e in truth["planted"]["GPU022"]} == {"hami-over"}
    near = {e["name"].rsplit("-", 2)[0] for e in truth["near_misses"]["GPU022"]}
    # hami-eval: hami-eval-idle and hami-eval-busy, which ended (`plant_hami_ended`).
    assert near == {
        "hami-idle",
        "hami-busy",
        "hami-exact",
        "hami-whole",
        "hami-eval",
        "hami-steady",
    }


def test_each_pod_holds_its_share_and_the_ledger_adds_up(
    audited: tuple[dict[str, Any], AuditResult, Inventory],
) -> None:
    _, _, inv = audited
    assert Capability.HAMI in inv.capabilities
    assert inv.complete, inv.incomplete_reasons  # HAMi's MiB and per cent are no GPU counts
    h = inv.holdings
    held = h[(h[C.NODE] == NODE) & h[C.HELD]]
    share = {p.rsplit("-", 2)[0]: f for p, f in zip(held[C.POD], held[C.FRACTION], strict=True)}
    assert share == pytest.approx(
        {
            "hami-idle": 0.25,
            "hami-busy": 0.25,
            "hami-over": 0.5,
            "hami-exact": 0.25,
            "hami-whole": 1.0,
        }
    )
    assert set(held[C.ATTRIBUTION]) == {Method.HAMI_SHARE.value}
    assert held[C.GPU_HOURS].sum() == pytest.approx(2.25 * HOURS)
    views = Views(inv, DEFAULT_PRICES)
    led = ledger(views)
    # The ended node's pods add 0.25 x 20 h, 0.5 x 24 h and 0.25 x 48 h.
    assert led.attributed[Method.HAMI_SHARE.value] == pytest.approx(2.25 * HOURS + 29.0)
    assert led.attributed_gpu_hours == pytest.approx(float(h.loc[h[C.HELD], C.GPU_HOURS].sum()))
    un = views.unattributed
    assert not set(un[C.POD]) & _pods(inv)  # every HAMi pod is joined to its GPU's series
    # The idle quarter's finding is a quarter of a GPU, in GPU-hours and cost alike.
    _, result, _ = audited
    idle = next(
        f for f in result.findings if f.code == "GPU001" and f.resource.name.startswith("hami-idle")
    )
    assert idle.resource.gpus == pytest.approx(0.25)
    assert idle.impact.gpu_hours == pytest.approx(0.25 * HOURS)
    assert idle.impact.cost == pytest.approx(0.25 * HOURS * views.price("NVIDIA L40S"))


def test_the_over_share_finding_says_what_it_took(
    audited: tuple[dict[str, Any], AuditResult, Inventory],
) -> None:
    _, result, _ = audited
    (f,) = [f for f in result.findings if f.code == "GPU022"]
    assert f.resource.name.startswith("hami-over") and f.resource.node == NODE
    assert "ran above its 50 % of the GPU's cores for 48.0 h" in f.message
    assert f.evidence["hours_over_share"] == HOURS
    assert 0.2 * HOURS < f.impact.gpu_hours < 0.25 * HOURS


def test_pods_that_ended_hold_their_share_for_the_time_they_ran(
    audited: tuple[dict[str, Any], AuditResult, Inventory],
) -> None:
    # hami-eval-idle ended at 3/7 of the window (hour 20), hami-eval-busy at half (hour 24).
    _, result, inv = audited
    h = inv.holdings
    held = h[(h[C.NODE] == ENDED_NODE) & h[C.HELD]]
    names = ("hami-eval-idle", "hami-eval-busy", "hami-steady")
    got = {
        next(n for n in names if p.startswith(n)): (f, hours, gpu_h, a)
        for p, f, hours, gpu_h, a in zip(
            held[C.POD],
            held[C.FRACTION],
            held[C.HOURS],
            held[C.GPU_HOURS],
            held[C.ATTRIBUTION],
            strict=True,
        )
    }
    share = Method.HAMI_SHARE.value
    assert got == {
        "hami-eval-idle": (pytest.approx(0.25), pytest.approx(20.0), pytest.approx(5.0), share),
        "hami-eval-busy": (pytest.approx(0.5), pytest.approx(24.0), pytest.approx(12.0), share),
        "hami-steady": (pytest.approx(0.25), pytest.approx(48.0), pytest.approx(12.0), share),
    }
    views = Views(inv, DEFAULT_PRICES)
    assert not set(views.unattributed[C.POD]) & _pods(inv, ENDED_NODE)
    idle = next(
        f
        for f in result.findings
        if f.code == "GPU001" and f.resource.name.startswith("hami-eval-idle")
    )
    assert idle.resource.gpus == pytest.approx(0.25)
    assert idle.impact.gpu_hours == pytest.approx(5.0)
