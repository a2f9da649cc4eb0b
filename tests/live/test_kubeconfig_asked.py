"""A Kubernetes API that was asked for is read, or the scan fails: a kubeconfig named by the
`KUBECONFIG` variable (as docs/ci.md's recipe exports it), by `--kubeconfig`, its variable or
the config file's key, the default `~/.kube/config`, or a pod's service account, that cannot
be used ends the scan with one line naming who named it, and exit code 2. Only when nothing asks
for the API does the scan go on without it. `--strict` fails when a check was skipped because a
list the API server was asked for could not be read (a 403). Through the CLI, against the real
Prometheus of the live fixtures and the test API server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.kubernetes import connect
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled

runner = CliRunner()
WITHOUT = "pass --no-kubernetes to audit without the Kubernetes API"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home: no `~/.kube/config`; no service account mounted."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", tmp_path / "no-serviceaccount")
    return folder


def _scan(
    prom_url: str, b: Backfilled, home: Path, env: Mapping[str, str | None], *extra: str
) -> tuple[int, str, list[str]]:
    clean: dict[str, str | None] = {
        "HOME": str(home),
        "KUBECONFIG": None,
        "GPUAUDIT_KUBECONFIG": None,
        "KUBERNETES_SERVICE_HOST": None,
        "KUBERNETES_SERVICE_PORT": None,
    }
    args = ["scan", "-q", "-f", "json", "--prometheus-url", prom_url, "--strict"]
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    res = runner.invoke(app, [*args, *window, *extra], env={**clean, **env})
    return res.exit_code, res.stdout, res.stderr.splitlines()


def _error(lines: list[str]) -> str:
    """The one line of a failed scan."""
    said = [ln for ln in lines if ln.strip()]
    assert len(said) == 1, said
    assert said[0].startswith("gpuaudit: error: ") and "Traceback" not in said[0]
    return said[0].removeprefix("gpuaudit: error: ")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("\n", "is empty"),  # the recipe's printf of an unset secret
        (None, "does not exist"),
        ("apiVersion: v1\nclusters: [unclosed\n", "is not valid YAML (line 3, column 1)"),
        ("this is not a kubeconfig\n", "is not a kubeconfig"),
    ],
)
def test_a_broken_kubeconfig_variable_fails_the_scan(
    prom_url: str,
    scenario_tsdb: Backfilled,
    home: Path,
    tmp_path: Path,
    content: str | None,
    problem: str,
) -> None:
    kc = tmp_path / "kubeconfig"
    if content is not None:
        kc.write_text(content)
    code, out, lines = _scan(prom_url, scenario_tsdb, home, {"KUBECONFIG": str(kc)})
    assert code == 2
    msg = _error(lines)
    assert msg.startswith(f"KUBECONFIG names {kc}, which {problem}"), msg
    assert msg.endswith(f"; check KUBECONFIG, or {WITHOUT}")


def test_each_way_of_naming_a_kubeconfig_is_named_in_the_error(
    prom_url: str, scenario_tsdb: Backfilled, home: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    b = scenario_tsdb

    code, out, lines = _scan(prom_url, b, home, {}, "--kubeconfig", str(empty))
    assert code == 2
    assert (
        _error(lines)
        == f"--kubeconfig names {empty}, which is empty; check --kubeconfig, or {WITHOUT}"
    )

    code, out, lines = _scan(prom_url, b, home, {"GPUAUDIT_KUBECONFIG": str(empty)})
    assert code == 2
    assert _error(lines).startswith(
        f"GPUAUDIT_KUBECONFIG (--kubeconfig) names {empty}, which is empty; "
    )

    toml = tmp_path / "gpuaudit.toml"
    toml.write_text('[scan]\nkubeconfig = "empty.yaml"\n')
    code, out, lines = _scan(prom_url, b, home, {}, "--config", str(toml))
    assert code == 2
    msg = _error(lines)
    assert "kubeconfig in " in msg and f" names {empty}, which is empty; " in msg, msg

    default = home / ".kube" / "config"
    default.parent.mkdir()
    default.write_text("   \n")
    code, out, lines = _scan(prom_url, b, home, {})
    assert code == 2
    assert _error(lines) == (
        f"the default kubeconfig {default} is empty; fix or remove it, or {WITHOUT}"
    )


def test_a_service_account_that_cannot_be_used_fails_the_scan(
    prom_url: str,
    scenario_tsdb: Backfilled,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("a-token-without-its-ca\n")
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", sa)
    code, out, lines = _scan(
        prom_url, scenario_tsdb, home, {"KUBERNETES_SERVICE_HOST": "127.0.0.1"}
    )
    assert code == 2
    assert _error(lines).startswith(f"the service-account CA {sa / 'ca.crt'} does not exist; ")


def test_without_anything_asking_for_it_the_scan_goes_on_without_kubernetes(
    prom_url: str, scenario_tsdb: Backfilled, home: Path
) -> None:
    # In a pod without a mounted service account too (automountServiceAccountToken: false).
    code, out, lines = _scan(
        prom_url, scenario_tsdb, home, {"KUBERNETES_SERVICE_HOST": "127.0.0.1"}
    )
    assert code == 0, lines
    doc = json.loads(out)
    reasons = {s["reason"] for s in doc["skipped"]}
    assert any("no kubeconfig or in-cluster service account" in r for r in reasons), reasons


def test_strict_fails_when_a_check_is_skipped_for_a_forbidden_list(
    prom_url: str, scenario_tsdb: Backfilled, home: Path, tmp_path: Path
) -> None:
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir, forbidden={"nodes"}) as srv:
        kc = srv.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, lines = _scan(prom_url, scenario_tsdb, home, {"KUBECONFIG": str(kc)})
    assert code == 2
    (why,) = [ln for ln in lines if ln.startswith("gpuaudit: exit code 2: ")]
    assert "the audit is incomplete: Kubernetes nodes: forbidden: " in why
    assert why.endswith(" skipped for it)"), why
    doc = json.loads(out)
    codes = {s["check"] for s in doc["skipped"] if s["reason"].startswith("forbidden: ")}
    assert codes and all(c in why for c in codes)
