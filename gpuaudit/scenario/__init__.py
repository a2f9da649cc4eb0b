"""Deterministic, seeded cluster scenarios with planted problems (demo, tests, benchmarks)."""

from __future__ import annotations

from gpuaudit.scenario.emit import k8s_lists, to_snapshot, write_openmetrics, write_snapshot
from gpuaudit.scenario.generator import DEFAULT_END, Scenario, generate

__all__ = [
    "DEFAULT_END",
    "Scenario",
    "generate",
    "k8s_lists",
    "to_snapshot",
    "write_openmetrics",
    "write_snapshot",
]
