"""Nothing is never healthy, live: a real Prometheus that holds no DCGM series, and a
`--cluster-label` that matches nothing in one that does, give an incomplete report, a loud
stderr and exit code 2 under a gate. And `--namespace` reports the namespaces' own GPUs, live
and on a snapshot alike."""

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
    assert live["namespaces"] == offline["namespaces"] == namespaces
    # A namespace with no pod and no GPU series is said, live as on the snapshot.
    for doc in (live, offline):
        warned = [w for w in doc["warnings"] if w.startswith("--namespace ")]
        assert bool(warned) == (namespaces == ["nowhere"])
    # The GPUs reported are the namespaces' own, live as on the snapshot: their measured
    # GPU-hours (the whole audit's breakdown rows for them) and their pods' GPU-hours no series
    # names; the ledgers add up to them.
    rows = {r["key"]: r for r in whole["breakdown"]["by_namespace"]}
    measured = sum(rows[ns]["allocated_gpu_hours"] for ns in namespaces if ns in rows)
    idle = sum(rows[ns]["idle_gpu_hours"] for ns in namespaces if ns in rows)
    for doc in (live, offline):
        unattributed = sum(v["gpu_hours"] for v in doc["attribution"]["unattributed"].values())
        s = doc["summary"]
        assert s["allocated_gpu_hours"] == pytest.approx(measured + unattributed, abs=0.02)
        assert s["idle_gpu_hours"] == pytest.approx(idle, abs=0.02)
        assert s["gpus_total"] < whole["summary"]["gpus_total"]
        for f in doc["findings"]:
            ns = f["resource"]["namespace"]
            assert ns in namespaces or any(f"{n}/" in f["message"] for n in namespaces)
    assert live["summary"]["gpus_total"] == offline["summary"]["gpus_total"]
    figures = ("attribution", "ledger", "capacity", "breakdown", "showback")
    assert {k: live[k] for k in figures} == {k: offline[k] for k in figures}
    done = ("findings_gpu_hours", "findings_cost")
    assert {k: v for k, v in live["summary"].items() if k not in done} == {
        k: v for k, v in offline["summary"].items() if k not in done
    }
    # The snapshot's checks see every namespace's pods (a live scan reads theirs only): a
    # finding that needs another namespace's pods (a preemption by a lower-priority pod) is
    # the snapshot's alone; every live finding is the snapshot's.
    on_snapshot = {f["fingerprint"]: f["message"] for f in offline["findings"]}
    assert all(on_snapshot.get(f["fingerprint"]) == f["message"] for f in live["findings"])
