"""GPU004, GPU005 and the ledger by cause live, through a real Prometheus and the test API server:
the crash-looping trainer's down time (from its container status as the API serves it) and the
cold-start server's start give their truth's GPU-hours, and the ledger adds up, as auditing the
generator's snapshot does."""

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


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", "--group-by-label", "team", *args])
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _found(doc: dict[str, Any], code: str) -> dict[str, float]:
    return {
        f"{f['resource']['namespace']}/{f['resource']['name']}": f["impact"]["gpu_hours"]
        for f in doc["findings"]
        if f["code"] == code and f["resource"]["node"] == "h100-cause-000"
    }


def test_restarts_and_starts_live_as_in_the_snapshot(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    live = _scan("--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window)
    offline = _scan("--snapshot", str(scenario_tsdb.snapshot_path))
    truth = generate(60, scenario_tsdb.days, 5, scrape_s=300).truth["causes"]
    for code, key in (("GPU004", "restarting_gpu_hours"), ("GPU005", "starting_gpu_hours")):
        expected = {t["pod"]: t[key] for t in truth if t.get(key)}
        assert _found(live, code) == _found(offline, code)
        assert _found(live, code) == pytest.approx(expected)
    assert live["ledger"] == offline["ledger"]
    ledger = live["ledger"]
    assert round(sum(ledger["by_cause"].values()), 2) == ledger["allocated_gpu_hours"]
    assert ledger["allocated_gpu_hours"] == live["summary"]["allocated_gpu_hours"]
