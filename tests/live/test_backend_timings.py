"""The manifest records the backend's own account of its work (Prometheus `stats`) per query
kind, beside the time gpuaudit waited; a backend that gives no stats (VictoriaMetrics) is
scanned the same, its timings saying so. A live scan on a terminal shows the time left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.console.show import describe
from tests.support.promserver import Backfilled
from tests.support.raw_snapshot import raw_snapshot
from tests.test_progress import _run_on_a_terminal

runner = CliRunner()


def _save(url: str, b: Backfilled, out: Path) -> dict[str, Any]:
    args = ["snapshot", "save", str(out), "--prometheus-url", url, "--no-kubernetes", "-q"]
    res = runner.invoke(app, [*args, "--window", f"{b.days}d", "--end", str(b.end)])
    assert res.exit_code == 0, res.output
    manifest: dict[str, Any] = raw_snapshot(out)["manifest"]
    return manifest


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


def test_a_backend_without_stats_is_read_the_same(
    vm_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    m = _save(vm_url, scenario_tsdb, tmp_path / "s.json")
    for got in m["backend_timings"].values():
        assert got["queries"] > 0 and got["with_stats"] == 0
        assert "evalTotalTime" not in got
    assert m["complete"], m["incomplete_reasons"]
    assert "the backend gave no stats" in describe(tmp_path / "s.json")


def test_a_live_scan_on_a_terminal_shows_the_time_left(
    prom_url: str, scenario_tsdb: Backfilled
) -> None:
    b = scenario_tsdb
    args = ["scan", "--prometheus-url", prom_url, "--no-kubernetes", "-f", "json"]
    term, out = _run_on_a_terminal([*args, "--window", f"{b.days}d", "--end", str(b.end)])
    line = next((x for x in term.split("\r") if "querying Prometheus" in x), "")
    assert "queries" in line and " left " in line, term[-2000:]
    assert out.startswith("{")
