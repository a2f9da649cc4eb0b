"""The number of HTTP requests of a scan does not grow with the cluster."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.promserver import backfill, prometheus
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()


@pytest.mark.slow
def test_request_count_is_the_same_for_100_and_2000_gpus(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    counts = {}
    for gpus in (100, 2000):
        b = backfill(tmp_path_factory.mktemp(f"n{gpus}"), gpus=gpus, days=1, seed=11, scrape_s=1800)
        out = b.tsdb.parent / "live.json"
        with prometheus(b.tsdb) as url:
            res = runner.invoke(
                app,
                [
                    "snapshot",
                    "save",
                    str(out),
                    "--prometheus-url",
                    url,
                    "--window",
                    "1d",
                    "--end",
                    str(b.end),
                    "--no-kubernetes",
                    "-q",
                ],
            )
            assert res.exit_code == 0, res.output
        doc = raw_snapshot(out)
        series = len(doc["prometheus"]["act_count"][0]["body"]["data"]["result"])
        counts[gpus] = (doc["manifest"]["http_requests"], series, len(doc["manifest"]["queries"]))
    assert counts[100][0] == counts[2000][0]
    assert counts[2000][1] > 10 * counts[100][1]  # the clusters really differ in size
    # 7 discovery calls (buildinfo, metric names, label names, the check that tells the
    # exporter's `pod` from workloads under the Helm spelling, the scrape interval, the hourly
    # rules' heartbeat, the rules API), then one per query.
    assert counts[100][0] == 7 + counts[100][2]
