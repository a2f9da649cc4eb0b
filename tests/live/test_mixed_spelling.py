"""A central Prometheus holding two clusters, one scraped with the dcgm-exporter Helm default
(workloads in `exported_pod`) and one with `honorLabels: true` (workloads in `pod`): both
clusters' workloads are read, and the manifest says what was found."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.scenario import generate, write_openmetrics, write_snapshot
from gpuaudit.sources.prometheus.discovery import candidates_query, pod_only_query
from tests.support.promserver import prometheus
from tests.support.servers import require

runner = CliRunner()
GPUS, DAYS, SCRAPE = 24, 1, 600
CLUSTERS = {"a": (5, "helm"), "b": (7, "honor")}


def _labelled(src: Path, dst: Path, cluster: str) -> None:
    """OpenMetrics text with `cluster="<name>"` added to every series, as a central backend
    that receives several clusters (remote write, federation) holds them."""
    with open(src, encoding="utf-8") as fh, open(dst, "w", encoding="utf-8") as out:
        for line in fh:
            if not line.startswith("#") and "{" in line:
                line = line.replace("{", f'{{cluster="{cluster}",', 1)
            out.write(line)


@pytest.fixture(scope="module")
def central(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Path]]]:
    promtool = require("promtool")
    tmp = tmp_path_factory.mktemp("central")
    tsdb = tmp / "tsdb"
    snaps: dict[str, Path] = {}
    end = 0
    for name, (seed, style) in CLUSTERS.items():
        sc = generate(GPUS, DAYS, seed, scrape_s=SCRAPE)
        end = sc.end
        raw, om = tmp / f"{name}.raw.om", tmp / f"{name}.om"
        with open(raw, "w", encoding="utf-8") as fh:
            write_openmetrics(sc, fh, style)
        _labelled(raw, om, name)
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(om), str(tsdb)],
            check=True,
            capture_output=True,
        )
        snaps[name] = tmp / f"{name}.snapshot.json.gz"
        write_snapshot(sc, snaps[name], style, "test")
        # Without its Kubernetes objects, as the live scans here read none (GPUs held through
        # DRA claims would be joined from them).
        why = "not read: --no-kubernetes"
        whole = snapshot.read(snaps[name])
        bare = dataclasses.replace(whole, kubernetes={}).with_manifest(
            objects={"pods": why, "nodes": why}
        )
        snaps[name] = tmp / f"{name}.bare.snapshot.json"
        snapshot.write(bare, snaps[name])
    snaps["end"] = Path(str(end))
    with prometheus(tsdb) as url:
        yield url, snaps


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _live(url: str, end: str, *extra: str) -> list[str]:
    window = ["--window", f"{DAYS}d", "--end", end]
    return ["--prometheus-url", url, "--no-kubernetes", *window, *extra]


def _manifest(url: str, end: str, tmp: Path, *extra: str) -> dict[str, Any]:
    out = tmp / "m.json"
    res = runner.invoke(app, ["snapshot", "save", str(out), "-q", *_live(url, end, *extra)])
    assert res.exit_code == 0, res.output
    manifest: dict[str, Any] = json.loads(out.read_text().splitlines()[0])["manifest"]
    return manifest


def test_both_clusters_workloads_are_read(
    central: tuple[str, dict[str, Path]], tmp_path: Path
) -> None:
    url, snaps = central
    end = str(snaps["end"])
    mixed = _scan(*_live(url, end))["summary"]
    parts = []
    for name in CLUSTERS:
        # Each cluster alone, as its own snapshot (its pod labels read by the one spelling)...
        alone = runner.invoke(app, ["scan", "-f", "json", "-q", "--snapshot", str(snaps[name])])
        assert alone.exit_code == 0, alone.output
        parts.append(json.loads(alone.stdout)["summary"])
        # ... and read live from the central backend with --cluster-label.
        one = _scan(*_live(url, end, "--cluster-label", f"cluster={name}"))["summary"]
        assert one["gpus_total"] == parts[-1]["gpus_total"]
        assert one["allocated_gpu_hours"] == pytest.approx(parts[-1]["allocated_gpu_hours"])
    assert mixed["gpus_total"] == sum(p["gpus_total"] for p in parts)
    assert mixed["allocated_gpu_hours"] == pytest.approx(
        sum(p["allocated_gpu_hours"] for p in parts)
    )
    assert mixed["idle_gpu_hours"] == pytest.approx(sum(p["idle_gpu_hours"] for p in parts))
    caps = _manifest(url, end, tmp_path)["capabilities"]
    assert caps["pod_label"] == "any"
    assert caps["pod_labels"] == ["exported_pod", "pod"]
    assert any("both spellings were read" in n for n in caps["notes"])


def test_one_helm_cluster_alone_keeps_the_exported_spelling(
    central: tuple[str, dict[str, Path]], tmp_path: Path
) -> None:
    url, snaps = central
    end = str(snaps["end"])
    helm = _manifest(url, end, tmp_path, "--cluster-label", "cluster=a")["capabilities"]
    assert helm["pod_label"] == "exported"
    # The exporter's own `pod` label is there too: found, and told apart.
    assert helm["pod_labels"] == ["exported_pod", "pod"]
    honor = _manifest(url, end, tmp_path, "--cluster-label", "cluster=b")["capabilities"]
    assert honor["pod_label"] == "pod"


def _asked(url: str, expr: str, end: str) -> tuple[float, int]:
    """The count a query answers (no row: 0) and the samples Prometheus says it read."""
    body = (
        httpx.post(f"{url}/api/v1/query", data={"query": expr, "time": end, "stats": "all"})
        .raise_for_status()
        .json()
    )
    rows = body["data"]["result"]
    samples = int(body["data"]["stats"]["samples"]["totalQueryableSamples"])
    return (float(rows[0]["value"][1]) if rows else 0.0), samples


def test_the_helm_spelling_is_told_without_reading_every_series(
    central: tuple[str, dict[str, Path]],
) -> None:
    """Discovery first counts the series naming a workload outside `exported_pod`
    (`candidates_query`); none under the Helm chart's labels, so the whole-window `unless`
    (`pod_only_query`) is not asked, and its answer would have been the same."""
    url, snaps = central
    end = str(snaps["end"])
    probe, seconds = "DCGM_FI_DEV_GPU_UTIL", DAYS * 86400
    helm = 'cluster="a"'
    first, cheap = _asked(url, candidates_query(probe, helm, seconds), end)
    whole, dear = _asked(url, pod_only_query(probe, helm, seconds), end)
    assert first == whole == 0
    assert cheap == 0 < dear
    # Where workloads are in `pod`, the first count finds them, and the second tells.
    honor = 'cluster="b"'
    first, _ = _asked(url, candidates_query(probe, honor, seconds), end)
    whole, _ = _asked(url, pod_only_query(probe, honor, seconds), end)
    assert first >= whole > 0
