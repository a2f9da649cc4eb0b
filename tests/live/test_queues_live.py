"""GPU090 and the capacity plan live: the test API server serving Kueue and Volcano queues, a
real Prometheus holding the scenario's DCGM history; and the queues recorded in a snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.scenario import generate
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled

runner = CliRunner()
QUEUE_LISTS = (
    "kueue_clusterqueues",
    "kueue_resourceflavors",
    "kueue_cohorts",
    "kueue_localqueues",
    "kueue_workloads",
    "volcano_queues",
    "volcano_podgroups",
    "kai_queues",
    "kai_podgroups",
)


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _live(prom_url: str, kubeconfig: Path, b: Backfilled, *more: str) -> dict[str, Any]:
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    return _scan("--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window, *more)


def _names(doc: dict[str, Any], code: str) -> set[tuple[str, str]]:
    return {
        (f["resource"]["kind"], f["resource"]["name"]) for f in doc["findings"] if f["code"] == code
    }


def test_gpu090_live_finds_exactly_the_planted_queues(
    prom_url: str, kubeconfig: Path, kube_server: KubeAPIServer, scenario_tsdb: Backfilled
) -> None:
    doc = _live(prom_url, kubeconfig, scenario_tsdb)
    truth = generate(60, 2, 5, scrape_s=300).truth
    planted = {(e["kind"], e["name"]) for e in truth["planted"]["GPU090"]}
    near = {(e["kind"], e["name"]) for e in truth["near_misses"]["GPU090"]}
    assert planted and near
    assert _names(doc, "GPU090") == planted
    # Every queue kind was listed, read-only, from the API server.
    for key in QUEUE_LISTS:
        assert kube_server.list_requests(key), key
    assert set(kube_server.methods()) == {"GET"}
    cap = doc["capacity"]
    assert {q["queue"] for q in cap["queues"]} >= {"team-a-cq", "vision-reserved"}
    assert cap["by_product"]["NVIDIA-GB200"]["nodes_ran_gpu_pods"] >= 1
    # Released: exactly the idle findings' holdings, GPU001's pods whole, GPU002's from the
    # start of their idle tail.
    idle = {
        (f"{f['resource']['namespace']}/{f['resource']['name']}", f["code"]): (
            f["evidence"]["idle_tail_from"] if f["code"] == "GPU002" else None
        )
        for f in doc["findings"]
        if f["code"] in ("GPU001", "GPU002")
    }
    held = cap["after_release_idle"]["released_holdings"]
    assert {(r["pod"], r["code"]): r["from"] for r in held} == idle and idle
    assert cap["after_release_idle"]["released_reservations"] == len({p for p, _ in idle})
    assert cap["what_if"] == []


def test_what_if_release_idle_live(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled
) -> None:
    """The plan after release, live: JSON carries it with or without the option; Markdown shows
    its table only with it, with the figures JSON has."""
    doc = _live(prom_url, kubeconfig, scenario_tsdb, "--what-if", "release-idle")
    cap = doc["capacity"]
    assert cap["what_if"] == ["release-idle"]
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    args = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window]
    res = runner.invoke(app, ["scan", "-q", "-f", "markdown", *args, "--what-if", "release-idle"])
    assert res.exit_code == 0, res.output
    md = res.stdout
    assert "### After releasing the idle reservations (--what-if release-idle)" in md
    for line in cap["headlines"]:
        assert line in md
    released = list(cap["after_release_idle"]["by_product"].values())
    assert any(p["released_reservations"] for p in released)
    for p in cap["by_product"].values():
        # Packed with the feasibility model: never more nodes than there are schedulable.
        assert p["min_nodes_at_peak"] <= p["nodes"] - p["nodes_cordoned"]
        assert len(p["nodes_used_at_peak"]) == p["min_nodes_at_peak"]
    plain = runner.invoke(app, ["scan", "-q", "-f", "markdown", *args])
    assert plain.exit_code == 0 and "### After releasing" not in plain.stdout


def test_queues_are_recorded_and_replayed(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "s.json.gz"
    window = ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
    args = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *window]
    res = runner.invoke(app, ["snapshot", "save", str(out), *args, "-q"])
    assert res.exit_code == 0, res.output
    snap = snapshot.read(out)
    for key in QUEUE_LISTS:
        assert snap.manifest["objects"][key] == "ok", key
        assert snap.kubernetes[key][0]["items"], key
    live, replay = _scan(*args), _scan("--snapshot", str(out))
    for doc in (live, replay):
        doc.pop("generated_at")
    assert live["capacity"] == replay["capacity"]
    assert _names(live, "GPU090") == _names(replay, "GPU090") != set()


def _lists(b: Backfilled, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        p.stem: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted(b.k8s_dir.glob("*.json"))
        if p.stem not in drop
    }


def test_forbidden_queue_lists_skip_gpu090_with_the_reason(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    forbidden = {"kueue_clusterqueues", "volcano_queues", "kai_queues"}
    with KubeAPIServer(_lists(scenario_tsdb), forbidden=forbidden) as srv:
        doc = _live(prom_url, srv.write_kubeconfig(tmp_path / "kc"), scenario_tsdb)
    skipped = {s["check"]: s["reason"] for s in doc["skipped"]}
    reason = skipped["GPU090"]
    assert "kueue_clusterqueues: forbidden" in reason and "volcano_queues: forbidden" in reason
    assert "kai_queues: forbidden" in reason
    assert not _names(doc, "GPU090")
    assert doc["capacity"]["queues"] == []  # no queue figures without queue objects
    assert doc["capacity"]["by_product"]  # the plan itself needs only DCGM and nodes


def test_absent_queue_crds_skip_gpu090_with_the_reason(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    with KubeAPIServer(_lists(scenario_tsdb, QUEUE_LISTS)) as srv:
        doc = _live(prom_url, srv.write_kubeconfig(tmp_path / "kc"), scenario_tsdb)
    reason = {s["check"]: s["reason"] for s in doc["skipped"]}["GPU090"]
    assert (
        "kueue_clusterqueues: absent: the CRD clusterqueues.kueue.x-k8s.io is not installed"
        in reason
    )
    assert "volcano_queues: absent: the CRD queues.scheduling.volcano.sh is not installed" in reason
    assert "kai_queues: absent: the CRD queues.scheduling.run.ai is not installed" in reason
