"""Moves priced against idle capacity as the scenario plants them (issue 32,
`gpuaudit.scenario.move_cases`): a move onto GPUs no pod held costs nothing extra, one onto
GPUs held by others is priced at list, and no move is made without traffic evidence."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu031_gang_spread as gpu031
from gpuaudit.checks.findings import Finding
from gpuaudit.inventory import Inventory, build
from gpuaudit.scenario.emit import to_snapshot
from gpuaudit.scenario.generator import Scenario, generate
from tests.support.factories import run_check

SIZES = [(400, 7, 1), (300, 1, 1)]
"""The demo's size, and a one-day window."""


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: "x".join(map(str, s)))
def planted(request: pytest.FixtureRequest) -> tuple[Scenario, Inventory, list[Finding]]:
    sc = generate(*request.param)
    inv = build(to_snapshot(sc), None)
    return sc, inv, run_check(gpu031, inv)


def _names(truth: dict[str, Any], key: str) -> set[tuple[str, str]]:
    return {(e["namespace"], e["name"]) for e in truth[key].get("GPU031", [])}


def test_the_truth_of_gpu031_holds(planted: tuple[Scenario, Inventory, list[Finding]]) -> None:
    sc, _, findings = planted
    found = {(f.resource.namespace, f.resource.name) for f in findings}
    assert ("inference-team", "distill-tp") in _names(sc.truth, "planted")
    assert _names(sc.truth, "planted") <= found
    assert not found & _names(sc.truth, "near_misses")


def test_a_move_onto_gpus_nobody_held_costs_nothing_extra(
    planted: tuple[Scenario, Inventory, list[Finding]],
) -> None:
    _, _, findings = planted
    (f,) = [f for f in findings if f.resource.name == "distill-tp"]
    move = f.evidence["move_cost"]
    assert move["unheld_share"] == 1.0
    assert move["gpu_hours_at_list"] == 0
    assert move["extra_cost"] == 0
    assert f.impact.cost == pytest.approx(move["gpu_hours_needed"] * 2.70)
    assert "sat unheld for 100 % of the job's hours, so the move costs nothing extra" in (f.message)
    assert f.targets == (f.evidence["nvlink_node"],)


def test_a_move_onto_gpus_others_held_is_priced_at_list(
    planted: tuple[Scenario, Inventory, list[Finding]],
) -> None:
    """The busy target had room at the job's start only: the same move, priced at list for
    the rest of its hours, costs more than it saves, and without traffic evidence no move is
    made at all, however free its target."""
    _, _, findings = planted
    names = {f.resource.name for f in findings}
    assert "distill-busy" not in names
    assert "distill-quiet" not in names
