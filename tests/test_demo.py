"""The demo end to end: planted GPU001 cases, and the summary recomputed from raw answers."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime

import pytest
from typer.testing import CliRunner

from gpuaudit.checks import discover
from gpuaudit.cli import app
from tests.support.paths import DEMO, DEMO_TRUTH
from tests.support.raw_attribution import hami_tenants, joined_mig, replicas_of
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()


@pytest.fixture(scope="module")
def report() -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, ["scan", "--demo", "--format", "json", "--quiet"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


CODES = [c.code for c in discover()]
"""Every check: the demo plants a case and a near miss of each."""


@pytest.mark.parametrize("code", CODES)
def test_each_check_names_exactly_its_planted_cases(report: dict, code: str) -> None:  # type: ignore[type-arg]
    truth = json.loads(DEMO_TRUTH.read_text())
    planted = {(p["namespace"], p["name"]) for p in truth["planted"][code]}
    near = {(p["namespace"], p["name"]) for p in truth["near_misses"][code]}
    found = {
        (f["resource"]["namespace"], f["resource"]["name"])
        for f in report["findings"]
        if f["code"] == code
    }
    assert planted, f"the demo plants no {code} case"
    assert near, f"the demo plants no {code} near-miss"
    assert found == planted
    assert not found & near


def claimed_since(doc: dict, step: int) -> dict[str, tuple[float, str, str]]:  # type: ignore[type-arg]
    """UUID -> (the first bucket end that counts as held, namespace, pod), for GPUs pods hold
    through DRA claims: the pod's start (from the raw pod), plus half a bucket."""
    kube = doc["kubernetes"]
    started = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p["status"].get("startTime")
        for page in kube["pods"]
        for p in page["items"]
    }
    uuid = {
        (s["spec"]["pool"]["name"], d["name"]): d["attributes"]["uuid"]["string"]
        for page in kube.get("resourceslices", [])
        for s in page["items"]
        for d in s["spec"]["devices"]
    }
    out = {}
    for page in kube.get("resourceclaims", []):
        for c in page["items"]:
            (pod,) = c["status"]["reservedFor"]
            ns = c["metadata"]["namespace"]
            t = datetime.fromisoformat(started[(ns, pod["name"])])
            for r in c["status"]["allocation"]["devices"]["results"]:
                out[uuid[(r["pool"], r["device"])]] = (t.timestamp() + step / 2, ns, pod["name"])
    return out


def test_planted_confidences(report: dict) -> None:  # type: ignore[type-arg]
    """Cases planted with a confidence (GPU001's power corroboration: an idle-looking pod at
    high power, and its near-miss at idle power) are reported with it."""
    truth = json.loads(DEMO_TRUTH.read_text())
    graded = [
        (code, p["namespace"], p["name"], p["confidence"])
        for code, entries in truth["planted"].items()
        for p in entries
        if p.get("confidence")
    ]
    assert {c for *_, c in graded} >= {"low", "high"}
    by_key = {
        (f["code"], f["resource"]["namespace"], f["resource"]["name"]): f
        for f in report["findings"]
    }
    for code, ns, name, confidence in graded:
        f = by_key[(code, ns, name)]
        assert f["confidence"] == confidence, (name, f["message"])
        assert f["evidence"]["power_mean_w"] is not None


def test_summary_recomputed_from_raw_prometheus_answers(report: dict) -> None:  # type: ignore[type-arg]
    """Independent of gpuaudit's parsing: read the snapshot's raw JSON with plain Python."""
    doc = raw_snapshot(DEMO)
    step = doc["manifest"]["window"]["step"]
    end = doc["manifest"]["window"]["end"]
    hours = (end - doc["manifest"]["window"]["start"]) / 3600
    prices = {"H100": 6.88, "A100": 5.12, "L40S": 2.70, "GB200": 10.50}
    body = doc["prometheus"]["act_hourly"][0]["body"]
    alloc = idle = cost = now = wsum = 0.0
    gpus_by_node: dict[str, set[str]] = defaultdict(set)
    for q in ("act_count", "util_count"):
        for item in doc["prometheus"][q][0]["body"]["data"]["result"]:
            gpus_by_node[item["metric"]["Hostname"]].add(item["metric"]["UUID"])
    held_from = claimed_since(doc, step)
    nodes = [n for page in doc["kubernetes"]["nodes"] for n in page["items"]]
    replicas = replicas_of(nodes)
    series = body["data"]["result"]
    named = {m["exported_pod"] for m in (i["metric"] for i in series) if m.get("exported_pod")}
    joined = joined_mig(doc, series, named)
    # (GPU-hours, activity, price, GPUs held in the window's last bucket) of each bucket held.
    held: list[tuple[float, float, float, float]] = []
    for item in series:
        m = item["metric"]
        key = (m["Hostname"], m["UUID"], m.get("GPU_I_ID", ""))
        claimed = held_from.get(m["UUID"]) if not m.get("exported_pod") else None
        since = claimed[0] if claimed else None
        if not m.get("exported_pod") and key not in joined and since is None:
            continue
        frac = 1.0 / replicas.get(m["Hostname"], 1) if m.get("exported_pod") else 1.0
        if "GPU_I_PROFILE" in m:
            frac = int(m["GPU_I_PROFILE"].split("g.")[0]) / 7
        price = next(v for k, v in prices.items() if k in m["modelName"])
        buckets = joined.get(key) if not m.get("exported_pod") and since is None else None
        for ts, val in item["values"]:
            if since is not None and ts < since:
                continue  # before the pod holding it through a DRA claim started
            if buckets is not None and float(ts) not in buckets:
                continue  # a bucket the Kubernetes-side join gave no pod
            gh = frac * step / 3600 * (buckets[float(ts)] if buckets is not None else 1.0)
            held.append((gh, float(val), price, frac if ts == end else 0.0))
    # GPUs shared by HAMi: each pod holds its share in the buckets it ran in (its part of them).
    for t in (t for t in hami_tenants(doc) if t["buckets"] is not None):
        price = next(v for k, v in prices.items() if k in t["model"])
        for ts, (part, a) in t["buckets"].items():
            gh = t["share"] * step / 3600 * part
            held.append((gh, a, price, t["share"] if ts == end else 0.0))
    for gh, a, price, at_end in held:
        alloc += gh
        wsum += a * gh
        if a < 0.05:
            idle += gh
            cost += gh * price
        now += at_end
    advertised = {
        n["metadata"]["name"]: int(n["metadata"]["labels"].get("nvidia.com/gpu.count", 0))
        for page in doc["kubernetes"]["nodes"]
        for n in page["items"]
    }
    total = sum(
        max(len(gpus_by_node.get(node, ())), advertised.get(node, 0))
        for node in set(gpus_by_node) | set(advertised)
    )
    s = report["summary"]
    ledger = report["attribution"]
    unattributed = sum(v["gpu_hours"] for v in ledger["unattributed"].values())
    measured = alloc
    assert ledger["attributed"]["kubernetes_join"]["gpu_hours"] > 0
    assert ledger["attributed"]["shared_split"]["gpu_hours"] > 0
    assert ledger["unattributed"]["time_slicing_without_virtual_gpus"]["gpu_hours"] > 0
    assert s["gpus_total"] == total
    # Allocated: measured GPU-hours plus the unattributed ones; the ledger adds up to it.
    assert s["allocated_gpu_hours"] == pytest.approx(measured + unattributed, abs=0.02)
    parts = [
        v["gpu_hours"] for side in ("attributed", "unattributed") for v in ledger[side].values()
    ]
    assert round(sum(parts), 2) == s["allocated_gpu_hours"]
    assert s["gpus_allocated_avg"] == pytest.approx(s["allocated_gpu_hours"] / hours, abs=0.01)
    assert s["allocation_rate"] == pytest.approx(
        s["allocated_gpu_hours"] / hours / s["gpus_total"], abs=1e-4
    )
    assert s["mean_activity"] == pytest.approx(wsum / alloc, abs=1e-4)
    assert s["idle_gpu_hours"] == pytest.approx(idle, abs=0.01)
    assert s["wasted_cost"] == pytest.approx(cost, abs=0.01)
    assert s["gpus_allocated_now"] == pytest.approx(now, abs=0.01)


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_confidence_shows_with_the_findings_text(fmt: str) -> None:
    """The terminal, Markdown and HTML reports show an idle finding's confidence and second
    signals where they show its message."""
    res = runner.invoke(
        app, ["scan", "--demo", "--format", fmt, "--quiet", "--all"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert (
        "Confidence low: its GPUs drew 158 W on average (45 % of their 350 W board power)" in text
    )
    assert "Confidence high: its GPUs drew" in text


def test_the_demo_breaks_waste_down_by_team() -> None:
    """Every GPU pod of the demo carries a `team` label: `--group-by-label team`, as the docs
    and the CronJob run it, leaves nothing in (no label) and warns of nothing."""
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", "--group-by-label", "team"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    groups = {g["key"]: g for g in doc["breakdown"]["by_group"]}
    assert set(groups) == {"data", "inference", "research", "training", "vision"}
    total = sum(g["allocated_gpu_hours"] for g in groups.values())
    by_namespace = sum(g["allocated_gpu_hours"] for g in doc["breakdown"]["by_namespace"])
    assert total == pytest.approx(by_namespace, abs=0.1)
    assert not [w for w in doc["warnings"] if "--group-by-label" in w]


def test_the_findings_are_ranked_as_the_readme_says(report: dict) -> None:  # type: ignore[type-arg]
    """The risks first (sick GPUs, memory pressure, unmonitored GPUs, quota or policy that
    cannot be honoured), most urgent first; then the waste, the most wasted GPU-hours first."""
    findings = report["findings"]
    kinds = [f["category"] for f in findings]
    assert kinds == sorted(kinds, key=lambda c: c != "risk") and set(kinds) == {"risk", "waste"}
    risks = [f for f in findings if f["category"] == "risk"]
    waste = [f for f in findings if f["category"] == "waste"]
    assert {f["code"] for f in risks} == {"GPU020", "GPU050", "GPU070", "GPU080", "GPU090"}
    assert not {"GPU020", "GPU070", "GPU080"} & {f["code"] for f in waste}
    assert all(f["impact"]["gpu_hours"] == 0 for f in risks if f["code"] in ("GPU050", "GPU090"))
    rank = {s: i for i, s in enumerate(("critical", "high", "medium", "low", "info"))}
    urgency = [rank[f["severity"]] for f in risks]
    assert urgency == sorted(urgency)
    hours = [f["impact"]["gpu_hours"] for f in waste]
    assert hours == sorted(hours, reverse=True)
    top = waste[0]
    assert (top["code"], top["resource"]["name"]) == ("GPU090", "vision-reserved")


def test_fail_on_still_gates_on_severity_whichever_list() -> None:
    """The order is by GPU-hours, the gate by severity: the demo's one critical finding (a sick
    GPU, among the risks) fails `--fail-on critical` though no waste is critical."""
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", "--fail-on", "critical"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    critical = [f for f in doc["findings"] if f["severity"] == "critical"]
    assert [(f["code"], f["category"]) for f in critical] == [("GPU070", "risk")]
