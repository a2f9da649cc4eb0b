"""GPU071 and GPU011 live, through a real Prometheus: the violation counters' `increase` over the
window, as Prometheus extrapolates it, gives the scenario's throttled pods their truth's busy
GPU-hours lost and cause, and its straggler gang, as auditing the generator's snapshot does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import generate
from tests.support.promserver import Backfilled

runner = CliRunner()


def _codes(code: str, *args: str) -> dict[str, dict[str, Any]]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code in (0, 1), res.output
    doc = json.loads(res.stdout)
    return {
        f"{f['resource']['namespace']}/{f['resource']['name']}": f
        for f in doc["findings"]
        if f["code"] == code
    }


def _gpu071(*args: str) -> dict[str, dict[str, Any]]:
    return _codes("GPU071", *args)


def test_throttled_pods_live_as_in_the_snapshot(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    live = _gpu071("--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window)
    offline = _gpu071("--snapshot", str(scenario_tsdb.snapshot_path))
    assert live == offline
    truth = generate(60, scenario_tsdb.days, 5, scrape_s=300).truth["throttled"]
    planted = {t["pod"]: t for t in truth if t["cause"]}
    assert set(live) == set(planted)
    args = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window]
    gangs = _codes("GPU011", *args)
    assert gangs == _codes("GPU011", "--snapshot", str(scenario_tsdb.snapshot_path))
    assert set(gangs) == {"perf/llm-pretrain"}
    for pod, t in planted.items():
        assert live[pod]["impact"]["gpu_hours"] == pytest.approx(t["lost_gpu_hours"])
        assert live[pod]["evidence"]["cause"] == t["cause"]
        # The SM clock's window mean (sum_over_time / count_over_time) and the maximum.
        assert live[pod]["evidence"]["sm_clock_mean_mhz"] == t["sm_clock_mean_mhz"]
        assert live[pod]["evidence"]["max_sm_clock_mhz"] == t["max_sm_clock_mhz"]
