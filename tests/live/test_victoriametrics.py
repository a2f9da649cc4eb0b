"""VictoriaMetrics as a second real backend, fed through its import API."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import generate, write_openmetrics
from tests.conftest import raw_snapshot
from tests.promserver import Backfilled, free_port, require, server

runner = CliRunner()


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


@pytest.fixture(scope="module")
def vm_url(tmp_path_factory: pytest.TempPathFactory, scenario_tsdb: Backfilled) -> Iterator[str]:
    binary = require("victoria-metrics")
    tmp = tmp_path_factory.mktemp("vm")
    om = tmp / "s.om"
    with open(om, "w", encoding="utf-8") as fh:
        # The same scenario as the Prometheus fixture (see tests/live/conftest.py).
        write_openmetrics(generate(60, 2, 5, scrape_s=300), fh)
    port = free_port()
    cmd = [
        binary,
        f"-storageDataPath={tmp / 'data'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
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
    while True:
        q = httpx.post(
            f"{url}/api/v1/query",
            data={
                "query": "sum(count_over_time(DCGM_FI_DEV_FB_USED[3d]))",
                "time": str(scenario_tsdb.end),
            },
            timeout=10,
        ).json()
        got = q["data"]["result"]
        if got and float(got[0]["value"][1]) >= expected:
            return
        assert time.monotonic() < deadline, "imported data never became searchable"
        httpx.get(f"{url}/internal/force_flush", timeout=30)
        time.sleep(0.2)


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
    assert live == offline
