"""NVIDIA XID codes: what they mean and which call for draining the node (REFERENCE.md §1.6, §7).

Texts follow dcgm-exporter's `xid_errors.go` table (itself based on NVIDIA's XID catalogue,
https://docs.nvidia.com/deploy/xid-errors/). The exporter's own `err_msg` label wins when a
series carries one.
"""

from __future__ import annotations

MEANINGS: dict[int, str] = {
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    109: "Context Switch Timeout Error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    121: "C2C Link Error",
    140: "Unrecovered ECC Error",
    143: "GPU Initialization Failure",
    144: "NVLINK Error",
    145: "NVLINK Error",
    149: "NVLINK Error",
    150: "NVLINK Error",
    154: "GPU Recovery Action Changed",
    155: "NVLINK Error",
    156: "Resource Retirement Event",
    157: "Resource Retirement Failure",
    158: "GPU Fatal Timeout",
}
"""XID code -> short meaning."""

DRAIN: frozenset[int] = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
"""XIDs that call for cordoning and draining the node (hardware or driver side)."""

APPLICATION: frozenset[int] = frozenset({13, 31, 43, 45})
"""XIDs usually caused by the application (a bad kernel, an illegal address)."""


def meaning(code: int, exporter_text: str = "") -> str:
    """The exporter's text when given, else the table's, else `unknown XID`."""
    return exporter_text or MEANINGS.get(code, "unknown XID")
