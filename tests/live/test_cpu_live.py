"""GPU041 live, through a real Prometheus and the test API server: cAdvisor's CPU counters,
kept to the containers of GPU pods in PromQL and read per bucket as Prometheus extrapolates
`increase`, and the pods' CPU limits as the API serves them give the scenario's CPU-starved
trainer its truth, as auditing the generator's snapshot does; a Prometheus without cAdvisor's
series gets GPU041 skipped with the reason, never a pod with enough CPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import generate, write_openmetrics
from gpuaudit.scenario.cpu_cases import without_cadvisor
from gpuaudit.scenario.emit import k8s_lists
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled, create_blocks, prometheus

runner = CliRunner()


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _gpu041(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{f['resource']['namespace']}/{f['resource']['name']}": f
        for f in doc["findings"]
        if f["code"] == "GPU041"
    }


def test_cpu_starved_pods_live_as_in_the_snapshot(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    live_doc = _scan("--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window)
    live = _gpu041(live_doc)
    offline = _gpu041(_scan("--snapshot", str(scenario_tsdb.snapshot_path)))
    truth = generate(60, scenario_tsdb.days, 5, scrape_s=300).truth["cpu_starved"]
    planted = {t["pod"]: t for t in truth if t["starved_hours"]}
    assert set(live) == set(offline) == set(planted) == {"ml-train/cpu-starved-trainer-0"}
    for pod, t in planted.items():
        f, g = live[pod], offline[pod]
        assert f["message"] == g["message"]
        assert f["recommendation"] == g["recommendation"]
        assert f["impact"]["gpu_hours"] == pytest.approx(t["idle_gpu_hours"])
        assert f["evidence"]["starved_hours"] == t["starved_hours"]
        (c,) = f["evidence"]["containers"]
        # The CPU limit as the API served it (the snapshot's allowlist keeps `cpu`), and the
        # CPU use and throttled share from Prometheus's `increase` of the ramping counters.
        assert c["cpu_limit_cores"] == 2.0
        assert c["cores_used_p95"] == pytest.approx(1.98, abs=1e-3)
        assert c["throttled_share"] == pytest.approx(0.6, abs=1e-4)
        assert c["recommended_cpu_limit"] == t["recommended_cpu_limit"]
        assert c["recommended_cpu_request"] == t["recommended_cpu_request"]


def test_without_cadvisor_series_gpu041_is_skipped_live(tmp_path: Path) -> None:
    """A small cluster whose Prometheus holds DCGM's series and no cAdvisor's: GPU041 is
    skipped, the reason naming cAdvisor, and no pod reads as having enough CPU."""
    sc = without_cadvisor(generate(24, 1, 3, scrape_s=1800))
    om, tsdb = tmp_path / "scenario.om", tmp_path / "tsdb"
    with open(om, "w", encoding="utf-8") as fh:
        write_openmetrics(sc, fh)
    create_blocks(om, tsdb)
    k8s = tmp_path / "k8s"
    k8s.mkdir()
    for name, lst in k8s_lists(sc).items():
        (k8s / f"{name}.json").write_text(json.dumps(lst))
    with prometheus(tsdb) as url, KubeAPIServer.from_dir(k8s) as srv:
        kubeconfig = srv.write_kubeconfig(tmp_path / "kubeconfig")
        doc = _scan(
            "--prometheus-url",
            url,
            "--kubeconfig",
            str(kubeconfig),
            "--window",
            "1d",
            "--end",
            str(sc.end),
        )
    assert not _gpu041(doc)
    skipped = {s["check"]: s["reason"] for s in doc["skipped"]}
    assert "cAdvisor" in skipped["GPU041"]
