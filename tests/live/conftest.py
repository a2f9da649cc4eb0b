from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaudit import snapshot
from tests.k8s_apiserver import KubeAPIServer, make_tls
from tests.promserver import Backfilled, backfill, prometheus, require


@pytest.fixture(scope="session")
def scenario_tsdb(tmp_path_factory: pytest.TempPathFactory) -> Backfilled:
    return backfill(tmp_path_factory.mktemp("scn"), gpus=60, days=2, seed=5, scrape_s=300)


@pytest.fixture(scope="session")
def prom_url(scenario_tsdb: Backfilled) -> Iterator[str]:
    with prometheus(scenario_tsdb.tsdb) as url:
        yield url


@pytest.fixture(scope="session")
def small_prom_url(scenario_tsdb: Backfilled) -> Iterator[str]:
    # 2,000 samples: one series' window (576 samples at 300 s over 2 days) fits, a whole-window
    # range query (about 100 series x 48 hourly points) does not and must be cut in time.
    with prometheus(scenario_tsdb.tsdb, "--query.max-samples=2000") as url:
        yield url


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def kube_server(
    scenario_tsdb: Backfilled, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeAPIServer]:
    # HTTPS with a CA the tests generate, as a real API server would be reached.
    tls = make_tls(tmp_path_factory.mktemp("tls"))
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir, tls=tls) as srv:
        yield srv


@pytest.fixture(scope="session")
def kubeconfig(kube_server: KubeAPIServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kube_server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")


@pytest.fixture(scope="session")
def snapshot_without_k8s(scenario_tsdb: Backfilled) -> Path:
    """The scenario's snapshot as a scan without Kubernetes access would record it."""
    why = "not read: --no-kubernetes"
    snap = snapshot.read(scenario_tsdb.snapshot_path).with_manifest(
        objects={"pods": why, "nodes": why}
    )
    snap = dataclasses.replace(snap, kubernetes={})
    out = scenario_tsdb.snapshot_path.parent / "no-k8s.snapshot.json"
    snapshot.write(snap, out)
    return out


@pytest.fixture(scope="session")
def empty_prom_url(
    scenario_tsdb: Backfilled, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real Prometheus that holds data over the scenario's window, but no DCGM series: a
    node-exporter gauge only, backfilled with promtool."""
    folder = tmp_path_factory.mktemp("nodcgm")
    om = folder / "node.om"
    start = scenario_tsdb.end - scenario_tsdb.days * 86400
    lines = ["# TYPE node_load1 gauge"]
    lines += [
        f'node_load1{{instance="node-{i}:9100"}} 0.5 {t}'
        for i in range(3)
        for t in range(start, scenario_tsdb.end + 1, 300)
    ]
    om.write_text("\n".join(lines) + "\n# EOF\n")
    tsdb = folder / "tsdb"
    subprocess.run(
        [
            require("promtool"),
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "-q",
            str(om),
            str(tsdb),
        ],
        check=True,
        capture_output=True,
    )
    with prometheus(tsdb) as url:
        yield url
