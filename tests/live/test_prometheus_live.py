"""Live scans through a real Prometheus give what auditing the generator's snapshot gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.promserver import Backfilled

runner = CliRunner()


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _live(url: str, b: Backfilled, *extra: str) -> dict[str, Any]:
    return _scan(
        "--prometheus-url",
        url,
        "--window",
        f"{b.days}d",
        "--end",
        str(b.end),
        "--no-kubernetes",
        *extra,
    )


def _figures(doc: dict[str, Any]) -> list[Any]:
    """What must not depend on the source: findings' figures and the summary."""
    return [
        doc["summary"],
        [
            (
                f["code"],
                f["severity"],
                f["resource"],
                f["message"],
                f["impact"],
                {k: v for k, v in f["evidence"].items() if k != "owner"},
            )
            for f in doc["findings"]
        ],
    ]


def test_live_scan_equals_snapshot_audit(prom_url: str, scenario_tsdb: Backfilled) -> None:
    live = _live(prom_url, scenario_tsdb)
    offline = _scan("--snapshot", str(scenario_tsdb.snapshot_path))
    assert live["complete"] is True
    assert live["findings"], "the scenario plants idle reservations"
    assert _figures(live) == _figures(offline)
    # Without the Kubernetes API, checks that need it say so rather than pass silently.
    assert live["summary"]["gpus_total"] == offline["summary"]["gpus_total"]


def test_small_max_samples_cuts_queries_and_keeps_figures(
    small_prom_url: str, prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "cut.json"
    res = runner.invoke(
        app,
        [
            "snapshot",
            "save",
            str(out),
            "--prometheus-url",
            small_prom_url,
            "--window",
            "2d",
            "--end",
            str(scenario_tsdb.end),
            "--no-kubernetes",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    manifest = json.loads(out.read_text())["manifest"]
    plan = manifest["plan"]
    assert len(plan["act_hourly"]) > 1, "the hourly query must have been cut in time"
    assert len(plan["act_sum"]) > 1, "the window query must have been cut in time"
    cut = _scan("--snapshot", str(out))
    whole = _live(prom_url, scenario_tsdb)
    assert _figures(cut) == _figures(whole)


def test_snapshot_save_then_scan_reproduces_the_live_report(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "s.json.gz"
    args = [
        "--prometheus-url",
        prom_url,
        "--window",
        "2d",
        "--end",
        str(scenario_tsdb.end),
        "--no-kubernetes",
    ]
    assert runner.invoke(app, ["snapshot", "save", str(out), *args, "-q"]).exit_code == 0
    live = _live(prom_url, scenario_tsdb)
    replay = _scan("--snapshot", str(out))
    live.pop("generated_at")
    replay.pop("generated_at")
    assert live == replay


def test_cluster_label_selects_nothing_when_absent(
    prom_url: str, scenario_tsdb: Backfilled
) -> None:
    doc = _live(prom_url, scenario_tsdb, "--cluster-label", "cluster=elsewhere")
    assert doc["findings"] == []
    assert {s["check"] for s in doc["skipped"]} >= {"GPU001"}


def test_unreachable_prometheus_is_one_clear_line() -> None:
    res = runner.invoke(
        app,
        [
            "scan",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--timeout",
            "2",
            "--no-kubernetes",
            "-q",
        ],
    )
    assert res.exit_code == 2
    assert "cannot reach Prometheus" in res.output
    assert "Traceback" not in res.output
