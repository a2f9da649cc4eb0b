"""`gpuaudit fix` against a real Prometheus and the test API server: it reads (GET only) the
owners of the GPU pods, writes the folder, and a list it may not read leaves the findings it
would have fixed without a patch, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled

runner = CliRunner()


def _live(prom_url: str, kubeconfig: Path, tsdb: Backfilled) -> list[str]:
    return [
        "--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig),
        "--window", f"{tsdb.days}d", "--end", str(tsdb.end), "-q",
    ]  # fmt: skip


def test_a_live_fix_writes_the_owners_patches_reading_only(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir) as srv:
        live = _live(prom_url, srv.write_kubeconfig(tmp_path / "kubeconfig"), scenario_tsdb)
        out = tmp_path / "fix"
        res = runner.invoke(app, ["fix", *live, "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert srv.methods() <= {"GET"}
        assert {"replicasets", "deployments", "jobs", "cronjobs"} <= {
            r.path.rsplit("/", 1)[1] for r in srv.requests if r.status == 200
        }
        scan = runner.invoke(app, ["scan", *live, "-f", "json"])
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    targets = {
        (p["target"]["kind"], p["target"].get("namespace", ""), p["target"]["name"])
        for p in kust["patches"]
    }
    assert ("Deployment", "serving", "fixable-llm") in targets
    patch = next(p["path"] for p in kust["patches"] if p["target"]["name"] == "fixable-llm")
    assert yaml.safe_load((out / patch).read_text())["spec"] == {"replicas": 0}
    # The server said v1.34.0-gpuaudit-test: the patches were validated against its schema.
    readme = (out / "README.md").read_text()
    assert "Kubernetes 1.34, the cluster's version (v1.34.0-gpuaudit-test)" in readme
    commands = (out / "commands.sh").read_text()
    assert "# k delete pod scratch-gpu -n research" in commands
    assert "k patch job nightly-embed-29412000 -n batch --type merge" in commands
    doc = json.loads(scan.stdout)
    # GPU001's: the pods' GPU021 (a time-sliced share) gets no change, and says why.
    fixes = {
        f["resource"]["name"].split("-")[0]: f["fix"]
        for f in doc["findings"]
        if f.get("fix") and f["code"] == "GPU001"
    }
    assert fixes["fixable"]["file"] == patch and fixes["fixable"]["kind"] == "patch"
    assert (
        fixes["ghost"]["kind"] == "command"
        and "not among the replicasets read" in fixes["ghost"]["reason"]
    )


def test_an_owner_list_gpuaudit_may_not_read_leaves_no_patch_and_says_why(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir, forbidden=["replicasets"]) as srv:
        live = _live(prom_url, srv.write_kubeconfig(tmp_path / "kubeconfig"), scenario_tsdb)
        scan = runner.invoke(app, ["scan", *live, "-f", "json"])
    assert scan.exit_code == 0, scan.output
    doc = json.loads(scan.stdout)
    fix = next(
        f["fix"]
        for f in doc["findings"]
        if f["resource"]["name"].startswith("fixable-llm") and f["code"] == "GPU001"
    )
    assert fix["kind"] == "command" and fix["target"]["kind"] == "Pod"
    assert "ReplicaSet serving/fixable-llm-" in fix["reason"] and "forbidden" in fix["reason"]
