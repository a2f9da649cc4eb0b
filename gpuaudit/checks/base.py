"""What every check module provides, and helpers checks share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType

from gpuaudit.findings import Finding
from gpuaudit.inventory import Inventory
from gpuaudit.settings import Settings

CheckFn = Callable[[Inventory, Settings], Sequence[Finding]]


@dataclass(frozen=True)
class Check:
    """A registered check: its stable code, title, the data it needs, and its rule."""

    code: str
    title: str
    requires: tuple[str, ...]
    run: CheckFn
    module: ModuleType

    @property
    def doc(self) -> str:
        """The module docstring: the check's documentation."""
        return (self.module.__doc__ or "").strip()


def from_module(module: ModuleType) -> Check:
    return Check(
        code=module.CODE,
        title=module.TITLE,
        requires=tuple(module.REQUIRES),
        run=module.run,
        module=module,
    )


def gpu_word(n: float) -> str:
    """`1 GPU`, `8 GPUs`, `0.43 GPU` (MIG slices as fractions of a GPU)."""
    if abs(n - round(n)) < 1e-9:
        k = int(round(n))
        return f"{k} GPU" if k == 1 else f"{k} GPUs"
    return f"{n:.2f} GPU"


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
