"""GPU022: a pod using more of a HAMi-shared GPU than HAMi granted it, in compute or memory; a
pod at exactly its share, or whose utilization HAMi does not measure, is not; without HAMi's
monitor the check is skipped with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu022_hami_over_share as gpu022
from gpuaudit.checks.findings import Severity
from gpuaudit.inventory import Capability, Inventory, build
from tests.support.factories import run_check, snapshot
from tests.support.hami import HOURS, MIB, UUID, device, hami_node, hami_pod, with_hami


def tenants(util: dict[str, list[float | None]], mem: dict[str, float] | None = None) -> Inventory:
    """Pods of 25 % (`a`, `b`, `c`) and 50 % (`d`) of one GPU, with HAMi's monitor series."""
    pods = [
        hami_pod("a", 25, MIB // 4),
        hami_pod("b", 25, MIB // 4),
        hami_pod("c", 25, MIB // 4),
        hami_pod("d", 25, MIB // 4),
    ]
    pods = [p for p in pods if p["metadata"]["name"] in util]
    snap = snapshot([device(0.6)], HOURS, pods=pods, nodes=[hami_node()])
    return build(with_hami(snap, util, mem))


def test_a_pod_above_its_cores_for_hours_is_over_its_share() -> None:
    inv = tenants({"a": [45.0] * 4 + [20.0] * 4, "b": [10.0] * HOURS})
    found = run_check(gpu022, inv)
    assert [f.resource.name for f in found] == ["a"]
    f = found[0]
    assert f.code == "GPU022" and f.severity is Severity.LOW
    assert f.impact.gpu_hours == pytest.approx(4 * 0.20)
    assert f.resource.gpus == pytest.approx(0.25)
    assert f.message == (
        f"Pod ml/a, which HAMi granted 0.25 of its H100 80GB HBM3 GPU {UUID}, ran above its "
        "25 % of the GPU's cores for 4.0 h (peak 45 %), 0.8 GPU-hours beyond its share."
    )
    assert "`nvidia.com/gpucores` to at least 45" in f.recommendation
    assert f.evidence["hours_over_share"] == 4.0


def test_a_pod_at_exactly_its_share_or_within_the_margin_is_not() -> None:
    inv = tenants({"a": [25.0] * HOURS, "b": [29.0] * HOURS}, mem={"a": MIB / 4, "b": 100.0})
    assert run_check(gpu022, inv) == []


def test_too_few_hours_over_are_not_a_finding() -> None:
    inv = tenants({"a": [60.0] + [10.0] * (HOURS - 1)})
    assert run_check(gpu022, inv, hami_over_min_hours=2.0) == []
    assert len(run_check(gpu022, inv)) == 1


def test_memory_above_the_grant_is_over_its_share_at_least_medium() -> None:
    inv = tenants({"a": [10.0] * HOURS}, mem={"a": MIB / 4 + 2048})
    (f,) = run_check(gpu022, inv)
    assert f.severity is Severity.MEDIUM
    assert "2,048 MiB above the 20,390 MiB HAMi granted it" in f.message
    assert f.impact.gpu_hours == pytest.approx(HOURS * 2048 / MIB)
    assert "`nvidia.com/gpumem` to at least 22438" in f.recommendation


def test_a_pod_whose_utilization_hami_does_not_measure_is_not_judged_by_it() -> None:
    # `gpucores: 0`: HAMi records no utilization for it (its series reads 0 or above), so no
    # compute finding, whatever it shows.
    pod = hami_pod("free", 0, MIB // 4)
    snap = snapshot([device(0.9)], HOURS, pods=[pod], nodes=[hami_node()])
    inv = build(with_hami(snap, {"free": [90.0] * HOURS}))
    assert run_check(gpu022, inv) == []


def test_without_hamis_monitor_the_check_is_skipped_with_the_reason() -> None:
    pods = [hami_pod("a", 25, MIB // 4)]
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[hami_node()]))
    skipped = _skipped(inv)
    assert "no HAMi vGPU monitor series" in skipped
    # And where nothing runs on HAMi, it says that.
    none = build(snapshot([device()], HOURS, pods=[], nodes=[hami_node()]))
    assert "no running pod holds a GPU share granted by HAMi" in _skipped(none)


def _skipped(inv: Inventory) -> str:
    result: Any = run_checks(inv, Settings(), checks=[by_code("GPU022")])
    skipped = {s.code: s.reason for s in result.skipped}
    assert Capability.HAMI not in inv.capabilities
    return str(skipped["GPU022"])
