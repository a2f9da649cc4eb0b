"""gpuaudit's rules evaluated by vmalert, VictoriaMetrics' rule evaluator: it reads the rule file
of `gpuaudit rules --format rules` as it is, and its replay mode writes every recording rule's
series over a scenario's history into the VictoriaMetrics holding the raw series, at every
evaluation of its group (`tests.support.vmalert` says where the evaluations fall). A scan reads
them there and gives the report the raw series give: the hourly group found by its heartbeat
alone, the 5-minute group through the rules API VictoriaMetrics proxies to a running vmalert."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.prometheus import hourly
from tests.support.figures import same_but_last_digit
from tests.support.promserver import Backfilled
from tests.support.raw_snapshot import raw_snapshot
from tests.support.vmalert import Replayed, dry_run, interval_s

runner = CliRunner()


def _exported(url: str, name: str, start: int, end: int) -> list[dict[str, Any]]:
    """Every series of `name` with its points from `start` to `end`, as VictoriaMetrics holds
    them (its export API: timestamps in milliseconds)."""
    ans = httpx.post(
        f"{url}/api/v1/export",
        data={"match[]": name, "start": str(start), "end": str(end)},
        timeout=60,
    )
    ans.raise_for_status()
    return [json.loads(line) for line in ans.text.splitlines() if line.strip()]


@pytest.mark.parametrize("spelling", ["exported", "pod"])
def test_vmalert_reads_the_rule_file_as_it_is(spelling: str, tmp_path: Path) -> None:
    """Every expression of the file (recording and alerting) parses as MetricsQL and every
    template as vmalert's: the file of `gpuaudit rules --format rules` deploys unchanged."""
    out = tmp_path / "gpuaudit.rules.yml"
    res = runner.invoke(
        app, ["rules", "--format", "rules", "--pod-label", spelling, "--output", str(out)]
    )
    assert res.exit_code == 0, res.output
    log = dry_run(out)
    assert "fatal" not in log and "error" not in log, log


def _answered(url: str, expr: str, start: int, end: int, step: int) -> dict[str, list[Any]]:
    """`expr` evaluated by VictoriaMetrics at every multiple of `step` from `start` to `end`:
    the points per series (labels as JSON)."""
    ans = httpx.post(
        f"{url}/api/v1/query_range",
        data={"query": expr, "start": str(start), "end": str(end), "step": str(step)},
        timeout=120,
    ).json()
    assert ans["status"] == "success", ans
    return {
        json.dumps(r["metric"], sort_keys=True): [[int(t), float(v)] for t, v in r["values"]]
        for r in ans["data"]["result"]
    }


def test_replay_writes_what_each_rule_gives_at_every_evaluation(
    vmalert_replayed: Replayed,
) -> None:
    """Every recording rule's series as vmalert wrote them are its expression's answer at
    every multiple of its group's interval from the replay's start to its end (where the
    scenario has the rule's metric; the core ones it has), to the bit; each group's heartbeat
    has a point at each one, with the rule's value (the hourly group's, its fingerprint)."""
    r = vmalert_replayed
    assert r.written > 0
    written = set()
    for group in r.groups:
        every = interval_s(group["interval"])
        for rule in group["rules"]:
            name = rule["record"]
            want = _answered(r.url, rule["expr"], r.start, r.end, every)
            got = {
                json.dumps(
                    {k: v for k, v in s["metric"].items() if k != "__name__"}, sort_keys=True
                ): [
                    [t // 1000, float(v)] for t, v in zip(s["timestamps"], s["values"], strict=True)
                ]
                for s in _exported(r.url, name, r.start, r.end)
            }
            # VictoriaMetrics stores a value as a decimal of up to 15 or so digits: what it
            # answers of a stored sample may differ from the expression's float in its last bit.
            assert got.keys() == want.keys(), name
            for key, points in got.items():
                assert [t for t, _ in points] == [t for t, _ in want[key]], (name, key)
                values = [v for _, v in want[key]]
                assert [v for _, v in points] == pytest.approx(values, rel=1e-12), (name, key)
            if got:
                written.add(name)
            if name.startswith("gpuaudit:recording_rules:"):
                (beat,) = got.values()
                grid = list(range(r.start, r.end + 1, every))
                value = float(rule["expr"].removeprefix("vector(").removesuffix(")"))
                assert beat == [[t, value] for t in grid], name
    assert {
        "gpuaudit:dcgm_fi_prof_gr_engine_active:sum5m",
        "gpuaudit:dcgm_fi_prof_gr_engine_active:count5m",
        "gpuaudit:recording_rules:evaluated5m",
    } <= written


def _report(url: str, b: Backfilled, out: Path) -> dict[str, Any]:
    """The JSON report of a scan of the scenario's window through the server at `url`
    (recorded to `out` first), the server's URL taken out."""
    res = runner.invoke(
        app,
        ["snapshot", "save", str(out), "--prometheus-url", url, "--no-kubernetes", "-q"]
        + ["--window", f"{b.days}d", "--end", str(b.end)],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["scan", "--snapshot", str(out), "-f", "json", "-q"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout.replace(url, "URL"))
    doc.pop("generated_at", None)
    return doc


def test_a_scan_through_vmalerts_hourly_rules_gives_the_raw_report(
    vmalert_replayed: Replayed, vm_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    """VictoriaMetrics has no rules API (without `-vmalert.proxyURL`): gpuaudit finds the hourly
    rules by their heartbeat alone, reads every family they record, and its report is the one the
    raw series give over the same window (a VictoriaMetrics holding them alone)."""
    b = scenario_tsdb
    ruled = _report(vmalert_replayed.url, b, tmp_path / "rules.json")
    raw = _report(vm_url, b, tmp_path / "raw.json")
    snap = raw_snapshot(tmp_path / "rules.json")
    manifest = snap["manifest"]
    assert manifest["window"] == raw_snapshot(tmp_path / "raw.json")["manifest"]["window"]
    cov = manifest["capabilities"]["recorded_hourly"]
    # vmalert's evaluations fall on the hour: the window keeps the end it was asked for.
    assert cov["covers"] == "whole" and cov["phase_ms"] == 0 and cov["offset_ms"] == 0
    assert cov["end"] == cov["requested_end"] == b.end
    assert cov["fingerprint"] == hourly.fingerprint("exported")
    reads = {q["id"]: q["reads"] for q in manifest["queries"]}
    assert reads["act_hourly"] == reads["fb_used_sum"] == reads["fb_used_max"] == "recorded hourly"
    same_but_last_digit(ruled, raw)


def test_the_5_minute_rules_found_through_vmalerts_rules_api_give_the_raw_report(
    vmalert_proxied: Replayed, vm_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    """With `-vmalert.proxyURL`, VictoriaMetrics' rules API lists the rules a vmalert runs: a
    scan finds the 5-minute group there (no hourly rules), reads its series (evaluated on the
    5-minute marks, so the hourly buckets read them too), and its report is the raw one."""
    b = scenario_tsdb
    ruled = _report(vmalert_proxied.url, b, tmp_path / "rules.json")
    raw = _report(vm_url, b, tmp_path / "raw.json")
    caps = raw_snapshot(tmp_path / "rules.json")["manifest"]["capabilities"]
    assert not caps.get("recorded_hourly")
    assert caps["recorded"]["covers"] == "whole" and caps["recorded"]["phase_ms"] == 0
    reads = {
        q["id"]: q["reads"] for q in raw_snapshot(tmp_path / "rules.json")["manifest"]["queries"]
    }
    assert reads["fb_used_sum"] == reads["act_hourly"] == reads["fb_used_max"] == "recorded"
    same_but_last_digit(ruled, raw)
