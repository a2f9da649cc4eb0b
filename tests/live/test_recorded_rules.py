"""Through gpuaudit's recording rules, a scan gives the figures the raw series give: held time
from the recorded sample counts (`:count5m`), activity from the recorded sums.

The rules are backfilled over the scenario's history by promtool (`tsdb create-blocks-from
rules`) against a real Prometheus, whose rules API then lists them, as a server evaluating them
would. Each recorded point covers the 5 minutes before it, so a bucket's recorded samples are
those of a window shifted by up to 5 minutes: held time per holding is the same, a bucket's
split at a holding's edges may differ by a sample.
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
from gpuaudit.sources.prometheus.rules import recording_rules
from tests.conftest import raw_snapshot
from tests.promserver import Backfilled, prometheus, require

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


def test_recorded_counts_give_the_raw_figures(
    scenario_tsdb: Backfilled, prom_url: str, tmp_path: Path
) -> None:
    promtool = require("promtool")
    rules = tmp_path / "rules.yml"
    # The rules of the activity metric only (held time and activity read them): promtool
    # evaluates each rule over the whole history, which takes a while.
    groups = recording_rules("exported")
    for group in groups:
        group["rules"] = [r for r in group["rules"] if "gr_engine_active" in r["record"]]
    rules.write_text(yaml.safe_dump({"groups": groups}))
    blocks = tmp_path / "blocks"
    start = scenario_tsdb.end - scenario_tsdb.days * 86400 - 3600
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "rules",
            "-q",
            f"--start={start + 60}",  # evaluations 1 minute past the buckets' edges
            f"--end={scenario_tsdb.end + 600}",
            f"--url={prom_url}",
            f"--output-dir={blocks}",
            str(rules),
        ],
        check=True,
        capture_output=True,
    )
    both = tmp_path / "tsdb"
    shutil.copytree(scenario_tsdb.tsdb, both)
    for block in blocks.iterdir():
        shutil.copytree(block, both / block.name)
    raw = _scan(prom_url, scenario_tsdb, tmp_path / "raw.json")
    with prometheus(both, rule_files=(rules,)) as url:
        recorded = _scan(url, scenario_tsdb, tmp_path / "recorded.json")
        doc = raw_snapshot(tmp_path / "recorded.json")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in doc["manifest"]["capabilities"]["recording_rules"]
    counts = doc["prometheus"]["act_count_hourly"][0]["query"]
    assert "gpuaudit:dcgm_fi_prof_gr_engine_active:count5m" in counts
    r, s = raw["summary"], recorded["summary"]
    assert s["held_time"] == "samples"
    assert s["scrape_interval_s"] == pytest.approx(r["scrape_interval_s"], rel=1e-3)
    for key in ("allocated_gpu_hours", "mean_activity"):
        assert s[key] == pytest.approx(r[key], rel=5e-3), key
    # Idle GPU-hours are held time in buckets under the idle threshold: a bucket whose edge the
    # recording shifted by a minute takes a twelfth of the hour before it, which can move an
    # hour across the threshold where activity changes sharply from one hour to the next.
    assert s["idle_gpu_hours"] == pytest.approx(r["idle_gpu_hours"], rel=5e-2)

    def idle(doc: dict[str, Any]) -> dict[str, float]:
        return {
            f["resource"]["name"]: f["impact"]["gpu_hours"]
            for f in doc["findings"]
            if f["code"] == "GPU001"
        }

    assert idle(recorded).keys() == idle(raw).keys()
    for pod, hours in idle(raw).items():
        assert idle(recorded)[pod] == pytest.approx(hours, rel=1e-2), pod
