"""Tokens, passwords and client keys never reach output, logs, errors or snapshots."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit import __version__
from gpuaudit.cli import app
from tests.support.apiserver import DEFAULT_TOKEN, KubeAPIServer
from tests.support.promfault import PromFaultServer, require_query_param
from tests.support.promserver import Backfilled

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


# -- headers, tokens and URLs: the real client against the fault server in front of Prometheus


@pytest.fixture
def fault(prom_url: str) -> Iterator[PromFaultServer]:
    with PromFaultServer(prom_url) as srv:
        yield srv


def _live(url: str, b: Backfilled) -> list[str]:
    return ["--prometheus-url", url, "--no-kubernetes", "--window", "2d", "--end", str(b.end)]


def _scan(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args], env=env)
    return res.exit_code, res.output


def test_headers_from_the_environment_are_one_per_line(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    env = {"GPUAUDIT_HEADER": "Authorization:Bearer env-secret-1234\r\nX-Scope-OrgID: t1\n"}
    code, out = _scan(*_live(fault.url, scenario_tsdb), env=env)
    assert code == 0, out
    assert {c.headers.get("authorization") for c in fault.calls} == {"Bearer env-secret-1234"}
    assert {c.headers.get("x-scope-orgid") for c in fault.calls} == {"t1"}
    assert "env-secret-1234" not in out


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["-H", "Authorization=Bearer eq-secret-5678"], None),
        ([], {"GPUAUDIT_HEADER": "X-Scope-OrgID: t1\nAuthorization=Bearer eq-secret-5678"}),
        (["-H", "Bearer eq-secret-5678: x"], None),
        (["-H", "X-Token: eq-secret-\n5678"], None),
    ],
)
def test_a_malformed_header_never_prints_its_value(
    args: list[str], env: dict[str, str] | None
) -> None:
    code, out = _scan("--prometheus-url", "http://127.0.0.1:9", "--no-kubernetes", *args, env=env)
    assert code == 2
    assert "eq-secret" not in out and "5678" not in out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1


def test_a_token_with_a_windows_line_end_works_and_never_shows(
    fault: PromFaultServer, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    code, out = _scan(*_live(fault.url, scenario_tsdb), "--prometheus-token", "crlf-tok-77\r")
    assert code == 0, out
    assert {c.headers.get("authorization") for c in fault.calls} == {"Bearer crlf-tok-77"}
    token_file = tmp_path / "token"
    token_file.write_bytes(b"crlf-tok-88\r\n")
    code, out = _scan(*_live(fault.url, scenario_tsdb), "--prometheus-token-file", str(token_file))
    assert code == 0, out
    assert fault.calls[-1].headers.get("authorization") == "Bearer crlf-tok-88"
    code, out = _scan(*_live(fault.url, scenario_tsdb), "--prometheus-token", "crlf\r\ntok-99")
    assert code == 2
    assert "control character" in out and "tok-99" not in out and "Illegal" not in out


def test_debug_redacts_every_header_value_but_harmless_ones(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    secrets = {"X-Auth-Token": "xat-secret-1", "Api-Key": "ak-secret-2", "PRIVATE-TOKEN": "pt-3"}
    headers = [a for k, v in secrets.items() for a in ("-H", f"{k}: {v}")]
    res = runner.invoke(
        app, ["--debug", "scan", "-f", "json", "-q", *_live(fault.url, scenario_tsdb), *headers]
    )
    assert res.exit_code == 0, res.output
    assert "<redacted>" in res.output and f"gpuaudit/{__version__}" in res.output
    for value in secrets.values():
        assert value not in res.output
    assert {c.headers.get("private-token") for c in fault.calls} == {"pt-3"}


def test_a_token_in_the_url_query_is_sent_and_never_shown(
    fault: PromFaultServer, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    fault.faults.append(require_query_param("access_token", "url-secret-42"))
    url = f"{fault.url}/?access_token=url-secret-42"
    res = runner.invoke(app, ["--debug", "scan", "-f", "json", *_live(url, scenario_tsdb)])
    assert res.exit_code == 0, res.output
    assert "url-secret-42" not in res.output
    # The API path before the query, the query on every request.
    assert all(c.path.startswith("/api/v1/") for c in fault.calls)
    assert all(c.query.get("access_token") == ["url-secret-42"] for c in fault.calls)
    snap = tmp_path / "s.json"
    res = runner.invoke(app, ["snapshot", "save", str(snap), *_live(url, scenario_tsdb), "-q"])
    assert res.exit_code == 0, res.output
    assert "url-secret-42" not in snap.read_text()
    # Unreachable, refused, or answering garbage: the errors never show it either.
    for bad in (
        "http://127.0.0.1:9/?access_token=url-secret-42",
        f"{fault.url}/nowhere?access_token=url-secret-42",
    ):
        code, out = _scan(*_live(bad, scenario_tsdb), "--timeout", "2")
        assert code == 2 and "url-secret-42" not in out
