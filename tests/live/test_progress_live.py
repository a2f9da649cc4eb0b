"""A live scan reports each stage as it goes: the Prometheus queries counted out of those
planned, every Kubernetes list page as a note, then the inventory and the checks."""

from __future__ import annotations

from pathlib import Path

from gpuaudit.app import config, pipeline
from tests.support.promserver import Backfilled
from tests.test_progress import Recorder


def test_a_live_scan_reports_queries_and_kubernetes_lists(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    b = scenario_tsdb
    given = {
        "prometheus_url": prom_url,
        "kubeconfig": kubeconfig,
        "window": f"{b.days}d",
        "end": str(b.end),
        "format": "json",
        "output": tmp_path / "r.json",
    }
    rec = Recorder()
    pipeline.run(config.for_scan(given), progress=rec)
    assert rec.stages() == [
        "querying Prometheus",
        "listing Kubernetes objects",
        "building the inventory",
        "running the checks",
    ]
    queries = rec.ticks("querying Prometheus")
    done, total = queries[-1]
    assert total and done == total and len(queries) >= 10
    notes = [e[2] for e in rec.events if e[0] == "note" and e[1] == "listing Kubernetes objects"]
    assert any(str(n).startswith("pods: ") and " read (" in str(n) for n in notes), notes
    assert any(str(n).startswith("nodes: ") for n in notes), notes
