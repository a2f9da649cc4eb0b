"""The inventory: joined tables built from a snapshot (GPUs, holdings, hourly series, pods, nodes).

Everything downstream (checks, summary, reports) reads these tables; nothing downstream knows
whether the snapshot came from a live scan, a saved file, the demo or a test scenario.
"""

from __future__ import annotations

from gpuaudit.inventory.build import Inventory, build

__all__ = ["Inventory", "build"]
