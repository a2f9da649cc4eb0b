"""vmalert, VictoriaMetrics' rule evaluator (in Debian's `victoria-metrics` package, beside the
server), for tests and the benchmark: a rule file checked as vmalert reads it (`-dryRun`), and
recording rules evaluated over history by its replay mode (`-replay.timeFrom`/`-replay.timeTo`),
their results written by remote write into the VictoriaMetrics that holds the raw series.

How replay evaluates (vmalert 1.79, measured in tests/live/test_vmalert.py): each group is one
`query_range` per rule and per `-replay.maxDatapointsPerQuery` points, from `-replay.timeFrom`,
whose points become the recorded samples, at the points' timestamps. Two things decide where those
fall:

- The range query's `step` is `-datasource.queryStep` (5 minutes by default) whatever the group's
  `interval`; `-datasource.queryStep=0` makes it the group's interval (an hourly group replayed
  with the default is evaluated every 5 minutes).
- VictoriaMetrics rounds a range query of 50 points or more down to a multiple of its step (its
  response cache; `nocache=1` would keep it, and vmalert does not send it): the evaluations of a
  long replay fall on multiples of the interval, those of a short one on `-replay.timeFrom` plus
  multiples of it. `replay` asks for a start on a multiple of every group's interval, so both agree
  (a live vmalert aligns its queries' `time` to the interval as well, by default:
  `-datasource.queryTimeAlignment`).

VictoriaMetrics' range functions read `(t - d, t]`, so the hourly evaluations count every raw
sample once.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

from tests.support.promserver import server
from tests.support.servers import require
from tests.support.vmserver import wait_for_samples


@dataclass
class Replayed:
    """A VictoriaMetrics at `url` into which vmalert replayed `groups` from `start` to `end`,
    writing `written` samples."""

    url: str
    start: int
    end: int
    groups: list[dict[str, Any]]
    written: int


def interval_s(duration: str) -> int:
    """A Prometheus duration of one unit (`5m`, `1h`, `30s`) in seconds."""
    m = re.fullmatch(r"(\d+)([smhd])", duration)
    assert m, f"unexpected group interval {duration!r}"
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    """A Prometheus rule file of `groups` (the `rules` format of `gpuaudit rules`)."""
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def dry_run(rules: Path) -> str:
    """vmalert's check of a rule file (`-dryRun`: the file parsed, every expression parsed as
    MetricsQL, the templates checked); its log, or AssertionError with it."""
    proc = subprocess.run(
        [require("vmalert"), "-dryRun", f"-rule={rules}"],
        capture_output=True,
        text=True,
        check=False,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    return log


def _rfc3339(t: int) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def replay(url: str, rules: Path, start: int, end: int, log: Path) -> int:
    """Evaluate the recording groups of `rules` at every multiple of each group's interval from
    `start` to `end` (unix seconds, both on every group's grid) over the VictoriaMetrics at `url`,
    and write their results back into it; waits until each group's heartbeat (a last rule
    `vector(...)`) is searchable at every evaluation. Returns how many samples vmalert wrote.
    The file should hold recording groups only: replay evaluates alerting rules too and writes
    their `ALERTS` series."""
    groups = yaml.safe_load(rules.read_text())["groups"]
    for g in groups:
        every = interval_s(g.get("interval", "1m"))
        assert start % every == 0 and end % every == 0, (g["name"], every, start, end)
    cmd = [
        require("vmalert"),
        f"-rule={rules}",
        f"-datasource.url={url}",
        f"-remoteWrite.url={url}",
        f"-replay.timeFrom={_rfc3339(start)}",
        f"-replay.timeTo={_rfc3339(end)}",
        "-replay.disableProgressBar",
        # The group's interval as the range query's step (see the module's docstring).
        "-datasource.queryStep=0",
        # No rule reads another's result: nothing to wait for between them.
        "-replay.rulesDelay=0",
        # A fleet's rule answers many series per query; a full queue is an error in replay.
        "-remoteWrite.maxQueueSize=10000000",
        "-remoteWrite.concurrency=2",
    ]
    with open(log, "wb") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"vmalert replay failed: {text[-3000:]}"
    found = re.search(r"replay finished! Imported (\d+) samples", text)
    assert found, text[-3000:]
    for g in groups:
        last = g["rules"][-1]
        if last.get("record") and last["expr"].startswith("vector("):
            # The group's heartbeat, written last: searchable at every evaluation.
            every = interval_s(g.get("interval", "1m"))
            days = (end - start) // 86400 + 1
            wait_for_samples(url, last["record"], (end - start) // every + 1, end, days)
    return int(found.group(1))


@contextmanager
def serving(url: str, rules: Path, port: int, log: Path) -> Iterator[str]:
    """vmalert running (not replaying) the groups of `rules` against the VictoriaMetrics at
    `url` on loopback port `port`, for its rules API (`/api/v1/rules`, which VictoriaMetrics
    answers through `-vmalert.proxyURL`); yields its URL. It evaluates at the present time,
    after any scenario's window, and writes what it records into `url`."""
    cmd = [
        require("vmalert"),
        f"-rule={rules}",
        f"-datasource.url={url}",
        f"-remoteWrite.url={url}",
        f"-httpListenAddr=127.0.0.1:{port}",
    ]
    with server(cmd, f"http://127.0.0.1:{port}", "/health", log) as own:
        yield own
