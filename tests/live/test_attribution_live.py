"""The attribution ledger through a real Prometheus (promtool-backfilled from the generator's
OpenMetrics) and the test API server: time-sliced GPUs with and without virtual GPUs, a MIG
node whose exporter labels no pod, a node without an exporter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.promserver import Backfilled

runner = CliRunner()


def _live(prom_url: str, kubeconfig: Path, b: Backfilled) -> dict[str, Any]:
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
            f"{b.days}d",
            "--end",
            str(b.end),
        ],
    )
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_the_live_ledger_adds_up_and_names_each_way(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    doc = _live(prom_url, kubeconfig, scenario_tsdb)
    book = doc["attribution"]
    parts = [v["gpu_hours"] for side in ("attributed", "unattributed") for v in book[side].values()]
    assert round(sum(parts), 2) == doc["summary"]["allocated_gpu_hours"]
    hours = scenario_tsdb.days * 24
    # Eight replica holders at a quarter GPU each, four of them on each of two GPUs with
    # virtual GPUs, two (one per GPU) labelled without: ten quarters of the window, held.
    assert book["attributed"]["shared_split"]["gpu_hours"] == round(10 * 0.25 * hours, 2)
    # All eight 3g.40gb instances of the unlabelled MIG node, joined to their only pod; on the
    # second such node (`timejoin_cases`), the 3g.40gb instances joined to the idle pod to hour
    # 20 and to the next from 115 s before hour 23, the 2g.20gb ones to each of two pods but in
    # the 3 hours both ran.
    assert book["attributed"]["kubernetes_join"]["gpu_hours"] == round(
        8 * 3 / 7 * (hours + 20 + 25 + 115 / 3600) + 8 * 2 / 7 * (21 + 24), 2
    )
    hidden = book["unattributed"]["time_slicing_without_virtual_gpus"]
    assert hidden == {"gpu_hours": round(3 * 0.25 * hours, 2), "pods": 3}
    assert book["unattributed"]["no_pod_label"]["pods"] == 4
    assert book["unattributed"]["no_exporter"]["pods"] >= 1


def test_live_findings_say_shared_and_why_unaudited(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    doc = _live(prom_url, kubeconfig, scenario_tsdb)
    idle = [
        f
        for f in doc["findings"]
        if f["code"] == "GPU001" and f["resource"]["name"].startswith("ts-vgpu-0-")
    ]
    assert len(idle) == 4
    assert all("wastes its replica, not the GPU" in f["message"] for f in idle)
    assert all(f["evidence"]["shared_replicas"] == 4 for f in idle)
    assert not [
        f
        for f in doc["findings"]
        if f["code"] == "GPU001" and f["resource"]["name"].startswith("ts-vgpu-1-")
    ]
    hidden = sorted(
        f["resource"]["name"]
        for f in doc["findings"]
        if f["code"] == "GPU080" and f["resource"]["name"].startswith("ts-single-")
    )
    assert len(hidden) == 3 and all(n.startswith("ts-single-0-") for n in hidden)
    unlabelled = [
        f
        for f in doc["findings"]
        if f["code"] == "GPU080" and f["evidence"].get("attribution") == "no_pod_label"
    ]
    assert sorted(f["resource"]["name"][:11] for f in unlabelled) == [
        "mig-eval-0",
        "mig-serve-0",
        "mig-small-0",
        "mig-small-1",
    ]
    # Of the two pods that held the 2g.20gb instances in turn, only the hours both ran.
    hours = {f["resource"]["name"]: f["evidence"]["hours"] for f in unlabelled}
    assert (hours["mig-eval-0"], hours["mig-serve-0"]) == (3.0, round(2 + 115 / 3600, 2))
    # The idle pod that held the 3g.40gb instances first, ended, is found idle, not unmonitored.
    idle = {f["resource"]["name"] for f in doc["findings"] if f["code"] == "GPU001"}
    assert "mig-prep-0" in idle and "mig-prep-0" not in {f["resource"]["name"] for f in unlabelled}
