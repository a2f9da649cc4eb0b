"""The manifest records the backend's own account of its work (Prometheus `stats`) per query
kind, beside the time gpuaudit waited; a backend that gives no stats (VictoriaMetrics) is
scanned the same, its timings saying so. The samples read, per query and in total, are
Prometheus' own figures, estimated where the backend gives none (issue 37). A live scan on a
terminal shows the time left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.console.show import describe
from gpuaudit.core import debuglog
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.stats import DISCOVERY, SamplesCounter, SamplesRead, selectors
from tests.support.promserver import Backfilled
from tests.support.raw_snapshot import raw_snapshot
from tests.test_progress import _run_on_a_terminal

runner = CliRunner()


def _save(url: str, b: Backfilled, out: Path, *more: str) -> dict[str, Any]:
    args = ["snapshot", "save", str(out), "--prometheus-url", url, "--no-kubernetes", "-q"]
    res = runner.invoke(app, [*args, "--window", f"{b.days}d", "--end", str(b.end), *more])
    debuglog.configure(False)
    assert res.exit_code == 0, res.output
    manifest: dict[str, Any] = raw_snapshot(out)["manifest"]
    if more:
        manifest["stderr"] = res.stderr
    return manifest


def _samples(m: dict[str, Any]) -> SamplesRead:
    """The manifest's samples read, checked to be per query of the plan and for discovery's
    queries, every request counted, the total their sum."""
    got = SamplesRead.from_json(m["samples_read"])
    assert got is not None, m["samples_read"]  # reads back only a total that adds up
    assert set(got.queries) == set(m["plan"]) | {DISCOVERY}
    for qid, s in got.queries.items():
        if qid != DISCOVERY:
            assert s.requests == len(m["plan"][qid]), qid
    # Discovery's queries: the scrape interval's and the pod label check's at least, which
    # read samples (the interval's, an hour of every GPU's twice).
    assert got.queries[DISCOVERY].requests >= 2 and got.queries[DISCOVERY].samples > 0
    assert got.total.samples > 0
    return got


def test_prometheus_stats_are_summed_per_query_kind(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    m = _save(prom_url, scenario_tsdb, tmp_path / "s.json")
    t = m["backend_timings"]
    assert set(t) == {"window", "hourly"}
    kinds = {q["kind"] for q in m["queries"]}
    assert kinds == {"window", "hourly"}
    for kind, got in t.items():
        chunks = sum(len(m["plan"][q["id"]]) for q in m["queries"] if q["kind"] == kind)
        assert got["queries"] == got["with_stats"] == chunks
        assert got["evalTotalTime"] > 0 and got["wall_s"] >= got["evalTotalTime"] * 0.5
        assert got["totalQueryableSamples"] > 0 and got["peakSamples"] > 0
    shown = describe(tmp_path / "s.json")
    assert "as the backend said" in shown and "backend evaluating" in shown


def test_prometheus_says_the_samples_each_query_read(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "s.json"
    m = _save(prom_url, scenario_tsdb, out, "--debug")
    got = _samples(m)
    assert got.total.unknown == 0
    # Prometheus' own figures, but where a subquery is a range function's argument (XID
    # onsets, serving_busy), whose samples it leaves out (prometheus/prometheus#16638).
    nested = {q["id"] for q in m["queries"] if any(s.repeat != 1 for s in selectors(q["query"]))}
    assert nested and {q for q, s in got.queries.items() if s.estimated} <= nested
    said = sum(t["totalQueryableSamples"] for t in m["backend_timings"].values())
    assert got.total.samples >= said
    # One line per query under --debug, and the total.
    lines = [x for x in m["stderr"].splitlines() if "samples read" in x]
    assert len(lines) == len(got.queries) + 1, lines
    assert any(f"all queries: {got.total.samples:,} samples read" in x for x in lines)
    assert f"{got.total.samples:,} samples read" in describe(out)
    # The estimate of the same answers, their stats left out, against Prometheus' figures.
    c = SamplesCounter()
    for qid, entries in raw_snapshot(out)["prometheus"].items():
        spec = catalogue.BY_ID[qid]
        sparse = spec.changes or spec.stat == "onsets"
        for e in entries:
            body = e["body"]
            body["data"].pop("stats", None)
            c.add(qid, spec.metric, e["chunk"][2], sparse, e["query"], e["params"], body)
    guess = c.result(300.0)
    assert guess.total.estimated == guess.total.requests
    flat = [q for q in got.queries if q not in nested and q != DISCOVERY]
    ratio = sum(guess.queries[q].samples for q in flat) / sum(got.queries[q].samples for q in flat)
    assert 0.8 <= ratio <= 1.25, (guess, got)


def test_a_backend_without_stats_is_read_the_same(
    vm_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    m = _save(vm_url, scenario_tsdb, tmp_path / "s.json")
    for got in m["backend_timings"].values():
        assert got["queries"] > 0 and got["with_stats"] == 0
        assert "evalTotalTime" not in got
    assert m["complete"], m["incomplete_reasons"]
    shown = describe(tmp_path / "s.json")
    assert "the backend gave no stats" in shown
    # Its samples read are estimated, and say so, at the scrape interval it measured.
    got = _samples(m)
    assert got.total.estimated == got.total.requests and got.total.unknown == 0
    assert got.interval_s == 300
    assert f"{got.total.samples:,} samples read ({got.total.requests} requests, estimated)" in (
        shown
    )


def test_a_live_scan_on_a_terminal_shows_the_time_left(
    prom_url: str, scenario_tsdb: Backfilled
) -> None:
    b = scenario_tsdb
    args = ["scan", "--prometheus-url", prom_url, "--no-kubernetes", "-f", "json"]
    term, out = _run_on_a_terminal([*args, "--window", f"{b.days}d", "--end", str(b.end)])
    line = next((x for x in term.split("\r") if "querying Prometheus" in x), "")
    assert "queries" in line and " left " in line, term[-2000:]
    assert out.startswith("{")
