from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpuaudit import snapshot
from gpuaudit.scenario import generate, write_openmetrics
from tests.support.apiserver import KubeAPIServer, make_tls
from tests.support.promserver import (
    Backfilled,
    backfill,
    create_blocks,
    free_port,
    prometheus,
    require,
    server,
)
from tests.support.raw_snapshot import raw_snapshot


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
    create_blocks(om, tsdb)
    with prometheus(tsdb) as url:
        yield url


def _import_lines(om: Path) -> Iterator[bytes]:
    """OpenMetrics (seconds) -> Prometheus text with millisecond timestamps, VM's import form."""
    buf: list[str] = []
    with open(om, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            head, ts = line.rsplit(" ", 1)
            buf.append(f"{head} {int(ts) * 1000}\n")
            if len(buf) >= 50_000:
                yield "".join(buf).encode()
                buf = []
    if buf:
        yield "".join(buf).encode()


@pytest.fixture(scope="session")
def vm_url(scenario_tsdb: Backfilled, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _victoria(scenario_tsdb, tmp_path_factory.mktemp("vm")) as url:
        yield url


@pytest.fixture(scope="session")
def small_vm_url(
    scenario_tsdb: Backfilled, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """VictoriaMetrics holding the same data, refusing a query that selects more than 60
    series (`-search.maxUniqueTimeseries`): every query over the scenario's GPUs is refused
    whole and must be sharded by UUID."""
    with _victoria(
        scenario_tsdb, tmp_path_factory.mktemp("vmsmall"), "-search.maxUniqueTimeseries=60"
    ) as url:
        yield url


@contextlib.contextmanager
def _victoria(scenario_tsdb: Backfilled, tmp: Path, *flags: str) -> Iterator[str]:
    """A real VictoriaMetrics fed the scenario through its import API."""
    binary = require("victoria-metrics")
    om = tmp / "s.om"
    with open(om, "w", encoding="utf-8") as fh:
        # The same scenario as the Prometheus fixture (see `scenario_tsdb`).
        write_openmetrics(generate(60, 2, 5, scrape_s=300), fh)
    port = free_port()
    cmd = [
        binary,
        f"-storageDataPath={tmp / 'data'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        *flags,
    ]
    try:
        with server(cmd, f"http://127.0.0.1:{port}", "/health", tmp / "vm.log") as url:
            r = httpx.post(
                f"{url}/api/v1/import/prometheus", content=_import_lines(om), timeout=120
            )
            assert r.status_code == 204, r.text
            httpx.get(f"{url}/internal/force_flush", timeout=30)
            om.unlink()
            _wait_until_searchable(url, scenario_tsdb)
            yield url
    finally:
        shutil.rmtree(tmp / "data", ignore_errors=True)


def _wait_until_searchable(url: str, scenario_tsdb: Backfilled) -> None:
    """Imported rows become searchable asynchronously: wait until every sample is there."""
    snap = raw_snapshot(scenario_tsdb.snapshot_path)
    expected = sum(
        float(r["value"][1])
        for r in snap["prometheus"]["fb_used_count"][0]["body"]["data"]["result"]
    )
    deadline = time.monotonic() + 60
    # One query per first hex digit of the UUID (and one for the rest): a server with a small
    # series limit (`small_vm_url`) answers each.
    shards = [f'UUID=~"GPU-[{d}{d.upper()}].*"' for d in "0123456789abcdef"]
    shards.append('UUID!~"GPU-[0-9a-fA-F].*"')
    while True:
        total = 0.0
        for shard in shards:
            q = httpx.post(
                f"{url}/api/v1/query",
                data={
                    "query": f"sum(count_over_time(DCGM_FI_DEV_FB_USED{{{shard}}}[3d]))",
                    "time": str(scenario_tsdb.end),
                },
                timeout=10,
            ).json()
            got = q["data"]["result"]
            total += float(got[0]["value"][1]) if got else 0.0
        if total >= expected:
            return
        assert time.monotonic() < deadline, "imported data never became searchable"
        httpx.get(f"{url}/internal/force_flush", timeout=30)
        time.sleep(0.2)
