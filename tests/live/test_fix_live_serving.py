"""`gpuaudit fix` against a real Prometheus holding the scenario's series (vLLM's queue of the
serving case among them, `gpuaudit.scenario.serving_cases`) and the test API server: the one
serving query finds the pod and its busy level, and the part-time Deployment's ScaledObject gets
a prometheus trigger beside its cron window, `serverAddress` the URL read with a `# review:` line
(a loopback address pods cannot reach); the near-miss keeps cron alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import generate
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import backfill, prometheus

pytestmark = pytest.mark.server
runner = CliRunner()
DAYS = 3
"""GPU003 needs three days to see a daily pattern."""


def test_a_live_fix_scales_the_deployment_that_exports_a_queue_on_it(tmp_path: Path) -> None:
    seed, gpus = 11, 60
    served, near = generate(gpus, DAYS, seed, scrape_s=300).truth["serving_fixes"]
    filled = backfill(tmp_path / "scn", gpus=gpus, days=DAYS, seed=seed, scrape_s=300)
    out = tmp_path / "fix"
    with prometheus(filled.tsdb) as url, KubeAPIServer.from_dir(filled.k8s_dir) as srv:
        live = [
            "--prometheus-url", url, "--kubeconfig", str(srv.write_kubeconfig(tmp_path / "kc")),
            "--window", f"{DAYS}d", "--end", str(filled.end), "-q",
        ]  # fmt: skip
        res = runner.invoke(app, ["fix", *live, "-o", str(out)])
        assert res.exit_code == 0, res.output
    objects = {}
    for path in out.glob("GPU003-*-scaledobject-*.yaml"):
        body = yaml.safe_load(path.read_text())
        objects[body["spec"]["scaleTargetRef"]["name"]] = (body, path.read_text())
    body, text = objects[served["owner"]]
    cron, prom = body["spec"]["triggers"]
    assert cron["type"] == "cron" and prom["type"] == "prometheus"
    meta = prom["metadata"]
    assert meta["serverAddress"] == url
    assert meta["query"].startswith('sum(vllm:num_requests_waiting{namespace="batch",pod=~"')
    assert float(meta["threshold"]) == pytest.approx(served["busy_level"], abs=0.005)
    assert f"# review: gpuaudit read Prometheus at {url}, a loopback address" in text
    near_body, _ = objects[near["owner"]]
    assert [t["type"] for t in near_body["spec"]["triggers"]] == ["cron"]
