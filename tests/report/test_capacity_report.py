"""The capacity plan and queue figures in every report format, with hostile names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.report.text import terminal
from tests.factories import Series, gpu_labels, make_node, make_pod
from tests.factories import snapshot as make_snapshot
from tests.queue_objects import cluster_queue, flavor, local_queue, workload
from tests.report import Page

runner = CliRunner()
EVIL = "<script>alert(1)</script>[bold]x[/bold]|*md*\x1b[31m"


def _scan(*args: str) -> str:
    res = runner.invoke(app, ["scan", "-q", *args], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node whose GPU product label, and a ClusterQueue, flavor and namespace whose names,
    are hostile text; the queue's quota sits idle, so GPU090 reports it."""
    node = make_node("n1", product=EVIL)
    node["metadata"]["labels"]["pool"] = "x"
    series = [
        Series(gpu_labels(f"GPU-{i}", str(i), "n1", pod="p", namespace="ns"), act=[0.5] * 30)
        for i in range(2)
    ]
    lists = {
        "kueue_resourceflavors": [flavor(EVIL, {"pool": "x"})],
        "kueue_clusterqueues": [cluster_queue(EVIL, [(EVIL, "nvidia.com/gpu", "8")])],
        "kueue_localqueues": [local_queue("ns", "lq", EVIL)],
        "kueue_workloads": [workload("ns", "w", EVIL, EVIL, 2, 0.0, owner=("Job", "j"))],
    }
    pods = [make_pod("p", namespace="ns", node="n1", gpus=2, owner=("Job", "j"))]
    snap = make_snapshot(series, hours=30, pods=pods, nodes=[node], lists=lists)
    path = tmp_path_factory.mktemp("hostile") / "queues.json"
    snapshot.write(snap, path)
    return path


def test_hostile_names_in_the_terminal(hostile: Path) -> None:
    out = _scan("--snapshot", str(hostile))
    assert "\x1b" not in out
    assert "Capacity plan" in out and "Capacity plan assumptions:" in out
    assert "[bold]x[/bold]" in out  # Rich markup printed, not interpreted
    assert "\\x1b[31m" in out
    assert "Queue quota: 1 GPU quota line of 1 Kueue ClusterQueue;" in out
    assert "<script>alert(1)</script>" in out  # the GPU product, shown as text


def test_hostile_names_in_html(hostile: Path) -> None:
    out = _scan("--snapshot", str(hostile), "--format", "html")
    page = Page(out)
    assert "script" not in page.tags()
    assert "\x1b" not in out
    text = page.text
    assert terminal(EVIL, 80) in text
    section = out[out.index('<section id="capacity">') :]
    assert "Queue quota over the window" in section
    assert "&lt;script&gt;" in section[section.index('aria-label="GPUs held and busy') :]


def test_hostile_names_in_markdown_and_json(hostile: Path) -> None:
    md = _scan("--snapshot", str(hostile), "--format", "markdown")
    section = md[md.index("## Capacity plan") :]
    assert "<script>" not in section and "&lt;script&gt;" in section
    assert "\\|" in section and "\\*md\\*" in section  # cannot open a cell or emphasis
    doc = json.loads(_scan("--snapshot", str(hostile), "--format", "json"))
    (q,) = doc["capacity"]["queues"]
    assert q["queue"] == EVIL and q["flavor"] == EVIL  # exact data for machines
    assert list(doc["capacity"]["by_product"]) == [EVIL]
    (f,) = [f for f in doc["findings"] if f["code"] == "GPU090"]
    assert f["resource"]["name"] == EVIL and f["evidence"]["reclaimable"] == 6


@pytest.fixture(scope="module")
def demo_md() -> str:
    return _scan("--demo", "--format", "markdown")


def test_markdown_capacity_section(demo_md: str) -> None:
    section = demo_md[demo_md.index("## Capacity plan") :]
    section = section[: section.index("\n## ", 5)] if "\n## " in section[5:] else section
    assert "- The window's work fit on" in section
    # 31 H100 nodes (30 of the base layout, the tainted one of the placement cases), 231 GPUs
    # held at the peak: 29 nodes of 8 at least; releasing the 3 idle GPUs (GPU001) leaves 228
    # or more, still over 28 nodes' 224, so no node is freed.
    assert "| H100 80GB HBM3 | 31 | 30 | 29 | 29 | 0 (0) |" in section
    assert "### Queue quota over the window" in section
    assert (
        "| Kueue ClusterQueue team-a-cq | gb200-research | nvidia.com/gpu | 4.0 | 1.0 |" in section
    )
    assert section.count("\n1. Hourly values") == 1 and "\n7. After releasing" in section


def test_html_capacity_section_and_chart() -> None:
    out = _scan("--demo", "--format", "html")
    section = out[
        out.index('<section id="capacity">') : out.index(
            "</section>", out.index('<section id="capacity">')
        )
    ]
    assert section.count("<svg") == 1 and 'aria-label="GPUs held and busy per hour' in section
    assert "<h3>Assumptions</h3>" in section and section.count("<li>") >= 7 + 4
    doc: dict[str, Any] = json.loads(_scan("--demo", "--format", "json"))
    for line in doc["capacity"]["headlines"]:
        assert line.replace("'", "&#x27;") in section
