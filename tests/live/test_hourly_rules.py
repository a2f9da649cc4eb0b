"""Through gpuaudit's hourly recording rules (`gpuaudit rules`, group `gpuaudit.hourly`), a scan
gives exactly the report the raw series give over the same window: the JSON reports are equal
apart from the manifest's read plan.

promtool evaluates the hourly group over the scenario's raw history on a real Prometheus
(`tsdb create-blocks-from rules`), at the offset Prometheus would evaluate it at: the rule
file's name is chosen so that it falls on a whole second (67 s past the hour or wherever the
hash puts it), not on the hour. The server that serves the result loads no rules: gpuaudit
finds the rules from their heartbeat alone, as it would behind vmalert. The scan with the rules
moves its window's end to their last evaluation; the raw scan is sent that end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.console.show import describe
from gpuaudit.sources import collect
from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus import hourly
from tests.support.promserver import Backfilled, prometheus
from tests.support.raw_snapshot import raw_snapshot
from tests.support.rulephase import evaluated, whole_second_file

runner = CliRunner()


def _save(url: str, b: Backfilled, out: Path, end: int) -> dict[str, Any]:
    res = runner.invoke(
        app,
        ["snapshot", "save", str(out), "--prometheus-url", url, "--no-kubernetes", "-q"]
        + ["--window", f"{b.days}d", "--end", str(end)],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["scan", "--snapshot", str(out), "-f", "json", "-q"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout.replace(url, "URL"))
    return doc


def _evaluated(b: Backfilled, prom_url: str, tmp: Path, start: int) -> tuple[Path, int]:
    """A copy of the scenario's TSDB with the hourly group evaluated by promtool from `start`
    on, and the group's offset from the hour (whole seconds)."""
    rules, offset = whole_second_file(tmp, hourly.GROUP, hourly.STEP_S)
    rules.write_text(yaml.safe_dump({"groups": [hourly.group("exported")]}))
    return evaluated(rules, start, b.end + 600, prom_url, b.tsdb, tmp), offset


def _unaligned(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--end` taken as it is (a live scan aligns it down to the step): the raw scan's window
    ends on the rules' evaluation too."""
    monkeypatch.setattr(collect, "make_window", lambda w, s, end: Window(int(end) - w, int(end), s))


def _without_plan(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc.pop("generated_at", None)
    return doc


def _answers(path: Path) -> dict[str, dict[tuple[Any, ...], float]]:
    """Each query's points by series (labels but the name) and time; a window query's chunks
    combined (maxima by max, sums and counts added)."""
    out: dict[str, dict[tuple[Any, ...], float]] = {}
    for qid, entries in raw_snapshot(path)["prometheus"].items():
        pts = out.setdefault(qid, {})
        for e in entries:
            body = json.loads(e["raw"]) if "raw" in e else e["body"]
            for row in body["data"]["result"]:
                key = tuple(sorted((k, v) for k, v in row["metric"].items() if k != "__name__"))
                for t, v in row.get("values", []):
                    pts[(key, t)] = float(v)
                if "value" in row:
                    v = float(row["value"][1])
                    old = pts.get((key, None))
                    both = v if old is None else max(old, v) if qid.endswith("_max") else old + v
                    pts[(key, None)] = both
    return out


def _same_answers(rules: Path, raw: Path) -> None:
    """Every answer equal to the bit: hourly statistics are the same PromQL at the same time;
    counts and maxima are exact in any order, and so are the window sums read, all of whole
    numbers (the means of non-integer gauges come from their hourly means)."""
    got, want = _answers(rules), _answers(raw)
    assert got.keys() == want.keys()
    for qid, pts in want.items():
        assert got[qid] == pts, qid


def _compare(
    b: Backfilled, prom_url: str, tmp: Path, start: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], int]:
    both, offset = _evaluated(b, prom_url, tmp, start)
    with prometheus(both) as url:
        ruled = _save(url, b, tmp / "rules.json", b.end)
        scan = ["scan", "--prometheus-url", url, "--no-kubernetes", "-f", "json", "-o"]
        window = ["--window", f"{b.days}d", "--end", str(b.end)]
        res = runner.invoke(app, [*scan, str(tmp / "report.json"), *window])
        assert res.exit_code == 0, res.output
        # stderr says where the window ended.
        assert "on the last evaluation of gpuaudit's hourly recording rules" in res.stderr
    snap = raw_snapshot(tmp / "rules.json")
    end = snap["manifest"]["window"]["end"]
    assert end == b.end - 3600 + offset
    _unaligned(monkeypatch)
    raw = _save(prom_url, b, tmp / "raw.json", end)
    assert raw_snapshot(tmp / "raw.json")["manifest"]["window"] == snap["manifest"]["window"]
    return ruled, raw, snap, offset


def _reads(snap: dict[str, Any]) -> dict[str, str]:
    return {q["id"]: q["reads"] for q in snap["manifest"]["queries"]}


def test_hourly_rules_give_the_raw_report_to_the_sample(
    scenario_tsdb: Backfilled, prom_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = scenario_tsdb
    start = b.end - b.days * 86400 - 7200
    ruled, raw, snap, offset = _compare(b, prom_url, tmp_path, start, monkeypatch)
    caps = snap["manifest"]["capabilities"]
    cov = caps["recorded_hourly"]
    assert cov["covers"] == "whole" and cov["offset_ms"] == 0
    assert cov["phase_ms"] == offset * 1000
    assert cov["fingerprint"] == hourly.fingerprint("exported")
    assert cov["requested_end"] == b.end and cov["end"] == b.end - 3600 + offset
    reads = _reads(snap)
    assert reads["act_hourly"] == reads["util_count_hourly"] == "recorded hourly"
    assert (
        reads["fb_used_sum"] == reads["fb_used_max"] == reads["power_hourly"] == "recorded hourly"
    )
    assert "act_sum" not in reads  # the window mean is the hourly means' (no window sum)
    assert (
        "gpuaudit:dcgm_fi_prof_gr_engine_active:mean_1h"
        in snap["prometheus"]["act_hourly"][0]["query"]
    )
    _same_answers(tmp_path / "rules.json", tmp_path / "raw.json")
    assert _without_plan(ruled) == _without_plan(raw)
    shown = describe(tmp_path / "rules.json")
    assert "read the hourly rules; the window ends on their last evaluation" in shown


def test_hourly_rules_that_began_within_the_window_are_read_after_they_began(
    scenario_tsdb: Backfilled, prom_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = scenario_tsdb
    began = b.end - 86400 + 1800
    ruled, raw, snap, offset = _compare(b, prom_url, tmp_path, began, monkeypatch)
    cov = snap["manifest"]["capabilities"]["recorded_hourly"]
    assert cov["covers"] == "part"
    reads = _reads(snap)
    assert reads["act_hourly"] == reads["fb_used_sum"] == "recorded hourly and raw"
    raw_part, rec_part = snap["prometheus"]["fb_used_sum"]
    assert "DCGM_FI_DEV_FB_USED" in raw_part["query"]
    assert rec_part["query"].startswith("sum_over_time(gpuaudit:")
    _same_answers(tmp_path / "rules.json", tmp_path / "raw.json")
    assert _without_plan(ruled) == _without_plan(raw)
