"""The bounds of one live collection: how long one request may take, how large one answer may
be, how many objects one Kubernetes list may hold and how many queries one collection may send.
A backend that goes past one gets one clear error, or a list marked incomplete; it never makes
gpuaudit wait, grow or ask without end.

The command line sets them (`--timeout`, `--max-answer-mib`, `--max-objects`,
`--max-queries`, `--parallel-queries`), and `gpuaudit.app.config` checks each value once, against
the ranges it states; README's "Limits" lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIB = 1024 * 1024

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_ANSWER_MIB = 512
DEFAULT_OBJECTS = 300_000
DEFAULT_QUERIES = 10_000
DEFAULT_PARALLEL = 2
"""Two queries in flight, chosen from the measurements in `benchmarks/README.md` (round 11: two
were never slower than one, and much faster on raw series); Prometheus evaluates up to 20 at once
by default (`--query.max-concurrency`), so two stay well inside what a shared server expects."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one live collection."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds one HTTP request may take from start to last byte (`--timeout`): connecting,
    waiting and reading together, on Prometheus and on the Kubernetes API alike."""
    answer_bytes: int = DEFAULT_ANSWER_MIB * MIB
    """The largest answer read, after decompression (`--max-answer-mib`): one Prometheus answer
    or one Kubernetes list page."""
    objects: int = DEFAULT_OBJECTS
    """The most objects read of one Kubernetes resource, over all its pages and namespaces
    (`--max-objects`; twice the 150,000 pods Kubernetes supports in one cluster)."""
    queries: int = DEFAULT_QUERIES
    """The most Prometheus queries one collection sends, chunks and shards included
    (`--max-queries`)."""
    parallel: int = DEFAULT_PARALLEL
    """The most Prometheus queries in flight at once (`--parallel-queries`)."""

    def pages(self, page_size: int) -> int:
        """The most pages read of one Kubernetes resource: enough for `objects` in pages at
        least half full, and a few more (a server may send short pages, never endless ones)."""
        return 2 * math.ceil(self.objects / max(1, page_size)) + 10
