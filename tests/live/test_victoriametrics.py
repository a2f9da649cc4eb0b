"""VictoriaMetrics as a second real backend, fed through its import API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.sources.prometheus.http import PromClient, PromConfig
from gpuaudit.sources.prometheus.planner import SHARDS
from tests.support.promserver import Backfilled

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
    # MetricsQL's `increase` neither extrapolates nor starts where PromQL's does (docs/domain.md,
    # Throttling): the violation counters' figures differ, the findings do not.
    assert _counters_aside(live) == _counters_aside(offline)
    assert any(f["code"] == "GPU071" for f in offline["findings"])


def _counters_aside(doc: dict[str, Any]) -> dict[str, Any]:
    """The report with what the violation counters' `increase` sets put aside: GPU071's
    figures (its findings, their fingerprints and resources stay; the summary's totals of the
    findings' impact go) and the ledger's split of productive and throttled GPU-hours (their
    sum stays; the effective GPUs, productive GPU-hours over the window, go)."""
    out = json.loads(json.dumps(doc))
    for f in out["findings"]:
        if f["code"] == "GPU071":
            for key in ("evidence", "impact", "message"):
                f.pop(key)
    for key in ("findings_gpu_hours", "findings_cost"):
        out["summary"].pop(key)
    ledger = out["ledger"]
    ledger.pop("effective_gpus")
    for causes in (ledger["by_cause"], *ledger["by_namespace"].values()):
        if "throttled" in causes:
            causes["productive"] = round(causes["productive"] + causes.pop("throttled"), 1)
    return out


def test_a_series_limit_is_met_by_sharding(
    small_vm_url: str, vm_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    """A VictoriaMetrics that refuses any query selecting more than 60 series (its
    `-search.maxUniqueTimeseries`, whose 422 names the limit only at the end of a long text)
    gives the same audit as one without the limit: each refused query is sharded by UUID at
    once, never cut in time, and the manifest's plan says how."""
    args = ["--window", "2d", "--end", str(scenario_tsdb.end), "--no-kubernetes"]
    limited = _doc("--prometheus-url", small_vm_url, *args)
    whole = _doc("--prometheus-url", vm_url, *args)
    for doc in (limited, whole):
        doc.pop("generated_at")
        doc.pop("cluster")
    assert limited == whole
    out = tmp_path / "s.json"
    res = runner.invoke(
        app, ["snapshot", "save", "--prometheus-url", small_vm_url, *args, str(out), "-q"]
    )
    assert res.exit_code == 0, res.output
    plan = snapshot.read(out).manifest.plan
    sharded = {qid: chunks for qid, chunks in plan.items() if any(c[2] for c in chunks)}
    assert sharded, plan
    for chunks in sharded.values():
        # Sharded whole: every piece spans the query's whole range; none was cut in time.
        assert len({(c[0], c[1]) for c in chunks}) == 1
        # Finer than the first three shards somewhere (60 series are fewer than a third).
        assert all(c[2] for c in chunks)
    assert any(c[2] not in SHARDS for chunks in sharded.values() for c in chunks)


def test_a_range_off_the_step_grid_is_answered_where_it_was_asked(
    vm_url: str, scenario_tsdb: Backfilled
) -> None:
    """VictoriaMetrics moves a range query of 50 points or more onto multiples of its step
    unless asked not to (`nocache`): gpuaudit's range queries come back at the times they asked
    for, as hourly buckets ending on rules evaluated off the hour need."""
    end = scenario_tsdb.end - 3600 + 67
    start = end - 47 * 3600
    with PromClient(PromConfig(url=vm_url)) as client:
        ans = client.query_range("count_over_time(DCGM_FI_DEV_FB_USED[3600s])", start, end, 300)
    stamps = {float(t) for r in ans.body["data"]["result"] for t, _ in r["values"]}
    assert stamps and min(stamps) >= start and all((t - start) % 300 == 0 for t in stamps)
