"""Many clusters' DCGM data in one real VictoriaMetrics, as a central backend holds them.

Each cluster is a generated scenario written as OpenMetrics with the dcgm-exporter Helm chart's
labels (`exported_pod`, and `pod`/`namespace` naming the exporter), plus the label the central
backend tells clusters apart by (`cluster`, as Prometheus `external_labels` or a remote-write
relabelling add it) and `pair` (a coarser grouping, for tests that compare grouping labels).
Clusters that share a seed share node names, GPU UUIDs, exporter addresses and pod names, so
anything that merged clusters would show."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuaudit.scenario import Scenario, generate, write_openmetrics
from tests.support import vmserver


@dataclass(frozen=True)
class Fleet:
    """The clusters loaded: name -> the seed of its scenario."""

    url: str
    clusters: dict[str, int]
    end: int
    days: int
    samples: int
    """Samples of `PROBE` imported."""


@contextmanager
def victoriametrics(tmp: Path) -> Iterator[str]:
    """A real VictoriaMetrics on loopback, storing under `tmp`, with its search cache off."""
    with vmserver.victoriametrics(tmp, "-search.disableCache") as url:
        yield url


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
        counted = _counting(vmserver.import_lines(oms[seed], f'cluster="{name}",pair="p{i % 2}"'))
        vmserver.import_samples(url, counted)
        samples += counted.n
    for om in oms.values():
        om.unlink()
    end = next(iter(scenarios.values())).end
    vmserver.wait_for_samples(url, PROBE, samples, end, days)
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
