"""What every source implements: it reads one outside API over the audit window and returns the
raw answers, untouched, with what a snapshot's manifest should say about them. The errors a
source raises are `SourceError` (one line that says what failed and what to try) and its
subclasses, such as the Prometheus client's `PromError`.

The implementations are `prometheus.source.PrometheusSource` and
`kubernetes.source.KubernetesSource`; `live.collect` runs them one after the other.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import ClassVar, Generic, TypeVar

from gpuaudit.core.errors import ConfigError, SourceError

__all__ = ["Progress", "Source", "SourceError", "Window", "check_step", "make_window", "span"]

Progress = Callable[[int, int], None]
"""Called with (requests done, requests planned) as a collection goes."""

CollectionT = TypeVar("CollectionT", covariant=True)


@dataclass(frozen=True)
class Window:
    """The audit window a collection covers, in unix seconds, its ends aligned to the step."""

    start: int
    end: int
    step: int

    @property
    def seconds(self) -> int:
        return self.end - self.start


def make_window(window_s: int, step_s: int, end: float | None) -> Window:
    """The audit window, its end aligned down to the step so hourly buckets line up (`end`
    None: now). `window_s` is a whole number of `step_s`, at least one, as
    `gpuaudit.app.config` checks `--window` and `--step`."""
    now = datetime.now(timezone.utc).timestamp() if end is None else end
    e = int(now) - int(now) % step_s
    return Window(start=e - window_s, end=e, step=step_s)


def check_step(
    step_s: int, scrape_interval_s: float | None, at_least_s: float | None = None
) -> None:
    """Refuse a `--step` shorter than the scrape interval of the DCGM series (None or not a
    positive number: not known, nothing to check). A bucket shorter than the interval holds one
    sample or none, so its mean is noise. Only a step shorter than `at_least_s` (the shortest
    interval the measurement allows, when it is known to a sample, else the interval itself)
    by more than 1 % is refused: scrape timestamps jitter."""
    if scrape_interval_s is None or not math.isfinite(scrape_interval_s):
        return
    floor = scrape_interval_s if at_least_s is None else min(at_least_s, scrape_interval_s)
    if scrape_interval_s <= 0 or not math.isfinite(floor) or step_s >= floor * 0.99:
        return
    raise ConfigError(
        f"--step {span(step_s)} is shorter than the scrape interval of the DCGM series "
        f"({scrape_interval_s:g} s): use --step {span(math.ceil(scrape_interval_s))} or longer"
    )


def span(seconds: int) -> str:
    """Seconds as the shortest whole duration `--window` and `--step` read back: 90s, 2m, 1h,
    7d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


class Source(ABC, Generic[CollectionT]):
    """One outside API a live collection reads."""

    name: ClassVar[str]
    """How messages and the manifest name the source (`prometheus`, `kubernetes`)."""

    @abstractmethod
    def collect(self, window: Window) -> CollectionT:
        """Read everything this source has for `window`: the raw answers as the API gave them,
        plus what the manifest should record. Raises `SourceError` when the source cannot be
        read at all."""
