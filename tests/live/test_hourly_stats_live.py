"""The generator's answers to the hourly statistics (each bucket's p95, XID onsets and violation
counter increases, issue 37) are a real Prometheus's own, over the samples the generator wrote and
promtool backfilled: the same series, the same buckets, the same values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.promserver import Backfilled
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()

EXACT = ("act_p95_hourly", "util_p95_hourly", "fb_used_p95_hourly", "xid_events_hourly")
INCREASES = ("power_violation_increase_hourly", "thermal_violation_increase_hourly")


def _points(entries: list[dict[str, Any]]) -> dict[tuple[frozenset[tuple[str, str]], float], float]:
    """(series labels, bucket end) -> value over every chunk of one query's answers."""
    out = {}
    for e in entries:
        for s in e["body"]["data"]["result"]:
            labels = frozenset(s["metric"].items())
            for t, v in s["values"]:
                out[labels, float(t)] = float(v)
    return out


def test_hourly_statistics_are_prometheus_own(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    b = scenario_tsdb
    out = tmp_path / "live.json"
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    args = ["snapshot", "save", str(out), "--prometheus-url", prom_url, "--no-kubernetes"]
    res = runner.invoke(app, [*args, *window, "-q"])
    assert res.exit_code == 0, res.output
    live, made = raw_snapshot(out)["prometheus"], raw_snapshot(b.snapshot_path)["prometheus"]
    for qid in EXACT + INCREASES:
        got, want = _points(live[qid]), _points(made[qid])
        assert want, f"the scenario answers nothing to {qid}"
        assert got.keys() == want.keys(), qid
        if qid in EXACT:
            assert got == want, qid
            continue
        # `increase` extrapolates each bucket in floating point: the generator states the
        # hour's increase, which Prometheus gives to within a few ns of 10^12.
        for key, v in want.items():
            assert math.isclose(got[key], v, rel_tol=1e-12, abs_tol=1e-3), (qid, key)
    # Onsets are answered only in the buckets that had one.
    assert all(v >= 1 for v in _points(made["xid_events_hourly"]).values())
