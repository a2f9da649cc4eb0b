"""MIG profiles per GPU model (`docs/domain.md`, MIG profiles): names, compute slices, memory,
fit."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one GPU model."""

    name: str
    """Profile name as NVIDIA spells it, e.g. `1g.10gb`."""
    slices: int
    """Compute slices (the `Ng` part)."""
    memory_gb: int
    """Nominal memory in GB (the `Ngb` part)."""


_PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb")

# Profile lists per model family (without the +me/+gfx variants): the GPU Operator's default MIG
# layouts (`docs/domain.md` gives the sources).
_FAMILIES: list[tuple[tuple[str, ...], int, tuple[str, ...]]] = [
    (
        ("A100-SXM4-40GB", "A100-PCIE-40GB", "A100 40GB", "A800-40GB"),
        7,
        ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    ),
    (
        ("H100 NVL", "H100-NVL"),
        7,
        ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    ),
    (
        ("H100-96GB", "GH200 96", "GH200-96"),
        7,
        ("1g.12gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    ),
    (
        ("GH200-144", "GH200 144"),
        7,
        ("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
    ),
    (("H200",), 7, ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
    (("GB200",), 7, ("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb")),
    (("B200",), 7, ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")),
    (
        ("A100", "H100", "A800", "H800"),
        7,
        ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ),
    (("A30",), 4, ("1g.6gb", "2g.12gb", "4g.24gb")),
    (("RTX PRO 6000", "RTX-PRO-6000"), 4, ("1g.24gb", "2g.48gb", "4g.96gb")),
]


def parse_profile(name: str) -> MigProfile | None:
    """Parse `1g.10gb` (and `1g.10gb+me`) into a profile; None when it is not a MIG name."""
    m = _PROFILE_RE.match(name.strip())
    if not m:
        return None
    return MigProfile(name=name.strip(), slices=int(m.group(1)), memory_gb=int(m.group(2)))


def _family(model: str) -> tuple[int, tuple[str, ...]] | None:
    upper = model.upper().replace("_", "-")
    for keys, total, names in _FAMILIES:
        if any(k.upper() in upper for k in keys):
            return total, names
    return None


def total_slices(model: str) -> int:
    """Compute slices of a whole GPU of this model (7 for A100/H100/H200/B200, 4 for A30)."""
    fam = _family(model)
    return fam[0] if fam else 7


@functools.lru_cache(maxsize=4096)
def slice_fraction(profile: str, model: str) -> float:
    """The share of a whole GPU that a MIG profile is: compute slices over the model's total."""
    p = parse_profile(profile)
    if p is None:
        return 1.0
    return min(1.0, p.slices / total_slices(model))


def profiles_for(model: str) -> list[MigProfile]:
    """The MIG profiles a model offers, smallest first; empty when the model has no MIG."""
    fam = _family(model)
    if fam is None:
        return []
    out = [p for p in (parse_profile(n) for n in fam[1]) if p is not None]
    return sorted(out, key=lambda p: (p.memory_gb, p.slices))
