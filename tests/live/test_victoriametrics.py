"""VictoriaMetrics as a second real backend, fed through its import API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.promserver import Backfilled

runner = CliRunner()


def _doc(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_victoriametrics_gives_the_same_audit(
    vm_url: str, scenario_tsdb: Backfilled, snapshot_without_k8s: Path
) -> None:
    live = _doc(
        "--prometheus-url",
        vm_url,
        "--window",
        "2d",
        "--end",
        str(scenario_tsdb.end),
        "--no-kubernetes",
    )
    offline = _doc("--snapshot", str(snapshot_without_k8s))
    for doc in (live, offline):
        doc.pop("generated_at")
        doc.pop("cluster")
    assert live == offline
