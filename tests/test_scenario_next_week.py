"""A scenario and the week after it (`gpuaudit scenario --next-week`, issue 34): week two
scanned against week one's report says which findings were fixed (and how), which are still
open and which is new, exactly as the truth says, and the realized savings are the fixed
findings' weekly impact in week one's report, by hand; with `--history` the two weeks make the
trend."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app

runner = CliRunner()
ARGS = ["--gpus", "60", "--days", "1", "--seed", "1", "-q", "--no-side-file"]


def _run(*args: str) -> None:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def weeks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("weeks")
    _run("scenario", *ARGS, "-o", str(d / "w1.json.gz"), "--truth", str(d / "t1.json"))
    _run(
        "scenario", *ARGS, "--next-week", "-o", str(d / "w2.json.gz"), "--truth", str(d / "t2.json")
    )
    _run("scan", "--snapshot", str(d / "w1.json.gz"), "-q", "-f", "json", "-o", str(d / "r1.json"))
    _run(
        "scan", "--snapshot", str(d / "w2.json.gz"), "-q", "-f", "json", "-o", str(d / "r2.json"),
        "--previous", str(d / "r1.json"),
    )  # fmt: skip
    hist = d / "history"
    for week in ("w1", "w2"):
        _run(
            "scan", "--snapshot", str(d / f"{week}.json.gz"), "-q", "--history", str(hist),
            "-f", "markdown", "-o", str(d / f"{week}.md"),
        )  # fmt: skip
    read = lambda name: json.loads((d / name).read_text())  # noqa: E731
    return {
        "r1": read("r1.json"),
        "r2": read("r2.json"),
        "truth": read("t2.json")["next_week"],
        "md": (d / "w2.md").read_text(),
    }


def test_fixed_still_open_and_new_are_the_truth(weeks: dict[str, Any]) -> None:
    c, truth = weeks["r2"]["comparison"], weeks["truth"]
    assert {(f["fingerprint"], f["how"]) for f in c["fixed"]} == {
        (f["fingerprint"], f["how"]) for f in truth["fixed"]
    }
    assert c["new_findings"] == truth["new"]
    fixed = {f["fingerprint"] for f in truth["fixed"]}
    before = {f["fingerprint"] for f in weeks["r1"]["findings"]}
    assert {f["fingerprint"] for f in c["still_open"]} == before - fixed
    assert all(f["weeks"] == 2 for f in c["still_open"])
    assert c["waived"] == [] and c["unverified"] == []
    why = {f["fingerprint"]: f["why"] for f in c["fixed"]}
    assert why["GPU001|Pod|serving|Deployment/fixable-llm"] == (
        "Deployment serving/fixable-llm, which owned it, is scaled down to 0 replicas."
    )
    assert why["GPU001|Pod|research|scratch-gpu"] == (
        "The pod research/scratch-gpu is no longer in the cluster."
    )


def test_the_realized_savings_are_last_weeks_weekly_impact(weeks: dict[str, Any]) -> None:
    r1, saved = weeks["r1"], weeks["r2"]["comparison"]["realized_savings"]
    assert r1["window"]["hours"] == 24
    # GPU001 on the two pods (GPU021 on the same pods shares their hours): one L40S each, idle
    # all of week one's 24 hours, so 24 GPU-hours each, 168 a week.
    idle = {"GPU001|Pod|research|scratch-gpu", "GPU001|Pod|serving|Deployment/fixable-llm"}
    then = [f for f in r1["findings"] if f["fingerprint"] in idle]
    assert [f["impact"]["gpu_hours"] for f in then] == [24, 24]
    assert saved["gpu_hours"] == 2 * 24 * 7 == 336
    assert saved["cost"] == pytest.approx(sum(f["impact"]["cost"] for f in then) * 7, abs=0.01)
    assert saved["currency"] == "USD" and saved["findings"] == 2


def test_the_two_weeks_make_the_trend(weeks: dict[str, Any]) -> None:
    md = weeks["md"]
    assert (
        md.index("## Since last week") < md.index("## The last 2 weeks") < md.index("## Findings")
    )
    assert "4 fixed, saving 336.0 GPU-hours and" in md
    rows = md.split("## The last 2 weeks")[1].split("\n\n")[1].splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == ["| 2026-11-23 00:00", "| 2026-11-30 00:00"]
    assert rows[0].split(" | ")[5:] == ["n/a", "n/a", "n/a |"]
    assert rows[1].split(" | ")[5:7] == ["4", "336.0"]
