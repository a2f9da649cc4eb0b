"""The demo end to end: planted GPU001 cases, and the summary recomputed from raw answers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuaudit.checks import discover
from gpuaudit.cli import app
from gpuaudit.scenario.teams import DEFAULT, TEAMS
from tests.support.paths import DEMO, DEMO_TRUTH
from tests.support.raw_fleet import assert_summary_adds_up, fleet_from_raw
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
    raw = fleet_from_raw(doc, {"H100": 6.88, "A100": 5.12, "L40S": 2.70, "GB200": 10.50})
    ledger = report["attribution"]
    assert ledger["attributed"]["kubernetes_join"]["gpu_hours"] > 0
    assert ledger["attributed"]["shared_split"]["gpu_hours"] > 0
    assert ledger["unattributed"]["time_slicing_without_virtual_gpus"]["gpu_hours"] > 0
    assert_summary_adds_up(report, raw)


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
    # Each namespace's pods carry the team `teams.TEAMS` names for it, else `teams.DEFAULT`
    # (platform: the namespaces of KAI's reservation pods and of later cases, e.g. perf).
    namespaces = {n["key"] for n in doc["breakdown"]["by_namespace"]}
    assert set(groups) == {TEAMS.get(n, DEFAULT) for n in namespaces}
    assert set(groups) == {"data", "inference", "platform", "research", "training", "vision"}
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
