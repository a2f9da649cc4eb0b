"""The snapshot file format's name and versions (see `docs/snapshot.md`)."""

from __future__ import annotations

FORMAT_NAME = "gpuaudit-snapshot"
FORMAT_VERSION = 2
"""What this gpuaudit writes; version 1 files are read too."""
READABLE_VERSIONS = (1, 2)
