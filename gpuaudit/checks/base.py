"""What checks share: severity ladders, and the words and packing helpers of their messages.

Not a check (only `gpuNNN_*` modules are), so checks may import it; no check imports another.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from gpuaudit.checks.findings import Severity


@dataclass(frozen=True)
class Ladder:
    """Severity by a figure (wasted GPU-hours, hours waited ...): the severity of the first rung
    whose floor the figure reaches, else `below`. A NaN figure reaches no floor."""

    rungs: tuple[tuple[float, Severity], ...]
    """(floor, severity), highest floor first."""
    below: Severity
    """The severity of a figure under every floor."""

    def __call__(self, value: float) -> Severity:
        for floor, severity in self.rungs:
            if value >= floor:
                return severity
        return self.below


WASTE = Ladder(((100.0, Severity.HIGH), (24.0, Severity.MEDIUM)), Severity.LOW)
"""Wasted GPU-hours of a pod or gang: high from 100, medium from 24, low below."""
MODEST_WASTE = Ladder(((24.0, Severity.MEDIUM),), Severity.LOW)
"""GPU-hours a change would free or an estimate puts at risk: medium from 24, low below."""
NODE_WASTE = Ladder(((500.0, Severity.HIGH), (100.0, Severity.MEDIUM)), Severity.LOW)
"""Idle GPU-hours of whole nodes: high from 500, medium from 100, low below."""
STUCK_WORK = Ladder(((24.0, Severity.HIGH),), Severity.MEDIUM)
"""GPU-hours held by work that makes no progress: high from 24, medium below."""
WAITING = Ladder(((4.0, Severity.HIGH),), Severity.MEDIUM)
"""Hours a pod has waited for GPUs it could have had: high from 4, medium below."""


def gpu_word(n: float) -> str:
    """`1 GPU`, `8 GPUs`, `0.43 GPU` (MIG slices as fractions of a GPU)."""
    if abs(n - round(n)) < 1e-9:
        k = int(round(n))
        return f"{k} GPU" if k == 1 else f"{k} GPUs"
    return f"{n:.2f} GPU"


def held_text(gpus: float, model: str, replicas: float) -> str:
    """What a pod held: `2 GPUs (H100 80GB HBM3)`, or on a GPU shared by time-slicing or MPS
    `a replica of an L40S shared 4 ways (0.25 GPU)`; `model` is the short model name."""
    if replicas > 1:
        return f"a replica of an {model} shared {int(replicas)} ways ({gpu_word(gpus)})"
    return f"{gpu_word(gpus)} ({model})"


def shared_note(replicas: float) -> str:
    """The sentence a finding about one pod on a shared GPU adds (empty otherwise): its
    activity is the device's, and what it wastes is its replica."""
    if replicas <= 1:
        return ""
    return (
        " The GPU is shared: its activity is the device's (every pod holding a replica of it), "
        "and an idle pod on it wastes its replica, not the GPU."
    )


def counted(n: float, noun: str, many: str = "") -> str:
    """A whole count with its noun in the right number: `1 row`, `8 rows`, `1,024 rows`
    (`many` for a noun whose plural is not the noun and an `s`)."""
    k = int(round(n))
    return f"{k:,} {noun if k == 1 else (many or noun + 's')}"


def short_model(model: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `H100 80GB HBM3`."""
    m = model.strip()
    for prefix in ("NVIDIA ", "NVIDIA-"):
        if m.startswith(prefix):
            m = m[len(prefix) :]
    return m or "unknown-model"


def pack(sizes: Sequence[float], room: Mapping[str, float]) -> list[str] | None:
    """Nodes used when packing pods of `sizes` GPUs into `room` (GPUs per node), largest pod
    first, each into the fullest open node it fits, else the roomiest unused node; None when
    some pod fits nowhere."""
    left = dict(room)
    opened: list[str] = []
    for size in sorted(sizes, reverse=True):
        fits = [n for n in opened if left[n] >= size]
        if fits:
            node = min(fits, key=lambda n: (left[n], n))
        else:
            spare = [n for n in left if n not in opened and left[n] >= size]
            if not spare:
                return None
            node = max(spare, key=lambda n: (left[n], n))
            opened.append(node)
        left[node] -= size
    return opened


def pack_each(items: Sequence[tuple[float, Collection[str]]], room: Mapping[str, float]) -> bool:
    """Whether pods of these (size, nodes each may run on) all fit into `room` (free GPUs per
    node), largest first, each into the allowed node it leaves fullest (best fit)."""
    left = dict(room)
    for size, allowed in sorted(items, key=lambda it: -it[0]):
        fits = [n for n in allowed if left.get(n, 0.0) >= size]
        if not fits:
            return False
        node = min(fits, key=lambda n: (left[n], n))
        left[node] -= size
    return True
