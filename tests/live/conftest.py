from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaudit import snapshot
from gpuaudit.scenario import generate, write_openmetrics
from gpuaudit.sources.prometheus.rules import recording_rules
from tests.support.apiserver import KubeAPIServer, make_tls
from tests.support.promserver import Backfilled, backfill, create_blocks, free_port, prometheus
from tests.support.raw_snapshot import raw_snapshot
from tests.support.vmalert import Replayed, replay, serving, write_rules
from tests.support.vmserver import (
    UUID_SHARDS,
    import_lines,
    import_samples,
    victoriametrics,
    wait_for_samples,
)


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


@pytest.fixture(scope="session")
def vmalert_replayed(
    scenario_tsdb: Backfilled, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replayed]:
    """A VictoriaMetrics holding the scenario's raw series and what `gpuaudit rules`' recording
    groups record over them, replayed by vmalert from an hour before the window (every bucket of
    the window has its evaluations) to its end."""
    tmp = tmp_path_factory.mktemp("vmalert")
    b = scenario_tsdb
    start, end = b.end - b.days * 86400 - 3600, b.end
    groups = recording_rules("exported")
    rules = write_rules(tmp / "rules.yml", groups)
    with _victoria(b, tmp) as url:
        written = replay(url, rules, start, end, tmp / "vmalert.log")
        yield Replayed(url, start, end, groups, written)


@pytest.fixture(scope="session")
def vmalert_proxied(
    scenario_tsdb: Backfilled, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replayed]:
    """A VictoriaMetrics holding the scenario's raw series and what the 5-minute recording group
    records over them (replayed by vmalert over the window and an hour before it), whose rules
    API (`-vmalert.proxyURL`) lists that group from a vmalert that runs it."""
    tmp = tmp_path_factory.mktemp("vmproxied")
    b = scenario_tsdb
    start, end = b.end - b.days * 86400 - 3600, b.end
    groups = [g for g in recording_rules("exported") if g["interval"] == "5m"]
    rules = write_rules(tmp / "rules.yml", groups)
    port = free_port()
    with _victoria(b, tmp, f"-vmalert.proxyURL=http://127.0.0.1:{port}") as url:
        written = replay(url, rules, start, end, tmp / "replay.log")
        with serving(url, rules, port, tmp / "vmalert.log"):
            yield Replayed(url, start, end, groups, written)


@contextlib.contextmanager
def _victoria(scenario_tsdb: Backfilled, tmp: Path, *flags: str) -> Iterator[str]:
    """A real VictoriaMetrics fed the scenario through its import API."""
    with victoriametrics(tmp, *flags) as url:
        om = tmp / "s.om"
        with open(om, "w", encoding="utf-8") as fh:
            # The same scenario as the Prometheus fixture (see `scenario_tsdb`).
            write_openmetrics(generate(60, 2, 5, scrape_s=300), fh)
        import_samples(url, import_lines(om))
        om.unlink()
        snap = raw_snapshot(scenario_tsdb.snapshot_path)
        expected = sum(
            float(r["value"][1])
            for r in snap["prometheus"]["fb_used_count"][0]["body"]["data"]["result"]
        )
        wait_for_samples(
            url,
            "DCGM_FI_DEV_FB_USED",
            expected,
            scenario_tsdb.end,
            scenario_tsdb.days,
            shards=UUID_SHARDS,
        )
        yield url
