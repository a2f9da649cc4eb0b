"""GPUs held through DRA ResourceClaims, live: a real Prometheus holding the scenario's DCGM
history (the DRA pods' series carry no pod label) and the test API server serving the pods,
their ResourceClaims and the DRA node's ResourceSlices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled

runner = CliRunner()


def _live(prom_url: str, kubeconfig: Path, b: Backfilled) -> dict[str, Any]:
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    args = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window]
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _pods(doc: dict[str, Any], code: str) -> set[str]:
    return {
        f["resource"]["name"]
        for f in doc["findings"]
        if f["code"] == code and f["resource"]["kind"] == "Pod"
    }


def test_dra_pods_are_audited_live(
    prom_url: str, kubeconfig: Path, kube_server: KubeAPIServer, scenario_tsdb: Backfilled
) -> None:
    doc = _live(prom_url, kubeconfig, scenario_tsdb)
    # The DCGM series of the claimed GPUs carry no pod label in Prometheus.
    idle = _pods(doc, "GPU001")
    assert "dra-idle-0" in idle and "dra-busy-0" not in idle
    unmonitored = _pods(doc, "GPU080")
    assert not {"dra-idle-0", "dra-busy-0"} & unmonitored
    assert kube_server.list_requests("resourceclaims")
    assert kube_server.list_requests("resourceslices")
    assert set(kube_server.methods()) == {"GET"}
    assert not any("DRA" in w or "ResourceSlice" in w for w in doc["warnings"])


def test_claims_and_slices_are_recorded_and_replayed(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "s.json.gz"
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    args = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window]
    res = runner.invoke(app, ["snapshot", "save", str(out), *args, "-q"])
    assert res.exit_code == 0, res.output
    snap = snapshot.read(out)
    for key in ("resourceclaims", "resourceslices"):
        assert snap.manifest["objects"][key] == "ok", key
    (sl,) = snap.kubernetes["resourceslices"][0]["items"]
    dev = sl["spec"]["devices"][0]
    # Only the attributes gpuaudit reads are kept.
    assert set(dev["attributes"]) == {"type", "uuid"}
    res = runner.invoke(app, ["scan", "-f", "json", "-q", "--snapshot", str(out)])
    assert res.exit_code == 0, res.output
    assert "dra-idle-0" in _pods(json.loads(res.stdout), "GPU001")


def test_forbidden_resourceslices_leave_the_claimed_gpus_unjoined_and_say_why(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    lists = {
        p.stem: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted(scenario_tsdb.k8s_dir.glob("*.json"))
    }
    with KubeAPIServer(lists, forbidden={"resourceslices"}) as srv:
        doc = _live(prom_url, srv.write_kubeconfig(tmp_path / "kc"), scenario_tsdb)
    assert "dra-idle-0" not in _pods(doc, "GPU001")
    assert any("no ResourceSlice describes" in w and "forbidden" in w for w in doc["warnings"]), (
        doc["warnings"]
    )
    # GPUs no ResourceSlice describes are not counted as held, and never read as healthy:
    # the warning names their claims and the audit is incomplete.
    assert any("research/dra-idle-0-gpu-" in w for w in doc["warnings"] if "ResourceSlice" in w)
    assert doc["complete"] is False
