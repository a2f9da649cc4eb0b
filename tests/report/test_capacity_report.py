"""The capacity plan and queue figures in every report format, with hostile names."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.report.text import terminal
from tests.support.factories import Series, gpu_labels, make_node, make_pod
from tests.support.factories import snapshot as make_snapshot
from tests.support.queue_objects import cluster_queue, flavor, local_queue, workload
from tests.support.reports import Page

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


def _md_section(doc: str) -> str:
    section = doc[doc.index("## Capacity plan") :]
    return section[: section.index("\n## ", 5)] if "\n## " in section[5:] else section


def test_markdown_capacity_section(demo_md: str) -> None:
    section = _md_section(demo_md)
    assert "- The window's work fit on" in section
    # 35 H100 nodes of 8 GPUs, 265 GPUs held at the peak (8 of them on the node without an
    # exporter, of unknown activity): 34 nodes of 8 at least (265 / 8 = 33.1), and the packing
    # needs no more (the tainted node takes only the pods that tolerate it, so it is not
    # opened half empty).
    assert (
        "| H100 80GB HBM3 | 35 | 0 | 35 | 34 | 265.0 / 264.0 / 246.7 | 247.0 / 246.0 / 233.6 "
        "| 8.0 / 8.0 / 8.0 |" in section
    )
    assert "### Queue quota over the window" in section
    assert (
        "| Kueue ClusterQueue team-a-cq | gb200-research | nvidia.com/gpu | 4.0 | 1.0 |" in section
    )
    assert section.count("\n1. Hourly values") == 1 and "\n10. After releasing" in section
    # Without --what-if release-idle: no after-release figures, a line saying how to see them.
    assert "After releasing the idle reservations" not in section
    assert (
        "would have let" not in section and "idle reservation gpuaudit found on it" not in section
    )
    assert "Run with --what-if release-idle to see the plan after releasing the 21 idle" in section


def test_what_if_release_idle_in_markdown() -> None:
    section = _md_section(_scan("--demo", "--format", "markdown", "--what-if", "release-idle"))
    assert "### After releasing the idle reservations (--what-if release-idle)" in section
    # GPU001's 2 idle H100 pods and GPU002's idle tail on H100: 3 released; 258 GPUs at the new
    # peak fit on 33 nodes (258 / 8 = 32.25), one fewer: 8 GPUs x 168 h x 6.88 USD.
    assert "| H100 80GB HBM3 | 3 | 34 | 33 | 1 | 8.0 | 9,247 | 258.0 / 257.0 / 243.4 |" in section
    assert (
        "releasing the 3 idle reservations gpuaudit found on it would have let 1 more go: "
        "9,247 USD over the window." in section
    )
    assert "Run with --what-if" not in section


def test_what_if_release_idle_in_the_terminal_and_html() -> None:
    plain, asked = _scan("--demo"), _scan("--demo", "--what-if", "release-idle")
    flat = " ".join(asked.split())
    assert "would have let 1 more go: 9,247 USD over the window." in flat
    assert "would have let" not in " ".join(plain.split())
    assert "Run with --what-if release-idle" in " ".join(plain.split())
    page, asked_page = (
        _scan("--demo", "-f", "html"),
        _scan("--demo", "-f", "html", "--what-if", "release-idle"),
    )
    assert 'id="after-release"' in asked_page and 'id="after-release"' not in page
    assert "would have let 1 more go" in asked_page and "would have let" not in page


def test_json_carries_the_release_whatever_the_flag() -> None:
    plain = json.loads(_scan("--demo", "-f", "json"))["capacity"]
    asked = json.loads(_scan("--demo", "-f", "json", "--what-if", "release-idle"))["capacity"]
    assert plain["after_release_idle"] == asked["after_release_idle"]
    assert plain["what_if"] == [] and asked["what_if"] == ["release-idle"]
    h100 = asked["after_release_idle"]["by_product"]["NVIDIA-H100-80GB-HBM3"]
    assert (h100["min_nodes_at_peak"], h100["nodes_freed"]) == (33, 1)
    # The packing needs no node more than the GPUs held at the peak do (8 GPUs a node).
    for plan in (asked["by_product"], asked["after_release_idle"]["by_product"]):
        held = plan["NVIDIA-H100-80GB-HBM3"]["gpus_held"]["peak"]
        assert plan["NVIDIA-H100-80GB-HBM3"]["min_nodes_at_peak"] == math.ceil(held / 8)
    released = asked["after_release_idle"]["released_holdings"]
    assert len(released) == 21  # the 21 the plan's "Run with --what-if release-idle" names
    codes = {r["code"] for r in asked["after_release_idle"]["released_holdings"]}
    assert codes == {"GPU001", "GPU002"}


def test_what_if_from_the_environment_and_the_file(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["scan", "-q", "--demo", "-f", "markdown"], env={"GPUAUDIT_WHAT_IF": "release-idle"}
    )
    assert res.exit_code == 0 and "### After releasing the idle reservations" in res.stdout
    toml = tmp_path / "gpuaudit.toml"
    toml.write_text('[scan]\nwhat_if = "release-idle"\n')
    out = _scan("--demo", "-f", "markdown", "--config", str(toml))
    assert "### After releasing the idle reservations" in out


def test_an_unknown_what_if_is_refused() -> None:
    res = runner.invoke(app, ["scan", "-q", "--demo", "--what-if", "buy-more"])
    assert res.exit_code == 2
    assert "--what-if must be one of release-idle, got 'buy-more'" in res.output
    assert "Traceback" not in res.output


def test_html_capacity_section_and_chart() -> None:
    out = _scan("--demo", "--format", "html")
    section = out[
        out.index('<section id="capacity">') : out.index(
            "</section>", out.index('<section id="capacity">')
        )
    ]
    assert section.count("<svg") == 1 and 'aria-label="GPUs held and busy per hour' in section
    assert "<h3>Assumptions</h3>" in section and section.count("<li>") >= 10 + 4
    doc: dict[str, Any] = json.loads(_scan("--demo", "--format", "json"))
    for line in doc["capacity"]["headlines"]:
        assert line.replace("'", "&#x27;") in section


@pytest.fixture(scope="module")
def unmonitored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Node h1 with DCGM, p1 holding 2 GPUs; node u1 without an exporter, w1 holding 4."""
    series = [
        Series(gpu_labels(f"GPU-{i}", str(i), "h1", pod="p1", namespace="ns"), act=[0.5] * 4)
        for i in range(2)
    ]
    pods = [
        make_pod("p1", namespace="ns", node="h1", gpus=2),
        make_pod("w1", namespace="ns", node="u1", gpus=4),
    ]
    nodes = [make_node("h1"), make_node("u1")]
    snap = make_snapshot(series, hours=4, pods=pods, nodes=nodes)
    path = tmp_path_factory.mktemp("unmonitored") / "snap.json"
    snapshot.write(snap, path)
    return path


NOTE = (
    "H100 80GB HBM3: the activity of up to 4 GPUs held in an hour is unknown (up to 4 held by "
    "pods the Kubernetes API shows and no DCGM series measures; 1 node without an exporter ran "
    "GPU pods): they count as held, neither busy nor idle."
)


def test_gpus_of_unknown_activity_in_every_format(unmonitored: Path) -> None:
    plain = " ".join(_scan("--snapshot", str(unmonitored)).split())
    assert (
        "held peak 6.0, p95 6.0, mean 6.0; busy peak 2.0, p95 2.0, mean 2.0; activity "
        "unknown peak 4.0, p95 4.0, mean 4.0" in plain
    )
    assert NOTE in plain
    md = _md_section(_scan("--snapshot", str(unmonitored), "--format", "markdown"))
    assert f"- {NOTE}" in md
    assert (
        "| H100 80GB HBM3 | 2 | 0 | 2 | 1 | 6.0 / 6.0 / 6.0 | 2.0 / 2.0 / 2.0 | 4.0 / 4.0 / 4.0 |"
        in md
    )
    html = _scan("--snapshot", str(unmonitored), "--format", "html")
    assert f'<p class="note">{NOTE}</p>' in html and '<th class="num">Unknown activity</th>' in html
    cap = json.loads(_scan("--snapshot", str(unmonitored), "--format", "json"))["capacity"]
    assert cap["notes"] == [NOTE]
    h100 = cap["by_product"]["NVIDIA-H100-80GB-HBM3"]
    assert h100["gpus_activity_unknown"] == {"peak": 4.0, "p95": 4.0, "mean": 4.0}
    assert (h100["nodes_ran_gpu_pods"], h100["nodes_without_dcgm"]) == (2, 1)
