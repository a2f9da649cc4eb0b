"""gpuaudit: audit GPU usage on Kubernetes from DCGM metrics and cluster objects."""

from __future__ import annotations

__version__ = "0.1.0"
