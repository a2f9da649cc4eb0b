"""Issue 32's closing condition: on a generated cluster with everything at once (MIG instances
without pod labels joined bucket by bucket, nodes without an exporter, DRA claims, KAI
Scheduler fractions, HAMi shares), the fleet figures (allocated, idle, mean activity) and the
capacity plan equal their recomputation from the snapshot's raw answers with plain Python, and
the attribution ledger sums exactly to the allocated GPU-hours."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import generate
from gpuaudit.scenario.emit import write_snapshot
from tests.support.raw_attribution import hami_tenants
from tests.support.raw_fleet import RawFleet, assert_summary_adds_up, fleet_from_raw, released_of
from tests.support.raw_packing import node_facts, peak_packing
from tests.support.raw_snapshot import raw_snapshot
from tests.test_capacity import _check_products, _raw_units

PRICES = {"H100": 6.88, "A100": 5.12, "L40S": 2.70, "GB200": 10.50}
"""The default prices per GPU-hour of the scenario's models."""
SCENARIOS = [(400, 2, 1), (400, 2, 2)]
"""400 GPUs over 2 days plant every case of a day or more (`generator._build`)."""

runner = CliRunner()


@pytest.fixture(scope="module", params=SCENARIOS, ids=lambda p: "-".join(map(str, p)))
def audited(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], dict[str, Any], RawFleet]:
    """(raw snapshot, JSON report with the plan after release, the fleet from raw answers)."""
    path = tmp_path_factory.mktemp("fleet") / "scenario.json.gz"
    write_snapshot(generate(*request.param), path)
    args = ["scan", "--snapshot", str(path), "-f", "json", "-q", "--what-if", "release-idle"]
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 1), res.output
    doc = raw_snapshot(Path(path))
    return doc, json.loads(res.stdout), fleet_from_raw(doc, PRICES)


def test_the_cluster_has_everything_at_once(
    audited: tuple[dict[str, Any], dict[str, Any], RawFleet],
) -> None:
    """Every mechanism the figures must count is in the scenario, with GPU-hours."""
    doc, report, raw = audited
    ledger = report["attribution"]
    for how in ("kubernetes_join", "dra_claim", "kai_fraction", "kai_reserved", "hami_share"):
        assert raw.by_method[how] > 0 and ledger["attributed"][how]["gpu_hours"] > 0, how
    for why in ("no_exporter", "no_pod_label", "time_slicing_without_virtual_gpus"):
        assert ledger["unattributed"][why]["gpu_hours"] > 0, why
    # Some HAMi pod on a GPU without DCGM series, some KAI node without an exporter.
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    hosts = {i["metric"]["Hostname"] for i in series}
    nodes = {n["metadata"]["name"] for page in doc["kubernetes"]["nodes"] for n in page["items"]}
    assert {n for n in nodes - hosts if "kai" in n}
    assert [t for t in hami_tenants(doc) if t["buckets"] is None]
    assert report["complete"], report["incomplete_reasons"]


def test_the_ledger_and_the_summary_add_up(
    audited: tuple[dict[str, Any], dict[str, Any], RawFleet],
) -> None:
    _, report, raw = audited
    assert_summary_adds_up(report, raw)


def _held(units: dict[str, Any], product: str) -> dict[float, float]:
    return {ts: sum(u[2] for u in cells.values()) for ts, cells in units[product].items()}


def _check_plan(doc: dict[str, Any], got: dict[str, Any], units: dict[str, Any]) -> None:
    """The plan's figures `got` (by product) against the raw units of each hour."""
    hours = int(doc["manifest"]["window"]["seconds"] / doc["manifest"]["window"]["step"])
    assert {p for p, q in got.items() if q["gpus_held"]["peak"] > 0} == set(units)
    _check_products(got, units, hours)
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    hosts = {i["metric"]["Hostname"] for i in series}
    facts = node_facts(doc)
    for product, q in got.items():
        held = _held(units, product) if product in units else {}
        # The product's nodes and their room in GPUs, cordoned ones included.
        mine = [f for f in facts.values() if f["product"] == product]
        assert (q["nodes"], q["nodes_cordoned"]) == (len(mine), sum(f["cordoned"] for f in mine))
        assert q["gpus"] == pytest.approx(sum(f["room"] for f in mine)), product
        # GPUs held without DCGM series: the units only the API shows.
        without = [
            sum(u[2] for k, u in cells.items() if k[0].startswith("api"))
            for cells in units.get(product, {}).values()
        ]
        assert q["gpus_without_dcgm"]["peak"] == pytest.approx(max(without, default=0.0))
        ran = {k[1] if k[0] == "mig" else k[-1] for c in units.get(product, {}).values() for k in c}
        assert q["nodes_without_dcgm"] == len(ran - hosts), product
        # The peak hour is an hour with the most GPUs held.
        if q["peak_hour"] is not None:
            at = datetime.fromisoformat(q["peak_hour"].replace("Z", "+00:00")).timestamp()
            assert held.get(at, 0.0) == pytest.approx(q["gpus_held"]["peak"]), product
            # The fewest nodes its holdings fit on, packed as the rule reads literally (no
            # whole-node gang at the peak here: gangs are not recomputed).
            assert q["whole_node_gang_members_at_peak"] == 0
            packing = peak_packing(doc, units[product][at], product, at)
            assert q["nodes_used_at_peak"] == list(packing.used), product
            assert q["min_nodes_at_peak"] == len(packing.used)
            unplaced = sum(i.size for i in packing.unplaced)
            assert q["unplaced_gpus"] == pytest.approx(unplaced, abs=1e-4), product
        used = q["nodes_used_at_peak"]
        assert len(used) == len(set(used)) == q["min_nodes_at_peak"] <= q["nodes"]
        assert {facts[n]["product"] if n in facts else product for n in used} <= {product}


def test_the_capacity_plan_adds_up(
    audited: tuple[dict[str, Any], dict[str, Any], RawFleet],
) -> None:
    """Per product: GPUs held, busy, of unknown activity and without DCGM series per hour,
    the nodes that ran GPU pods (and those without an exporter), the peak hour and its
    packing, as recomputed; the products' rooms add up to the fleet's GPUs."""
    doc, report, _ = audited
    cap = report["capacity"]
    _check_plan(doc, cap["by_product"], _raw_units(doc, {}))
    assert sum(q["gpus"] for q in cap["by_product"].values()) == report["summary"]["gpus_total"]
    # Every hour's GPUs held are at least the GPU-hours held in it (a MIG GPU counts whole,
    # a pod that held part of an hour counts its GPUs): summed, at least the allocated hours.
    step = doc["manifest"]["window"]["step"]
    held = sum(q["gpus_held"]["mean"] * q["hours_with_data"] for q in cap["by_product"].values())
    assert held * step / 3600 >= report["summary"]["allocated_gpu_hours"] - 0.01


def test_the_plan_after_release_adds_up(
    audited: tuple[dict[str, Any], dict[str, Any], RawFleet],
) -> None:
    """After releasing GPU001's and GPU002's pods (a KAI fraction pod's GPU with the last
    fraction pod of its group), as recomputed; what is freed is the difference."""
    doc, report, _ = audited
    cap = report["capacity"]
    after = cap["after_release_idle"]
    released = released_of(report)
    assert {tuple(r.split("/", 1)) for r in after["released"]} == set(released) and released
    _check_plan(doc, after["by_product"], _raw_units(doc, released))
    hours = report["window"]["hours"]
    for product, q in after["by_product"].items():
        before = cap["by_product"][product]
        freed = max(0, before["min_nodes_at_peak"] - q["min_nodes_at_peak"])
        assert q["nodes_freed"] == freed
        assert q["gpus_held"]["mean"] <= before["gpus_held"]["mean"] + 1e-4
        price = next((v for k, v in PRICES.items() if k in product), None)
        if price is not None:
            assert q["cost_freed"] == pytest.approx(q["gpus_freed"] * hours * price, abs=0.01)
    by_product = sum(q["released_reservations"] for q in after["by_product"].values())
    assert by_product >= after["released_reservations"] > 0
