"""A live scan of a window with no DCGM data, against a real Prometheus that holds some before
or after it (an exporter that stopped, a wrong `--end`), says where the newest DCGM sample is,
in ISO time, on stderr and in the report."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.promserver import Backfilled

runner = CliRunner()
ISO = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"


def _at(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(("shift_days", "where"), [(30, "before"), (-30, "after")])
def test_a_window_without_dcgm_data_says_where_the_newest_sample_is(
    prom_url: str, scenario_tsdb: Backfilled, shift_days: int, where: str
) -> None:
    end = scenario_tsdb.end + shift_days * 86400
    res = runner.invoke(
        app,
        [
            "scan",
            "-q",
            "-f",
            "json",
            "--prometheus-url",
            prom_url,
            "--no-kubernetes",
            "--window",
            "1d",
            "--end",
            str(end),
            "--fail-on",
            "high",
        ],
    )
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert doc["nothing_audited"] is True
    (reason,) = [r for r in doc["incomplete_reasons"] if "newest DCGM sample" in r]
    found = re.search(
        f"its newest DCGM sample is from {ISO} \\(to the hour\\), {where} the", reason
    )
    assert found, reason
    newest = _at(found.group(1))
    assert scenario_tsdb.end - 3600 <= newest <= scenario_tsdb.end  # the data's last hour
    warning = next(ln for ln in res.stderr.splitlines() if "NOTHING WAS AUDITED" in ln)
    assert f"The backend's newest DCGM sample is from {found.group(1)} (to the hour)" in warning
    if where == "before":
        assert warning.endswith(f"audit up to then with --end {found.group(1)}.")
