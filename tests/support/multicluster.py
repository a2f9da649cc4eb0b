"""Many clusters' DCGM data in one real VictoriaMetrics, as a central backend holds them.

Each cluster is a generated scenario written as OpenMetrics with the dcgm-exporter Helm chart's
labels (`exported_pod`, and `pod`/`namespace` naming the exporter), plus the label the central
backend tells clusters apart by (`cluster`, as Prometheus `external_labels` or a remote-write
relabelling add it) and `pair` (a coarser grouping, for tests that compare grouping labels).
Clusters that share a seed share node names, GPU UUIDs, exporter addresses and pod names, so
anything that merged clusters would show."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from gpuaudit.scenario import Scenario, generate, write_openmetrics
from tests.support.promserver import free_port, server
from tests.support.servers import require


@dataclass(frozen=True)
class Fleet:
    """The clusters loaded: name -> the seed of its scenario."""

    url: str
    clusters: dict[str, int]
    end: int
    days: int
    samples: int
    """Samples of `PROBE` imported."""


def _lines(om: Path, labels: str) -> Iterator[str]:
    """OpenMetrics (seconds) -> VictoriaMetrics' Prometheus text import (milliseconds), with
    `labels` (`cluster="a",pair="p0"`) added to every sample."""
    with open(om, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            head, ts = line.rsplit(" ", 1)
            name, brace, rest = head.partition("{")
            if brace:
                yield f"{name}{{{labels},{rest} {int(ts) * 1000}\n"
            else:
                series, value = head.rsplit(" ", 1)
                yield f"{series}{{{labels}}} {value} {int(ts) * 1000}\n"


def _chunks(lines: Iterator[str], size: int = 50_000) -> Iterator[bytes]:
    buf: list[str] = []
    for line in lines:
        buf.append(line)
        if len(buf) >= size:
            yield "".join(buf).encode()
            buf = []
    if buf:
        yield "".join(buf).encode()


@contextmanager
def victoriametrics(tmp: Path) -> Iterator[str]:
    """A real VictoriaMetrics on loopback, storing under `tmp`."""
    binary = require("victoria-metrics")
    port = free_port()
    cmd = [
        binary,
        f"-storageDataPath={tmp / 'data'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        "-search.disableCache",
    ]
    try:
        with server(cmd, f"http://127.0.0.1:{port}", "/health", tmp / "vm.log") as url:
            yield url
    finally:
        shutil.rmtree(tmp / "data", ignore_errors=True)


def load(
    url: str,
    tmp: Path,
    clusters: Sequence[tuple[str, int]],
    gpus: int,
    days: int,
    scrape_s: int,
) -> Fleet:
    """Import every cluster's scenario into the VictoriaMetrics at `url` and wait until every
    sample is searchable."""
    scenarios: dict[int, Scenario] = {}
    oms: dict[int, Path] = {}
    for _, seed in clusters:
        if seed in scenarios:
            continue
        sc = scenarios[seed] = generate(gpus, days, seed, scrape_s=scrape_s)
        oms[seed] = tmp / f"seed{seed}.om"
        with open(oms[seed], "w", encoding="utf-8") as fh:
            write_openmetrics(sc, fh, "helm")
    samples = 0
    for i, (name, seed) in enumerate(clusters):
        counted = _counting(_lines(oms[seed], f'cluster="{name}",pair="p{i % 2}"'))
        r = httpx.post(f"{url}/api/v1/import/prometheus", content=_chunks(counted), timeout=600)
        assert r.status_code == 204, r.text
        samples += counted.n
    for om in oms.values():
        om.unlink()
    end = next(iter(scenarios.values())).end
    _wait(url, samples, end, days)
    return Fleet(url, dict(clusters), end, days, samples)


PROBE = "DCGM_FI_DEV_FB_USED"
"""The metric whose samples are counted to know the import is searchable (one metric: a query
over every DCGM series of a large fleet passes VictoriaMetrics' series limit)."""


class _counting(Iterator[str]):
    """The lines passed through, with those of `PROBE` counted."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines, self.n = lines, 0

    def __next__(self) -> str:
        line = next(self.lines)
        if line.startswith(PROBE + "{"):
            self.n += 1
        return line


def _wait(url: str, samples: int, end: int, days: int) -> None:
    """Imported rows become searchable asynchronously: wait until every sample is there."""
    deadline = time.monotonic() + 300
    query = f"sum(count_over_time({PROBE}[{days + 1}d]))"
    while True:
        httpx.get(f"{url}/internal/force_flush", timeout=60)
        q = httpx.post(
            f"{url}/api/v1/query", data={"query": query, "time": str(end)}, timeout=60
        ).json()
        assert q.get("status") == "success", q
        got = q["data"]["result"]
        if got and float(got[0]["value"][1]) >= samples:
            return
        assert time.monotonic() < deadline, "imported data never became searchable"
        time.sleep(0.5)
