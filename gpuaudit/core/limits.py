"""Bounds on what gpuaudit reads from files and clusters it does not control.

Every size that comes from outside (a snapshot's bytes and lines, the buckets of its window, a
node's GPU count, a gang's size) is checked against one of these limits before anything is
allocated for it. Each limit is a setting: its environment variable, when set, replaces the
default (`GPUAUDIT_SNAPSHOT_MAX_BYTES=8589934592`). The defaults are far above anything a real
cluster produces; README's "Limits" section lists them.

Values are read when used, not when gpuaudit is imported, so a malformed variable is one clear
`ConfigError`, and tests can set one for a single call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuaudit.core.errors import ConfigError
from gpuaudit.core.numbers import whole_number


@dataclass(frozen=True)
class Limit:
    """One bound: its environment variable, its default and what it bounds."""

    env: str
    default: int
    what: str
    """What it bounds, as a phrase (`the decompressed size of a snapshot, in bytes`)."""

    def value(self) -> int:
        """The bound in force: the environment variable's value when set, else the default.
        `ConfigError` when the variable is not a positive whole number."""
        raw = os.environ.get(self.env)
        if raw is None or raw.strip() == "":
            return self.default
        n = whole_number(raw)
        if n is None or n <= 0:
            raise ConfigError(
                f"{self.env}={raw[:40]!r} is not a positive whole number ({self.what})"
            )
        return n


SNAPSHOT_BYTES = Limit(
    "GPUAUDIT_SNAPSHOT_MAX_BYTES", 4 * 1024**3, "the decompressed size of a snapshot, in bytes"
)
SNAPSHOT_LINE_BYTES = Limit(
    "GPUAUDIT_SNAPSHOT_MAX_LINE_BYTES",
    1024**3,
    "the length of one line of a snapshot (one answer), in bytes",
)
SIDE_FILE_HEADER_BYTES = Limit(
    "GPUAUDIT_SIDE_FILE_MAX_HEADER_BYTES",
    1024**3,
    "the header of a snapshot's columnar side-file (FILE.columns), in bytes",
)
WINDOW_BUCKETS = Limit(
    "GPUAUDIT_MAX_BUCKETS",
    200_000,
    "the buckets of a snapshot's window (its length divided by its step)",
)
NODE_GPUS = Limit(
    "GPUAUDIT_MAX_NODE_GPUS",
    1024,
    "the GPUs (or GPU shares and MIG devices) one node may advertise",
)
GANG_SIZE = Limit(
    "GPUAUDIT_MAX_GANG_SIZE",
    100_000,
    "the members (pods) or groups one gang object may ask for",
)
REPORT_BYTES = Limit(
    "GPUAUDIT_MAX_REPORT_BYTES",
    256 * 1024**2,
    "the size of an earlier JSON report read by --baseline or --previous, in bytes",
)

QUEUE_QUOTA = Limit(
    "GPUAUDIT_MAX_QUEUE_QUOTA",
    10_000_000,
    "the GPUs (or MIG slices) one Kueue or Volcano queue's quota, limit or usage may name",
)

CONFIG_BYTES = Limit(
    "GPUAUDIT_MAX_CONFIG_BYTES",
    1024**2,
    "the size of a configuration file (gpuaudit.toml, --config), in bytes",
)

CLUSTERS = Limit(
    "GPUAUDIT_MAX_CLUSTERS",
    500,
    "the clusters one scan of every cluster (--cluster-label NAME) or its snapshot may hold",
)

ALL = (
    SNAPSHOT_BYTES,
    SNAPSHOT_LINE_BYTES,
    SIDE_FILE_HEADER_BYTES,
    WINDOW_BUCKETS,
    NODE_GPUS,
    GANG_SIZE,
    REPORT_BYTES,
    CLUSTERS,
    QUEUE_QUOTA,
    CONFIG_BYTES,
)
"""Every limit, in the order README lists them."""
