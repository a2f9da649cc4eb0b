"""The demo end to end: planted GPU001 cases, and the summary recomputed from raw answers."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.conftest import DEMO, DEMO_TRUTH

runner = CliRunner()


@pytest.fixture(scope="module")
def report() -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, ["scan", "--demo", "--format", "json", "--quiet"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_gpu001_names_exactly_the_planted_pods(report: dict) -> None:  # type: ignore[type-arg]
    truth = json.loads(DEMO_TRUTH.read_text())
    planted = {(p["namespace"], p["pod"]) for p in truth["planted"]["GPU001"]}
    near = {(p["namespace"], p["pod"]) for p in truth["near_misses"]["GPU001"]}
    found = {
        (f["resource"]["namespace"], f["resource"]["name"])
        for f in report["findings"]
        if f["code"] == "GPU001"
    }
    assert found == planted
    assert not found & near
    assert len(near) >= 2


def test_summary_recomputed_from_raw_prometheus_answers(report: dict) -> None:  # type: ignore[type-arg]
    """Independent of gpuaudit's parsing: read the snapshot's raw JSON with plain Python."""
    doc = json.loads(gzip.decompress(DEMO.read_bytes()))
    step = doc["manifest"]["window"]["step"]
    end = doc["manifest"]["window"]["end"]
    hours = (end - doc["manifest"]["window"]["start"]) / 3600
    prices = {"H100": 6.88, "A100": 5.12, "L40S": 2.70}
    body = doc["prometheus"]["act_hourly"][0]["body"]
    alloc = idle = cost = now = wsum = 0.0
    gpus_by_node: dict[str, set[str]] = defaultdict(set)
    for q in ("act_count", "util_count"):
        for item in doc["prometheus"][q][0]["body"]["data"]["result"]:
            gpus_by_node[item["metric"]["Hostname"]].add(item["metric"]["UUID"])
    for item in body["data"]["result"]:
        m = item["metric"]
        if not m.get("exported_pod"):
            continue
        frac = 1.0
        if "GPU_I_PROFILE" in m:
            frac = int(m["GPU_I_PROFILE"].split("g.")[0]) / 7
        price = next(v for k, v in prices.items() if k in m["modelName"])
        for ts, val in item["values"]:
            a = float(val)
            gh = frac * step / 3600
            alloc += gh
            wsum += a * gh
            if a < 0.05:
                idle += gh
                cost += gh * price
            if ts == end:
                now += frac
    s = report["summary"]
    assert s["gpus_total"] == sum(len(v) for v in gpus_by_node.values())
    assert s["allocated_gpu_hours"] == pytest.approx(alloc, abs=0.01)
    assert s["gpus_allocated_avg"] == pytest.approx(alloc / hours, abs=0.01)
    assert s["allocation_rate"] == pytest.approx(alloc / hours / s["gpus_total"], abs=1e-4)
    assert s["mean_activity"] == pytest.approx(wsum / alloc, abs=1e-4)
    assert s["idle_gpu_hours"] == pytest.approx(idle, abs=0.01)
    assert s["wasted_cost"] == pytest.approx(cost, abs=0.01)
    assert s["gpus_allocated_now"] == pytest.approx(now, abs=0.01)
