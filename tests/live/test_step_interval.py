"""`--step` is checked against the scrape interval measured on a real Prometheus before the
collection runs, whatever the step: the scenario is scraped every 300 s, so a 2-minute bucket
(which holds one sample or none) is refused with one line naming both values and the fix, and
10-minute or hourly buckets are accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.prometheus.discovery import measure_interval
from gpuaudit.sources.prometheus.http import PromClient, PromConfig
from tests.support.promserver import Backfilled

runner = CliRunner()


def _window(b: Backfilled) -> list[str]:
    return ["--window", f"{b.days}d", "--end", str(b.end)]


@pytest.mark.parametrize("command", [["scan"], ["snapshot", "save"]])
def test_a_step_below_the_scrape_interval_is_refused(
    prom_url: str, scenario_tsdb: Backfilled, command: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "never-written.json"
    if command[0] == "snapshot":
        command = [*command, str(out)]
    res = runner.invoke(
        app,
        [*command, "--prometheus-url", prom_url, "--no-kubernetes", "--step", "120s"]
        + _window(scenario_tsdb),
    )
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines == [
        "gpuaudit: error: --step 2m is shorter than the scrape interval of the DCGM series "
        "(300 s): use --step 5m or longer"
    ]
    assert not out.exists()


@pytest.mark.parametrize("step", ["600s", None])
def test_a_step_at_or_above_the_scrape_interval_is_accepted(
    prom_url: str, scenario_tsdb: Backfilled, step: str | None
) -> None:
    chosen = ["--step", step] if step else []
    res = runner.invoke(
        app,
        ["scan", "-f", "json", "-q", "--prometheus-url", prom_url, "--no-kubernetes", *chosen]
        + _window(scenario_tsdb),
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["scrape_interval_s"] == pytest.approx(300)


def test_the_interval_is_measured_on_the_server_whatever_the_step(
    prom_url: str, scenario_tsdb: Backfilled
) -> None:
    """One query, the same answer at any step: 12 samples an hour on every GPU."""
    with PromClient(PromConfig(prom_url)) as client:
        got = measure_interval(client, scenario_tsdb.end, "", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        assert client.requests == 1
    assert got is not None
    assert got.seconds == pytest.approx(300)
    assert got.gpus >= 60
    assert 276 < got.at_least <= 300


def test_victoriametrics_gives_the_same_interval(vm_url: str, scenario_tsdb: Backfilled) -> None:
    with PromClient(PromConfig(vm_url)) as client:
        got = measure_interval(client, scenario_tsdb.end, "", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert got is not None
    assert got.seconds == pytest.approx(300)
