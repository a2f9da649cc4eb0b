"""GPU001's power corroboration live, through a real Prometheus: where dcgm-exporter exports
`DCGM_FI_DEV_POWER_MGMT_LIMIT` (the scenario's H100 nodes) the GPU's own limit is the maximum,
elsewhere (its L40S nodes) the model's board power; and a Prometheus with no limit series."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import nodes
from tests.support.promserver import Backfilled, backfill, prometheus

runner = CliRunner()
LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
BOARD = "model board power (gpuaudit.power)"


def _scan(url: str, b: Backfilled, *more: str) -> dict[str, Any]:
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    res = runner.invoke(app, ["scan", "-f", "json", "-q", "--prometheus-url", url, *window, *more])
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _gpu001(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    (f,) = [
        f
        for f in doc["findings"]
        if f["code"] == "GPU001" and f["resource"]["name"].startswith(prefix)
    ]
    return f


def test_limit_where_exported_board_power_elsewhere(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    doc = _scan(prom_url, scenario_tsdb, "--kubeconfig", str(kubeconfig))
    # H100s export their power limit here: it is the maximum.
    canary = _gpu001(doc, "llm-canary-0")
    assert canary["confidence"] == "high"
    assert canary["evidence"]["power_max_source"] == LIMIT
    assert canary["evidence"]["power_max_w"] == 700.0
    assert canary["evidence"]["power_above_idle"] == 0.0  # 0.098 x 700 = 68.6 W, under 70
    # L40S export none: their board power, 350 W, from gpuaudit.domain.power. 45 % of it is
    # (157.5 - 35) / (350 - 35) = 0.389 above idle, over the 0.25 margin.
    warm = _gpu001(doc, "rerank-warm-0")
    assert warm["confidence"] == "low"
    assert warm["evidence"]["power_max_source"] == BOARD
    assert warm["evidence"]["power_max_w"] == 350.0
    assert warm["evidence"]["power_mean_w"] == pytest.approx(157.5, abs=0.5)
    assert warm["evidence"]["power_above_idle"] == pytest.approx(122.5 / 315, abs=1e-3)
    assert "Confidence low" in warm["message"]
    cold = _gpu001(doc, "rerank-cold-0")
    assert cold["confidence"] == "high"
    assert cold["evidence"]["power_max_source"] == BOARD
    assert cold["evidence"]["fb_used_mib"] > 0
    # The setting drops the contradicted finding, and only it.
    dropped = _scan(
        prom_url, scenario_tsdb, "--kubeconfig", str(kubeconfig), "--set", "idle_power_drop=1"
    )
    names = {f["resource"]["name"] for f in dropped["findings"] if f["code"] == "GPU001"}
    assert not any(n.startswith("rerank-warm-0") for n in names)
    assert any(n.startswith("rerank-cold-0") for n in names)


@pytest.fixture(scope="module")
def no_limit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Backfilled]]:
    """A real Prometheus over a scenario whose exporters export no power limit."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nodes, "LIMIT_EXPORTED", frozenset())
        b = backfill(tmp_path_factory.mktemp("nolimit"), gpus=60, days=1, seed=5, scrape_s=600)
    with prometheus(b.tsdb) as url:
        yield url, b


def test_without_any_limit_series_the_board_power_serves(
    no_limit: tuple[str, Backfilled],
) -> None:
    url, b = no_limit
    doc = _scan(url, b, "--no-kubernetes")
    canary = _gpu001(doc, "llm-canary-0")
    assert canary["confidence"] == "high"
    assert canary["evidence"]["power_max_source"] == BOARD
    assert canary["evidence"]["power_max_w"] == 700.0
    assert _gpu001(doc, "rerank-warm-0")["confidence"] == "low"
    every = [f for f in doc["findings"] if f["code"] == "GPU001"]
    assert every and all(f["evidence"]["power_max_source"] != LIMIT for f in every)
