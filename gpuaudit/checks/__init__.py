"""The registry of checks. Codes are permanent: never renumbered, never reused."""

from __future__ import annotations

from gpuaudit.checks import (
    gpu001_idle_reservation,
    gpu002_idle_tail,
    gpu003_part_time_reservation,
    gpu010_partial_gang,
    gpu020_framebuffer_pressure,
    gpu021_oversized_reservation,
    gpu030_topology_mismatch,
    gpu031_gang_spread,
    gpu040_busy_no_work,
    gpu050_priority_inversion,
    gpu051_fragmentation,
    gpu060_warm_idle_nodes,
    gpu070_sick_gpus,
    gpu080_unmonitored_gpus,
)
from gpuaudit.checks.base import Check, from_module

REGISTRY: tuple[Check, ...] = tuple(
    from_module(m)
    for m in (
        gpu001_idle_reservation,
        gpu002_idle_tail,
        gpu003_part_time_reservation,
        gpu010_partial_gang,
        gpu020_framebuffer_pressure,
        gpu021_oversized_reservation,
        gpu030_topology_mismatch,
        gpu031_gang_spread,
        gpu040_busy_no_work,
        gpu050_priority_inversion,
        gpu051_fragmentation,
        gpu060_warm_idle_nodes,
        gpu070_sick_gpus,
        gpu080_unmonitored_gpus,
    )
)
"""Every check, in code order."""

RETIRED: dict[str, str] = {}
"""Codes that were used once and must never be reused: code -> why it was retired."""

BY_CODE = {c.code: c for c in REGISTRY}

__all__ = ["BY_CODE", "REGISTRY", "RETIRED", "Check"]
