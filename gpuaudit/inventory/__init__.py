"""The inventory: joined tables built from a snapshot (GPUs, holdings, hourly series, pods, nodes,
gangs, GPU topologies), and the views shared by everything that reads them.

Everything downstream (checks, summary, reports) reads these tables; nothing downstream knows
whether the snapshot came from a live scan, a saved file, the demo or a test scenario.
"""

from __future__ import annotations

from gpuaudit.inventory.build import build
from gpuaudit.inventory.capabilities import Capability
from gpuaudit.inventory.tables import Inventory
from gpuaudit.inventory.views import Views

__all__ = ["Capability", "Inventory", "Views", "build"]
