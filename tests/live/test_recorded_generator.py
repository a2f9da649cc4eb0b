"""The recorded series the scenario generator writes (`gpuaudit.scenario.recorded_series`) are the
series a server evaluating `gpuaudit rules`' recording group gives: promtool evaluates the
rules over a scenario's raw series on a real Prometheus (`tsdb create-blocks-from rules`), the
generator writes them at the phase promtool chose, both are served by real Prometheus servers,
and every point of every recorded series is compared."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from gpuaudit.scenario import generate
from gpuaudit.scenario.recorded_series import write_recorded
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.rules import recording_rules
from tests.support.promserver import backfill, prometheus
from tests.support.servers import require

Points = dict[frozenset[tuple[str, str]], list[tuple[int, float]]]


def _points(url: str, at: int) -> Points:
    """Every point of every recorded series and the heartbeat in the two days before `at`."""
    res = httpx.post(
        f"{url}/api/v1/query",
        data={"query": '{__name__=~"gpuaudit:.+"}[2d]', "time": str(at)},
        timeout=120,
    )
    res.raise_for_status()
    out: Points = {}
    for row in res.json()["data"]["result"]:
        key = frozenset(row["metric"].items())
        out[key] = [(round(float(t) * 1000), float(v)) for t, v in row["values"]]
    return out


def _promtool(args: list[str]) -> None:
    subprocess.run([require("promtool"), "tsdb", "create-blocks-from", *args], check=True)


@pytest.mark.slow
def test_generated_recorded_series_equal_promtool_evaluated_rules(tmp_path: Path) -> None:
    gpus, days, seed, scrape = 20, 1, 3, 60
    b = backfill(tmp_path / "raw", gpus=gpus, days=days, seed=seed, scrape_s=scrape)
    rules = tmp_path / "rules.yml"
    # The 5-minute group, which the generator writes (not the hourly one).
    five = [g for g in recording_rules("exported") if g["interval"] == "5m"]
    rules.write_text(yaml.safe_dump({"groups": five}))
    start = b.end - days * 86400
    with prometheus(b.tsdb) as url:
        _promtool(
            [
                "rules",
                "-q",
                f"--start={start}",
                f"--end={b.end}",
                f"--url={url}",
                f"--output-dir={tmp_path / 'evaluated'}",
                str(rules),
            ]
        )
    with prometheus(tmp_path / "evaluated") as url:
        want = _points(url, b.end + 600)
    beats = want[frozenset({("__name__", catalogue.HEARTBEAT)})]
    phases = {t % 300_000 for t, _ in beats}
    assert len(phases) == 1, phases

    sc = generate(gpus, days, seed, scrape_s=scrape)
    om = tmp_path / "recorded.om"
    with open(om, "w", encoding="utf-8") as fh:
        n = write_recorded(sc, fh, phase_ms=phases.pop(), span_ms=(beats[0][0], beats[-1][0] + 1))
    _promtool(["openmetrics", "-q", str(om), str(tmp_path / "generated")])
    with prometheus(tmp_path / "generated") as url:
        got = _points(url, b.end + 600)

    names = {dict(k)["__name__"] for k in want}
    assert names == {
        *(catalogue.record_name(m, a) for m in catalogue.RECORDED for a in catalogue.AGGS),
        catalogue.HEARTBEAT,
    }
    assert got.keys() == want.keys()
    assert n == sum(len(v) for v in want.values())
    for key, points in want.items():
        mine = got[key]
        assert [t for t, _ in mine] == [t for t, _ in points], dict(key)
        assert [v for _, v in mine] == pytest.approx([v for _, v in points], rel=1e-9), dict(key)
    # The comparison sees something: every recorded series of every metric, and 5-minute
    # ranges holding five samples at a 60 s scrape.
    counts = [
        v for k, pts in want.items() if dict(k)["__name__"].endswith("count5m") for _, v in pts
    ]
    assert n > 10_000 and 5.0 in counts
