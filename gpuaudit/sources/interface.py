"""What every source implements: it reads one outside API over the audit window and returns the
raw answers, untouched, with what a snapshot's manifest should say about them. The errors a
source raises are `SourceError` (one line that says what failed and what to try) and its
subclasses, such as the Prometheus client's `PromError`.

The implementations are `prometheus.source.PrometheusSource` and
`kubernetes.source.KubernetesSource`; `live.collect` runs them one after the other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import ClassVar, Generic, TypeVar

from gpuaudit.errors import SourceError

__all__ = ["Progress", "Source", "SourceError", "Window", "make_window"]

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
    None: now)."""
    if step_s <= 0 or window_s < step_s:
        raise SourceError("--window must be at least one --step long")
    if window_s % step_s:
        raise SourceError("--window must be a whole number of --step")
    now = datetime.now(timezone.utc).timestamp() if end is None else end
    e = int(now) - int(now) % step_s
    return Window(start=e - window_s, end=e, step=step_s)


class Source(ABC, Generic[CollectionT]):
    """One outside API a live collection reads."""

    name: ClassVar[str]
    """How messages and the manifest name the source (`prometheus`, `kubernetes`)."""

    @abstractmethod
    def collect(self, window: Window) -> CollectionT:
        """Read everything this source has for `window`: the raw answers as the API gave them,
        plus what the manifest should record. Raises `SourceError` when the source cannot be
        read at all."""
