"""HAMi pods that ended in the window, through a real Prometheus (promtool-backfilled from the
generator's OpenMetrics) and the test API server: each holds its share for the time it ran, to
its containers' `finishedAt` (`gpuaudit.scenario.hami_cases`, `plant_hami_ended`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario.hami_cases import ENDED_NODE
from tests.support.promserver import Backfilled

runner = CliRunner()


def test_a_hami_pod_that_ended_is_charged_its_share_for_the_time_it_ran(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    res = runner.invoke(
        app,
        [
            "scan",
            "-f",
            "json",
            "-q",
            "--prometheus-url",
            prom_url,
            "--kubeconfig",
            str(kubeconfig),
            "--window",
            f"{scenario_tsdb.days}d",
            "--end",
            str(scenario_tsdb.end),
        ],
    )
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    on_node = [f for f in doc["findings"] if f["resource"].get("node") == ENDED_NODE]
    # hami-eval-idle: a quarter of a GPU, idle, to 3/7 of the window (hour 20 of 48); the pods
    # that ended are joined to their GPUs' series, not unmonitored.
    assert [(f["code"], f["resource"]["name"][:14]) for f in on_node] == [
        ("GPU001", "hami-eval-idle")
    ]
    idle = on_node[0]
    hours = 3 * scenario_tsdb.days * 24 // 7
    assert idle["resource"]["gpus"] == 0.25
    assert idle["impact"]["gpu_hours"] == 0.25 * hours
