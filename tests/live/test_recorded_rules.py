"""Through gpuaudit's recording rules, a scan gives exactly the figures the raw series give:
held time from the recorded sample counts (`:count5m`), activity from the recorded sums, the
raw samples at the edges of each bucket that the 5-minute evaluations do not line up with.

The rules are evaluated over the scenario's history by promtool (`tsdb create-blocks-from
rules`) against a real Prometheus holding the raw series, whose rules API then lists them, as
a server evaluating them would; the evaluations fall 67 s past each 5-minute mark, as a
server's group offset puts them anywhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.console.show import describe
from gpuaudit.sources.prometheus.rules import recording_rules
from tests.support.promserver import Backfilled, prometheus
from tests.support.raw_snapshot import raw_snapshot
from tests.support.servers import require

runner = CliRunner()


def _scan(url: str, b: Backfilled, out: Path) -> dict[str, Any]:
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    res = runner.invoke(
        app,
        ["snapshot", "save", str(out), "--prometheus-url", url, "--no-kubernetes", "-q"] + window,
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["scan", "--snapshot", str(out), "-f", "json", "-q"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _backfilled_rules(b: Backfilled, prom_url: str, tmp: Path, start: int) -> tuple[Path, Path]:
    """A copy of the scenario's TSDB with the activity metric's rules and the heartbeat
    evaluated by promtool from `start` on; the rule file and the TSDB."""
    promtool = require("promtool")
    rules = tmp / "rules.yml"
    # The rules of the activity metric only (held time and activity read them): promtool
    # evaluates each rule over the whole history, which takes a while.
    # The 5-minute group only: the hourly one (`test_hourly_rules`) would be read instead.
    groups = [g for g in recording_rules("exported") if g["interval"] == "5m"]
    for group in groups:
        group["rules"] = [
            r
            for r in group["rules"]
            if "gr_engine_active" in r["record"] or "recording_rules" in r["record"]
        ]
    rules.write_text(yaml.safe_dump({"groups": groups}))
    blocks = tmp / "blocks"
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "rules",
            "-q",
            f"--start={start}",
            f"--end={b.end + 600}",
            f"--url={prom_url}",
            f"--output-dir={blocks}",
            str(rules),
        ],
        check=True,
        capture_output=True,
    )
    both = tmp / "tsdb"
    shutil.copytree(b.tsdb, both)
    for block in blocks.iterdir():
        shutil.copytree(block, both / block.name)
    return rules, both


def _same_figures(raw: dict[str, Any], recorded: dict[str, Any]) -> None:
    r, s = raw["summary"], recorded["summary"]
    assert s["held_time"] == "samples"
    for key in ("scrape_interval_s", "allocated_gpu_hours", "mean_activity", "idle_gpu_hours"):
        assert s[key] == pytest.approx(r[key], rel=1e-9), key

    def found(doc: dict[str, Any]) -> list[tuple[str, str, float]]:
        return sorted(
            (f["code"], f["resource"]["name"], round(f["impact"]["gpu_hours"], 6))
            for f in doc["findings"]
        )

    assert found(recorded) == found(raw)


def test_recorded_series_give_exactly_the_raw_figures(
    scenario_tsdb: Backfilled, prom_url: str, tmp_path: Path
) -> None:
    b = scenario_tsdb
    start = b.end - b.days * 86400 - 3600 + 67
    rules, both = _backfilled_rules(b, prom_url, tmp_path, start)
    raw = _scan(prom_url, b, tmp_path / "raw.json")
    with prometheus(both, rule_files=(rules,)) as url:
        recorded = _scan(url, b, tmp_path / "recorded.json")
    doc = raw_snapshot(tmp_path / "recorded.json")
    caps = doc["manifest"]["capabilities"]
    assert caps["recording_rules"] == ["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert caps["recorded"]["covers"] == "whole"
    # promtool puts its evaluations where it likes: anywhere on the 5-minute grid will do.
    assert 0 <= caps["recorded"]["phase_ms"] < 300_000
    reads = {q["id"]: q["reads"] for q in doc["manifest"]["queries"]}
    assert reads["fb_used_max"] == "raw"
    assert reads["act_count"] == reads["act_max"] == "recorded and raw"
    assert reads["act_p95_hourly"] == reads["util_count"] == "raw"
    counts = doc["prometheus"]["act_count"][0]["query"]
    assert "gpuaudit:dcgm_fi_prof_gr_engine_active:count5m" in counts
    # The hourly buckets read the recorded series only where the evaluations fall on their
    # edges (`recorded.hourly_parts`).
    phase = caps["recorded"]["phase_ms"]
    assert reads["act_hourly"] == ("recorded" if phase == 0 else "raw")
    _same_figures(raw, recorded)
    shown = describe(tmp_path / "recorded.json")
    assert "read recorded series over the whole window" in shown
    assert "act_count" in shown.split("recorded ", 1)[1]


def test_rules_that_began_within_the_window_are_read_after_they_began(
    scenario_tsdb: Backfilled, prom_url: str, tmp_path: Path
) -> None:
    b = scenario_tsdb
    begun = b.end - 86400 + 1800 + 67  # half past an hour, one day before the end
    rules, both = _backfilled_rules(b, prom_url, tmp_path, begun)
    raw = _scan(prom_url, b, tmp_path / "raw.json")
    with prometheus(both, rule_files=(rules,)) as url:
        recorded = _scan(url, b, tmp_path / "recorded.json")
    doc = raw_snapshot(tmp_path / "recorded.json")
    cov = doc["manifest"]["capabilities"]["recorded"]
    # The first evaluation covers the 5 minutes before it: raw series up to it.
    assert cov["covers"] == "part"
    first = begun + (cov["phase_ms"] - begun * 1000) % 300_000 / 1000
    assert cov["since"] == first - 300
    # Raw samples up to the first evaluation, the recorded points after it.
    query = doc["prometheus"]["act_count"][0]["query"]
    assert "count5m" in query and "count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE" in query
    assert {q["id"]: q["reads"] for q in doc["manifest"]["queries"]}["act_count"] == (
        "recorded and raw"
    )
    _same_figures(raw, recorded)
    assert "raw series before" in describe(tmp_path / "recorded.json")
