"""Words that are right: plural forms, one number format, the owner kind's real role,
recommendations that can be carried out as written, a warning for a `--group-by-label` that
matches nothing, and the size of `scenario --openmetrics` said before it is written."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.app import scenario_files
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks import gpu002_idle_tail as gpu002
from gpuaudit.checks import gpu021_oversized_reservation as gpu021
from gpuaudit.checks import gpu070_sick_gpus as gpu070
from gpuaudit.cli import app
from gpuaudit.report import table_text
from gpuaudit.scenario import generate, write_openmetrics
from tests.support.factories import Series, gpu_labels, inventory, make_node, make_pod, run_check
from tests.support.reports import demo_result

runner = CliRunner()


@pytest.fixture(scope="module")
def demo() -> AuditResult:
    return demo_result()


@pytest.fixture(scope="module")
def demo_json() -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_one_row_remapped_is_singular() -> None:
    lab = gpu_labels(uuid="GPU-9", gpu="1", host="n1", pod="p-0", namespace="ml")
    health = {"remap_uncorr_max": 1.0, "ecc_dbe_max": 1.0}
    (f,) = run_check(gpu070, inventory([Series(lab, act=[0.5] * 10, health=health)], 10))
    assert "1 volatile double-bit ECC error and 1 row remapped for uncorrectable errors" in (
        f.message
    )
    health = {"remap_uncorr_max": 1234.0}
    (f,) = run_check(gpu070, inventory([Series(lab, act=[0.5] * 10, health=health)], 10))
    assert "1,234 rows remapped" in f.message


def test_no_plural_form_is_wrong_anywhere_in_the_demo(
    demo: AuditResult, demo_json: dict[str, Any]
) -> None:
    text = table_text(demo) + json.dumps(demo_json)
    for wrong in ("1 rows", "1 findings", "1 checks", "1 GPUs", "1 answers", "1 pods have"):
        assert not re.search(rf"(?<![\d,.]){wrong}\b", text), wrong  # not "231 GPUs"


def test_one_number_format_in_the_summary(demo: AuditResult) -> None:
    big = dataclasses.replace(
        demo,
        summary=dataclasses.replace(
            demo.summary, gpus_total=2016, gpus_allocated_now=1234.5, idle_gpu_hours=13218.0
        ),
    )
    text = table_text(big)
    assert "2,016 GPUs" in text and "allocated now 1,234.5" in text and "13,218" in text
    assert "2016" not in text and "1234.5" not in text


def test_a_deployment_named_batch_is_not_called_serving(demo_json: dict[str, Any]) -> None:
    pools = [f["message"] for f in demo_json["findings"] if f["resource"]["kind"] == "NodePool"]
    l40s = next(m for m in pools if m.startswith("Node pool NVIDIA-L40S"))
    assert "runs long-running GPU workloads (Deployment batch/llm-plain-0" in l40s
    assert "run-to-completion ones (Job batch/nightly-embed-29412000, Job ml-train/" in l40s
    assert all("serving (" not in m for m in pools)


@pytest.mark.parametrize(
    ("module", "act"), [(gpu001, [0.0] * 30), (gpu002, [0.9] * 4 + [0.0] * 26)]
)
def test_scale_to_zero_is_offered_only_in_ways_that_work(module: Any, act: list[float]) -> None:
    s = Series(gpu_labels(pod="api-5d-x", namespace="web"), act=act)
    pod = make_pod(
        "api-5d-x", "web", owner=("ReplicaSet", "api-5d"), labels={"pod-template-hash": "5d"}
    )
    (f,) = run_check(module, inventory([s], 30, pods=[pod]))
    rec = f.recommendation
    assert "Deployment web/api" in rec
    assert "`kubectl scale deployment api -n web --replicas=0`" in rec
    assert "KEDA" in rec and "minReplicaCount 0" in rec
    assert "a plain HPA cannot go below one replica" in rec
    assert "HPA on request rate" not in rec and "HPA with scale-to-zero" not in rec


def _mig_node(name: str) -> dict[str, Any]:
    node = make_node(name, gpus=8)
    for part in ("capacity", "allocatable"):
        node["status"][part]["nvidia.com/mig-1g.10gb"] = "7"
    return node


@pytest.mark.parametrize(
    ("nodes", "start"),
    [
        (
            [make_node("node-a")],
            "Node pool NVIDIA-H100-80GB-HBM3 is not partitioned into MIG slices: repartition "
            "some of its nodes first (with the GPU Operator, label them "
            "`nvidia.com/mig.config=all-1g.10gb`",
        ),
        (
            [make_node("node-a"), _mig_node("node-b")],
            "Request `nvidia.com/mig-1g.10gb: 1` for StatefulSet ml/embed instead of a whole "
            "GPU (node pool NVIDIA-H100-80GB-HBM3 offers MIG slices)",
        ),
        (None, "On nodes partitioned into MIG slices, request `nvidia.com/mig-1g.10gb: 1`"),
    ],
)
def test_a_mig_profile_comes_with_the_repartitioning_step(
    nodes: list[dict[str, Any]] | None, start: str
) -> None:
    s = Series(gpu_labels(pod="embed-0", namespace="ml"), act=[0.05] * 30, fb_used=6000.0)
    pod = make_pod("embed-0", "ml", owner=("StatefulSet", "embed"))
    (f,) = run_check(gpu021, inventory([s], 30, pods=[pod], nodes=nodes))
    assert f.recommendation.startswith(start), f.recommendation
    assert f.recommendation.endswith("; it frees 26 GPU-hours over this window.")


@pytest.mark.parametrize(
    ("label", "hint"),
    [
        ("notebook", "the closest label names the pods carry: notebook-name."),
        ("tean", "the closest label names the pods carry: team."),
        ("zone", "the label names most pods carry: team, app, pod-template-hash,"),
    ],
)
def test_group_by_label_that_matches_nothing_warns(label: str, hint: str) -> None:
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", "--group-by-label", label])
    assert res.exit_code == 0, res.output
    warnings = json.loads(res.stdout)["warnings"]
    (w,) = [w for w in warnings if w.startswith(f"--group-by-label {label}:")]
    assert f"no pod carries the label '{label}', so every pod falls in (no label)" in w
    assert hint in w
    matched = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", "--group-by-label", "app"])
    assert not [w for w in json.loads(matched.stdout)["warnings"] if "--group-by-label" in w]


def test_openmetrics_size_is_known_before_it_is_written() -> None:
    sc = generate(20, 1, 3, scrape_s=300)
    for style in ("helm", "old"):
        buf = io.StringIO()
        write_openmetrics(sc, buf, style)
        assert scenario_files.openmetrics_bytes(sc, style) == len(buf.getvalue().encode())


def test_huge_openmetrics_needs_yes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, om = tmp_path / "s.json.gz", tmp_path / "s.om"
    args = ["scenario", "--gpus", "80", "--days", "2", "-o", str(out), "--openmetrics", str(om)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    # The size as worked out (what the generator plants moves it; its exactness is tested above).
    about = scenario_files.size_text(scenario_files.openmetrics_bytes(generate(80, 2, 1), "helm"))
    assert about.endswith(" GB")
    assert res.output.startswith(f"gpuaudit: error: --openmetrics {om} will be about {about} ")
    assert "GB (2 days at one sample every 60 s), more than 1 GB; pass --yes" in res.output
    assert not out.exists() and not om.exists()
    # Past the limit with --yes (the limit lowered so that the test writes little).
    monkeypatch.setattr(scenario_files, "OPENMETRICS_LIMIT", 1000)
    small = ["scenario", "--gpus", "20", "--days", "1", "--scrape-interval", "300"]
    small += ["-o", str(out), "--openmetrics", str(om)]
    assert runner.invoke(app, small).exit_code == 2 and not om.exists()
    res = runner.invoke(app, [*small, "--yes"])
    assert res.exit_code == 0, res.output
    size = om.stat().st_size
    assert f"--openmetrics {om} will be about {scenario_files.size_text(size)}" in res.output
    assert runner.invoke(app, [*small, "--yes", "--quiet"]).output == ""


def test_size_text() -> None:
    assert scenario_files.size_text(1_000_000_000) == "1 GB"
    assert scenario_files.size_text(1_430_000_000) == "1.4 GB"
    assert scenario_files.size_text(80_200_000) == "80 MB"
    assert scenario_files.size_text(999) == "999 bytes"
