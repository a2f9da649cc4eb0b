"""Errors a user can cause. Each carries one line that says what failed and what to try."""

from __future__ import annotations


class GpuauditError(Exception):
    """An error that ends the run with one clear line (exit code 2)."""


class SnapshotError(GpuauditError):
    """A snapshot file could not be read or is not a gpuaudit snapshot."""


class ConfigError(GpuauditError):
    """A configuration file or option value is invalid."""


class SourceError(GpuauditError):
    """A live source (Prometheus, Kubernetes) could not be read."""
