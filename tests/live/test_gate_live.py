"""Nothing is never healthy, live: a real Prometheus that holds no DCGM series, and a
`--cluster-label` that matches nothing in one that does, give an incomplete report, a loud
stderr and exit code 2 under a gate. And `--namespace` narrows a snapshot exactly as it narrows
a live collection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.promserver import Backfilled

runner = CliRunner()


def _window(b: Backfilled) -> list[str]:
    return ["--window", f"{b.days}d", "--end", str(b.end)]


def _scan(*args: str, code: int) -> tuple[dict[str, Any], str]:
    res = runner.invoke(app, ["scan", "-f", "json", *args])
    assert res.exit_code == code, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc, res.stderr


@pytest.mark.parametrize(
    ("gate", "code"),
    [(["--strict", "--fail-on", "low"], 2), (["--fail-on", "low"], 2), (["--strict"], 2), ([], 0)],
)
def test_a_prometheus_without_dcgm_series_is_an_audit_of_nothing(
    empty_prom_url: str, scenario_tsdb: Backfilled, gate: list[str], code: int
) -> None:
    doc, err = _scan(
        "--prometheus-url",
        empty_prom_url,
        "--no-kubernetes",
        *_window(scenario_tsdb),
        *gate,
        code=code,
    )
    assert doc["complete"] is False and doc["nothing_audited"] is True
    assert doc["summary"]["gpus_total"] == 0 and doc["checks_run"] == []
    n = len(doc["skipped"])
    assert n >= 14
    assert (
        f"nothing was audited: every check ({n}) was skipped for lack of data"
        in (doc["incomplete_reasons"])
    )
    summary = next(line for line in err.splitlines() if line.startswith("gpuaudit: 0 findings"))
    assert summary.endswith(f"; 0 checks ran, {n} skipped (INCOMPLETE: nothing was audited)")
    assert "WARNING: NOTHING WAS AUDITED" in err
    assert "Check that this Prometheus holds dcgm-exporter series in the window" in err


def test_a_cluster_label_that_matches_nothing_fails_the_gate_and_names_the_label(
    prom_url: str, scenario_tsdb: Backfilled
) -> None:
    args = ["--prometheus-url", prom_url, "--no-kubernetes", *_window(scenario_tsdb)]
    found, _ = _scan(*args, "--fail-on", "none", code=0)
    assert found["nothing_audited"] is False and found["findings"]
    doc, err = _scan(*args, "--cluster-label", "cluster=nowhere", "--fail-on", "high", code=2)
    assert doc["nothing_audited"] is True and doc["findings"] == []
    assert "--cluster-label cluster=nowhere names a cluster it holds" in err
    # -q keeps the summary line off stderr, never the warning.
    res = runner.invoke(
        app, ["scan", "-q", *args, "--cluster-label", "cluster=nowhere", "--fail-on", "high"]
    )
    assert res.exit_code == 2
    assert "NOTHING WAS AUDITED" in res.stderr and "gpuaudit: 0 findings" not in res.stderr


def _same(doc: dict[str, Any]) -> dict[str, Any]:
    out = dict(doc)
    out.pop("generated_at")
    out.pop("cluster")
    return out


@pytest.mark.parametrize("namespaces", [["ml-train"], ["batch", "serving"], ["nowhere"]])
def test_namespace_on_a_snapshot_is_what_a_live_scan_with_it_audits(
    prom_url: str,
    kubeconfig: Path,
    scenario_tsdb: Backfilled,
    namespaces: list[str],
) -> None:
    flags = [a for ns in namespaces for a in ("-n", ns)]
    live, _ = _scan(
        "--prometheus-url",
        prom_url,
        "--kubeconfig",
        str(kubeconfig),
        *_window(scenario_tsdb),
        *flags,
        code=0,
    )
    offline, _ = _scan("--snapshot", str(scenario_tsdb.snapshot_path), *flags, code=0)
    whole, _ = _scan("--snapshot", str(scenario_tsdb.snapshot_path), code=0)
    assert offline["findings"] != whole["findings"]
    # The snapshot also says when a namespace has no object at all (a live list cannot tell
    # an empty namespace from a typo); everything else is the same.
    warned = [w for w in offline["warnings"] if w.startswith("--namespace ")]
    offline["warnings"] = [w for w in offline["warnings"] if w not in warned]
    assert bool(warned) == (namespaces == ["nowhere"])
    assert _same(live) == _same(offline)
