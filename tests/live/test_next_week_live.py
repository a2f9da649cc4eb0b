"""Issue 34 live: two weekly scans of a real Prometheus and the test API server, the cron job's
way. Week one (a small scenario) is kept with `--history DIR`; week two (the same cluster a week
later, `generate_next_week`: two findings' objects gone or scaled down, one pod gone idle) reads
it back: the fixed / still-open / new split is the next week's truth, the realized savings are
the hand-computed figure, and the Markdown trend has the two weeks. One Prometheus at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import DEFAULT_END, Scenario, generate, k8s_lists, write_openmetrics
from gpuaudit.scenario.next_week_cases import KEY, WEEK_S, generate_next_week
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import create_blocks, prometheus

runner = CliRunner()
GPUS, DAYS, SEED, SCRAPE_S = 60, 1, 1, 300


def _scan_week(sc: Scenario, end: int, folder: Path, history: Path) -> str:
    """Backfill `sc` into a TSDB of its own, serve it and its objects, and scan it live with
    `--history`; returns the Markdown report."""
    folder.mkdir()
    om = folder / "week.om"
    with open(om, "w", encoding="utf-8") as fh:
        write_openmetrics(sc, fh)
    create_blocks(om, folder / "tsdb")
    om.unlink()
    k8s = folder / "k8s"
    k8s.mkdir()
    for name, lst in k8s_lists(sc).items():
        (k8s / f"{name}.json").write_text(json.dumps(lst))
    with prometheus(folder / "tsdb") as url, KubeAPIServer.from_dir(k8s) as srv:
        res = runner.invoke(
            app,
            [
                "scan", "--prometheus-url", url,
                "--kubeconfig", str(srv.write_kubeconfig(folder / "kubeconfig")),
                "--window", f"{DAYS}d", "--end", str(end), "-q",
                "--history", str(history), "-f", "markdown", "-o", str(folder / "report.md"),
            ],
        )  # fmt: skip
    assert res.exit_code == 0, res.output
    return (folder / "report.md").read_text()


def _kept(history: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(history.glob("gpuaudit-*.json"))]


def test_a_live_week_after_says_what_was_fixed_and_what_it_saved(tmp_path: Path) -> None:
    history = tmp_path / "history"
    _scan_week(generate(GPUS, DAYS, SEED, scrape_s=SCRAPE_S), DEFAULT_END, tmp_path / "w1", history)
    nxt = generate_next_week(GPUS, DAYS, SEED, scrape_s=SCRAPE_S)
    md = _scan_week(nxt, DEFAULT_END + WEEK_S, tmp_path / "w2", history)
    r1, r2 = _kept(history)
    truth, c = nxt.truth[KEY], r2["comparison"]
    assert {(f["fingerprint"], f["how"]) for f in c["fixed"]} == {
        (f["fingerprint"], f["how"]) for f in truth["fixed"]
    }
    assert c["new_findings"] == truth["new"]
    fixed = {f["fingerprint"] for f in truth["fixed"]}
    assert {f["fingerprint"] for f in c["still_open"]} == {
        f["fingerprint"] for f in r1["findings"]
    } - fixed
    assert all(f["weeks"] == 2 for f in c["still_open"])
    assert c["waived"] == []
    # GPU001 on research/scratch-gpu and serving/fixable-llm: one L40S each, idle all of week
    # one's 24 hours (288 scrapes of 300 s), so 24 GPU-hours each, 2 x 24 x 7 = 336 a week.
    idle = {"GPU001|Pod|research|scratch-gpu", "GPU001|Pod|serving|Deployment/fixable-llm"}
    then = [f for f in r1["findings"] if f["fingerprint"] in idle]
    assert [f["impact"]["gpu_hours"] for f in then] == [24, 24]
    saved = c["realized_savings"]
    assert saved["gpu_hours"] == 336 and saved["findings"] == 2
    assert abs(saved["cost"] - 7 * sum(f["impact"]["cost"] for f in then)) < 0.01
    # The trend: the two kept weeks, the second with its 4 fixed findings and 336 GPU-hours.
    assert md.index("## Since last week") < md.index("## The last 2 weeks")
    rows = md.split("## The last 2 weeks")[1].split("\n\n")[1].splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == ["| 2026-11-23 00:00", "| 2026-11-30 00:00"]
    assert rows[1].split(" | ")[5:7] == ["4", "336.0"]
