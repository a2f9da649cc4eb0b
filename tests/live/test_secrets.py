"""Tokens, passwords and client keys never reach output, logs, errors or snapshots."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.k8s_apiserver import DEFAULT_TOKEN, KubeAPIServer
from tests.promserver import Backfilled

runner = CliRunner()
PROM_TOKEN = "prom-s3cret-9d8c7b6a"
PROM_PASSWORD = "hunter2-prom-pass"


def _secrets(kube_server: KubeAPIServer) -> list[str]:
    out = [DEFAULT_TOKEN, PROM_TOKEN, PROM_PASSWORD]
    if kube_server.tls is not None:
        key = Path(kube_server.tls.client_key).read_text()
        out += [line for line in key.splitlines() if line and not line.startswith("-----")]
    return out


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_no_secret_in_reports_snapshots_or_errors(
    fmt: str,
    prom_url: str,
    kube_server: KubeAPIServer,
    scenario_tsdb: Backfilled,
    tmp_path: Path,
) -> None:
    kc = kube_server.write_kubeconfig(tmp_path / "kubeconfig", client_cert=True)
    window = ["--window", "2d", "--end", str(scenario_tsdb.end)]
    snap = tmp_path / "s.json.gz"
    args = [
        "--prometheus-url",
        prom_url,
        "--kubeconfig",
        str(kc),
        "--prometheus-token",
        PROM_TOKEN,
        "-H",
        "X-Scope-OrgID: tenant-1",
        *window,
    ]
    saved = runner.invoke(app, ["snapshot", "save", str(snap), *args])
    assert saved.exit_code == 0, saved.output
    report = runner.invoke(app, ["scan", "-f", fmt, *args])
    assert report.exit_code == 0, report.output
    replay = runner.invoke(app, ["scan", "-f", fmt, "--snapshot", str(snap)])
    # A wrong Prometheus password and an unreachable API server: the errors must not echo them.
    bad = runner.invoke(
        app,
        [
            "scan",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--prometheus-user",
            "u",
            "--prometheus-password",
            PROM_PASSWORD,
            "--timeout",
            "1",
            "--no-kubernetes",
        ],
    )
    assert bad.exit_code == 2
    texts = [
        gzip.decompress(snap.read_bytes()).decode(),
        report.output,
        replay.output,
        saved.output,
        bad.output,
    ]
    for secret in _secrets(kube_server):
        for text in texts:
            assert secret not in text
