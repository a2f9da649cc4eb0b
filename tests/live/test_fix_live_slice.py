"""`gpuaudit fix` against a real Prometheus and the test API server, for the changes of queues,
priorities and node pools: the Karpenter NodePools are read (GET only) and patched, the Volcano
and KAI Queues patched, the PriorityClass written; a NodePool list it may not read leaves the
patch as a command, commented out, and says why."""

from __future__ import annotations

import json
from pathlib import Path

import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.live.test_fix_live import _live
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled

runner = CliRunner()


def test_a_live_fix_patches_queues_and_node_pools_and_writes_the_class(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir) as srv:
        live = _live(prom_url, srv.write_kubeconfig(tmp_path / "kubeconfig"), scenario_tsdb)
        out = tmp_path / "fix"
        res = runner.invoke(app, ["fix", *live, "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert srv.methods() <= {"GET"}
        read = {r.path for r in srv.requests if r.status == 200}
        assert "/apis/karpenter.sh/v1/nodepools" in read
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    targets = {(p["target"]["kind"], p["target"]["name"]) for p in kust["patches"]}
    assert ("NodePool", "gpu-burst") in targets
    assert ("Queue", "vision-reserved") in targets
    assert any(r.endswith("priorityclass-research-high-preempt.yaml") for r in kust["resources"])
    commands = (out / "commands.sh").read_text()
    assert "cluster-autoscaler.kubernetes.io/scale-down-disabled-" in commands


def test_a_node_pool_list_gpuaudit_may_not_read_leaves_a_command_and_says_why(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    forbidden = ["karpenter_nodepools"]
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir, forbidden=forbidden) as srv:
        live = _live(prom_url, srv.write_kubeconfig(tmp_path / "kubeconfig"), scenario_tsdb)
        scan = runner.invoke(app, ["scan", *live, "-f", "json"])
    assert scan.exit_code == 0, scan.output
    doc = json.loads(scan.stdout)
    fixes = [
        f["fix"]
        for f in doc["findings"]
        if f["code"] == "GPU060" and f["fix"] and "gpu-burst" in f["fix"]["reason"]
    ]
    assert fixes and fixes[0]["kind"] == "command"
    assert fixes[0]["reason"].startswith("NodePool gpu-burst was not read (forbidden")
