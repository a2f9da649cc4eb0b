"""The scenario's root-cause cases (`gpuaudit.scenario.rootcause_cases`): GPU071 finds exactly the
throttled pods planted on the nodes whose exporter has the violation counters, with the truth's
busy GPU-hours lost and cause, and the GPUs of every other node are not measured (never 0)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import Capability, Inventory, build
from gpuaudit.inventory import columns as C
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.rootcause_cases import NEAR_NODE, NODE


@functools.cache
def _audit() -> tuple[dict[str, Any], Inventory, AuditResult]:
    sc = generate(48, 2, 3)
    inv = build(to_snapshot(sc))
    return sc.truth, inv, run_checks(inv, Settings())


def test_the_truth_is_what_gpu071_finds() -> None:
    truth, _, res = _audit()
    found = {(f.resource.namespace, f.resource.name) for f in res.findings if f.code == "GPU071"}
    planted = {(e["namespace"], e["name"]) for e in truth["planted"]["GPU071"]}
    near = {(e["namespace"], e["name"]) for e in truth["near_misses"]["GPU071"]}
    assert found == planted and near and not near & found


def test_lost_gpu_hours_and_cause_are_the_truths() -> None:
    truth, _, res = _audit()
    by_pod = {
        f"{f.resource.namespace}/{f.resource.name}": f for f in res.findings if f.code == "GPU071"
    }
    for t in truth["throttled"]:
        if not t["cause"]:
            continue
        f = by_pod[t["pod"]]
        assert f.impact.gpu_hours == pytest.approx(t["lost_gpu_hours"])
        assert f.evidence["busy_gpu_hours"] == pytest.approx(t["busy_gpu_hours"])
        assert f.evidence["cause"] == t["cause"]
        assert f.resource.node == t["node"]


def test_only_the_node_with_the_counters_is_measured() -> None:
    _, inv, _ = _audit()
    assert Capability.THROTTLING in inv.capabilities
    h = inv.holdings
    here = h[C.NODE].isin({NODE, NEAR_NODE})
    assert h.loc[here, C.THROTTLED_LOST].notna().all()
    assert h.loc[~here, C.THROTTLED_LOST].isna().all()
    busy = h[C.ACT_MEAN] * h[C.GPU_HOURS]
    assert (h.loc[here, C.THROTTLED_LOST] <= busy[here] + 1e-9).all()


def test_the_truth_is_what_gpu011_finds() -> None:
    truth, _, res = _audit()
    found = {(f.resource.namespace, f.resource.name): f for f in res.findings if f.code == "GPU011"}
    planted = {(e["namespace"], e["name"]) for e in truth["planted"]["GPU011"]}
    near = {(e["namespace"], e["name"]) for e in truth["near_misses"]["GPU011"]}
    assert set(found) == planted and near and not near & set(found)
    for t in truth["stragglers"]:
        ns, name = t["gang"].split("/")
        if not t["waiting_gpu_hours"]:
            continue
        f = found[(ns, name)]
        assert f.impact.gpu_hours == pytest.approx(t["waiting_gpu_hours"])
        assert f.resource.node == t["node"] and f.evidence["straggler"]["pod"] == t["member"]


def test_nothing_else_reports_the_cases() -> None:
    _, _, res = _audit()
    codes = {f.code for f in res.findings if f.resource.namespace == "perf"}
    assert codes == {"GPU011", "GPU071"}


def test_sm_clocks_are_the_truths_on_the_measured_nodes_only() -> None:
    # A card throttled s of each hour runs at 1,380 MHz then and 1,980 MHz otherwise.
    truth, inv, res = _audit()
    by_pod = {
        f"{f.resource.namespace}/{f.resource.name}": f for f in res.findings if f.code == "GPU071"
    }
    assert {t["pod"]: t["sm_clock_mean_mhz"] for t in truth["throttled"]} == {
        "perf/power-capped-0": 1800,
        "perf/hot-aisle-0": 1680,
        "perf/near-cap-0": 1950,
        "perf/llm-pretrain-1": 1740,
        "perf/vit-tune-0": 1800,
    }
    for t in truth["throttled"]:
        if not t["cause"]:
            continue
        ev = by_pod[t["pod"]].evidence
        assert ev["sm_clock_mean_mhz"] == t["sm_clock_mean_mhz"]
        assert ev["max_sm_clock_mhz"] == t["max_sm_clock_mhz"] == 1980
        assert f"{t['sm_clock_mean_mhz']:,} MHz" in by_pod[t["pod"]].message
    h = inv.holdings
    here = h[C.NODE].isin({NODE, NEAR_NODE})
    assert (h.loc[here, C.SM_CLOCK_MAX] == 1980).all()
    assert h.loc[here, C.SM_CLOCK_MEAN].between(1380, 1980).all()
    assert h.loc[~here, [C.SM_CLOCK_MEAN, C.SM_CLOCK_MAX]].isna().all().all()
