"""Every cluster of a central VictoriaMetrics in one scan (`--cluster-label cluster`).

Twenty clusters' DCGM data, labelled as the dcgm-exporter Helm chart labels it plus `cluster`,
in one real VictoriaMetrics. Clusters share seeds four ways, so node names, GPU indexes, UUIDs,
exporter addresses and pod names collide across clusters: a scan that merged two clusters'
series would show it in the per-cluster figures, which must equal a scan of that one cluster
(`--cluster-label cluster=NAME`, today's meaning)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.multicluster import Fleet, load, victoriametrics
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()

NAMES = [f"{region}-{i:02d}" for region in ("eu", "us") for i in range(10)]
"""Twenty clusters; cluster k is built from seed 100 + k % 4."""
ADDITIVE = (
    "gpus_total",
    "gpus_allocated_now",
    "gpus_allocated_avg",
    "allocated_gpu_hours",
    "idle_gpu_hours",
    "wasted_cost",
    "findings_gpu_hours",
    "findings_cost",
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("clusters")
    with victoriametrics(tmp) as url:
        loaded = load(url, tmp, [(n, 100 + k % 4) for k, n in enumerate(NAMES)], 12, 1, 1800)
        # One DCGM series without the cluster label: it belongs to no cluster.
        stray = f'DCGM_FI_DEV_FB_USED{{UUID="GPU-stray",Hostname="stray"}} 1 {loaded.end * 1000}\n'
        r = httpx.post(f"{url}/api/v1/import/prometheus", content=stray.encode(), timeout=60)
        assert r.status_code == 204, r.text
        httpx.get(f"{url}/internal/force_flush", timeout=60)
        yield loaded


def _live(fleet: Fleet, *args: str) -> list[str]:
    return [
        "--prometheus-url",
        fleet.url,
        "--window",
        "1d",
        "--end",
        str(fleet.end),
        "--no-kubernetes",
        *args,
    ]


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


@pytest.fixture(scope="module")
def every(fleet: Fleet) -> dict[str, Any]:
    return _scan(*_live(fleet, "--cluster-label", "cluster"))


def _bare(f: dict[str, Any]) -> tuple[Any, ...]:
    """A finding as a scan of its cluster alone writes it: names without `cluster/`."""
    r = f["resource"]
    name = r["name"].rpartition("/")[2] if r["kind"] in ("GPU", "Node") else r["name"]
    return (
        f["code"],
        r["kind"],
        r["namespace"].rpartition("/")[2],
        name,
        r["node"].rpartition("/")[2],
        f["impact"]["gpu_hours"],
        f["counted_in_total"],
    )


def test_every_cluster_has_a_section_and_the_fleet_is_their_sum(every: dict[str, Any]) -> None:
    assert every["cluster_label"] == "cluster"
    assert sorted(every["clusters"]) == sorted(NAMES)
    assert every["cluster"] == "20 clusters by cluster"
    for key in ADDITIVE:
        total = sum(c["summary"][key] for c in every["clusters"].values())
        # Each figure is rounded to 2 decimals on its own.
        assert total == pytest.approx(every["summary"][key], abs=0.01 * len(NAMES)), key
    assert every["summary"]["gpus_total"] > 0
    assert sum(c["findings"] for c in every["clusters"].values()) == len(every["findings"])
    for f in every["findings"]:
        cluster = f["resource"]["cluster"]
        assert cluster in every["clusters"]
        assert f"{cluster}/" in f["message"]  # every finding names its cluster
    # The stray series without the label was left out, and said so.
    assert any("have no cluster label" in w for w in every["warnings"])


@pytest.mark.parametrize("name", ["eu-00", "us-01", "us-07"])
def test_each_cluster_equals_a_scan_of_that_cluster_alone(
    fleet: Fleet, every: dict[str, Any], name: str
) -> None:
    alone = _scan(*_live(fleet, "--cluster-label", f"cluster={name}"))
    assert "clusters" not in alone and "cluster_label" not in alone
    assert alone["cluster"] == name
    assert every["clusters"][name]["summary"] == alone["summary"]
    mine = [f for f in every["findings"] if f["resource"]["cluster"] == name]
    assert sorted(map(_bare, mine)) == sorted(map(_bare, alone["findings"]))
    assert every["clusters"][name]["findings"] == len(alone["findings"]) > 0


def test_clusters_with_colliding_names_stay_apart(every: dict[str, Any]) -> None:
    # eu-00, eu-04, eu-08, us-02 and us-06 are one scenario under five cluster names: same
    # nodes, UUIDs and pods. Each keeps its own GPUs and findings.
    twins = ["eu-00", "eu-04", "eu-08", "us-02", "us-06"]
    summaries = [every["clusters"][n]["summary"] for n in twins]
    assert all(s == summaries[0] for s in summaries)
    per = {
        n: sorted(_bare(f) for f in every["findings"] if f["resource"]["cluster"] == n)
        for n in twins
    }
    assert all(v == per["eu-00"] and v for v in per.values())


def test_the_number_of_queries_does_not_change_with_the_number_of_clusters(
    fleet: Fleet, tmp_path: Path
) -> None:
    counts = {}
    for label in ("cluster", "pair", "cluster=eu-00"):
        out = tmp_path / f"{label}.snapshot.json"
        res = runner.invoke(
            app, ["snapshot", "save", str(out), "-q", *_live(fleet, "--cluster-label", label)]
        )
        assert res.exit_code == 0, res.output
        doc = raw_snapshot(out)
        man = doc["manifest"]
        counts[label] = (man["http_requests"], len(man["queries"]))
        if "=" not in label:
            assert man["capabilities"]["cluster_label"] == label
    assert (
        len(
            raw_snapshot(tmp_path / "cluster.snapshot.json")["manifest"]["capabilities"]["clusters"]
        )
        == 20
    )
    assert (
        len(raw_snapshot(tmp_path / "pair.snapshot.json")["manifest"]["capabilities"]["clusters"])
        == 2
    )
    # 20 clusters and 2 clusters: the same requests, one per catalogue query plus discovery.
    assert counts["cluster"] == counts["pair"]
    # One cluster: the same queries; a scan of every cluster adds two metadata calls (the
    # label's values, and whether series lack it).
    assert counts["cluster"][1] == counts["cluster=eu-00"][1]
    assert counts["cluster"][0] == counts["cluster=eu-00"][0] + 2


def test_a_snapshot_of_every_cluster_replays_the_same_audit_in_every_format(
    fleet: Fleet, every: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "fleet.snapshot.json.gz"
    res = runner.invoke(
        app, ["snapshot", "save", str(out), "-q", *_live(fleet, "--cluster-label", "cluster")]
    )
    assert res.exit_code == 0, res.output
    replay = _scan("--snapshot", str(out))
    for doc in (replay, dict(every)):
        doc.pop("generated_at")
    assert replay == {k: v for k, v in every.items() if k != "generated_at"}
    for fmt, heading in (
        ("markdown", "## Clusters (by cluster)"),
        ("html", "Clusters (by cluster)"),
    ):
        text = runner.invoke(app, ["scan", "-f", fmt, "-q", "--snapshot", str(out)]).stdout
        assert heading in text and "fleet total" in text
        assert all(n in text for n in NAMES)
    res = runner.invoke(app, ["scan", "-q", "-o", str(tmp_path / "t.txt"), "--snapshot", str(out)])
    assert res.exit_code in (0, 1), res.output
    table = (tmp_path / "t.txt").read_text()
    assert "Clusters by cluster:" in table and "fleet total: " in table
    assert all(f"  {n}: " in table for n in NAMES)


def test_too_many_clusters_is_refused_before_any_query(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUAUDIT_MAX_CLUSTERS", "5")
    res = runner.invoke(app, ["scan", "-q", *_live(fleet, "--cluster-label", "cluster")])
    assert res.exit_code == 2
    assert "20 values of cluster" in res.output and "GPUAUDIT_MAX_CLUSTERS" in res.output
    assert "Traceback" not in res.output
