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


def test_the_oom_killed_containers_memory_live_as_in_the_snapshot(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    """cAdvisor's working set through the real Prometheus (`memory_working_set_max`, kept to
    GPU pods by `and on (namespace, pod)`) and the memory limit from the test API server's pod
    give GPU004 the truth's figures and recommended limit."""
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    live = _scan("--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window)
    offline = _scan("--snapshot", str(scenario_tsdb.snapshot_path))
    truth = generate(60, scenario_tsdb.days, 5, scrape_s=300).truth["causes"]
    (t,) = [e for e in truth if "memory_limit" in e]

    def gpu004(doc: dict[str, Any]) -> dict[str, Any]:
        (f,) = [
            f
            for f in doc["findings"]
            if f["code"] == "GPU004" and f["resource"]["node"] == "h100-cause-000"
        ]
        return f  # type: ignore[no-any-return]

    f = gpu004(live)
    assert f["evidence"] == gpu004(offline)["evidence"]
    assert f["message"] == gpu004(offline)["message"]
    assert f["evidence"]["memory_working_set_max_bytes"] == t["memory_working_set_max_bytes"]
    assert f["evidence"]["memory_limit_bytes"] == 16 * 2**30
    assert f["evidence"]["memory_recommended_limit"] == t["memory_recommended_limit"]
