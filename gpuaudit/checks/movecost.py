"""What a move of work onto other GPUs costs, priced against the idle capacity it uses (GPU031).

GPUs no pod held are paid for already: the hours of a move that GPUs unheld on its target
cover cost nothing extra. The rest, the GPU-hours it would need from GPUs other pods held (or
that had no data), is priced at the target's list price. Bucket by bucket over the hours the
moving work held its GPUs, the unheld GPUs cover at most the GPUs it held in that bucket. A
move advised earlier in the audit takes the unheld GPUs it uses, so no two findings promise
the same idle GPU-hours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.checks.base import short_model
from gpuaudit.inventory.unheld import held_per_bucket, unheld_per_bucket

if TYPE_CHECKING:
    import numpy.typing as npt

    from gpuaudit.inventory import Views


@dataclass(frozen=True)
class MoveCost:
    """A move's GPU-hours on its target, the part GPUs no pod held there covered, and the
    rest at list price, against the GPU-hours it leaves."""

    nodes: tuple[str, ...]
    """The nodes it moves work onto."""
    model: str
    """The GPU product there."""
    gpus: int
    """The GPUs it needs there."""
    needed: float
    """GPU-hours the moving work held where it runs (its hours, its GPUs)."""
    unheld: float
    """Of those, GPU-hours the target's unheld GPUs covered, bucket by bucket, less what
    moves advised before it take."""
    taken: float
    """GPU-hours the target's unheld GPUs would also have covered that moves advised before it
    take."""
    price_here: float
    price_there: float
    slowdown: float
    """`checks.placement_slowdown`: the share of its time the faster links save."""

    @property
    def at_list(self) -> float:
        """GPU-hours it needs beyond the idle capacity: held by other pods, or without data."""
        return max(0.0, self.needed - self.unheld)

    @property
    def share(self) -> float:
        """The share of the GPU-hours it needs that sat unheld."""
        return self.unheld / self.needed if self.needed > 0 else 0.0

    @property
    def extra(self) -> float:
        """What it costs beyond the GPUs paid for already: the GPU-hours at list price, run
        `slowdown` faster on the better links."""
        return self.at_list * (1 - self.slowdown) * self.price_there

    @property
    def leaves(self) -> float:
        """The GPU-hours it leaves where it runs, at their list price."""
        return self.needed * self.price_here

    @property
    def saving(self) -> float:
        return self.leaves - self.extra

    def evidence(self) -> dict[str, Any]:
        return {
            "target_nodes": list(self.nodes),
            "gpu_model_there": self.model,
            "gpus_needed": self.gpus,
            "gpu_hours_needed": round(self.needed, 2),
            "gpu_hours_unheld": round(self.unheld, 2),
            "gpu_hours_unheld_taken_by_other_moves": round(self.taken, 2),
            "unheld_share": round(self.share, 4),
            "gpu_hours_at_list": round(self.at_list, 2),
            "price_per_gpu_hour": {"here": self.price_here, "there": self.price_there},
            "extra_cost": round(self.extra, 2),
            "cost_left": round(self.leaves, 2),
            "estimated_saving": round(self.saving, 2),
            "basis": (
                "GPUs no pod held are paid for already: the GPU-hours the move needs, bucket "
                "by bucket over the hours its work held its GPUs, that unheld GPUs on the "
                "target covered cost nothing extra; the rest is priced at list x (1 - "
                f"placement_slowdown {self.slowdown:g}), against the GPU-hours it leaves at "
                "list"
            ),
        }

    def words(self, here_model: str) -> str:
        """The reasoning in words, for the finding's message."""
        here, there = short_model(here_model), short_model(self.model)
        gpus = f"the {self.gpus} {there} GPU{'' if self.gpus == 1 else 's'}"
        text = f"{gpus} it needs there"
        if self.at_list <= 0:
            text += " sat unheld for 100 % of the job's hours, so the move costs nothing extra"
        else:
            list_price = (
                f"priced at list ({self.price_there:.2f} per GPU-hour, x "
                f"{1 - self.slowdown:g} for the faster links): about {self.extra:,.0f}"
            )
            if self.unheld > 0:
                text += (
                    f" sat unheld for {_percent(self.share)} of the job's hours (paid for "
                    f"already); the other {self.at_list:,.0f} GPU-hours are {list_price}"
                )
            else:
                text += f" sat unheld for none of the job's hours: {list_price}"
        if self.taken > 0:
            text += (
                f" ({self.taken:,.0f} GPU-hours more sat unheld there, which a move advised "
                "for other work takes)"
            )
        if here != there or self.price_here != self.price_there:
            text += (
                f", against {self.leaves:,.0f} for the {here} GPU-hours it leaves: about "
                f"{self.saving:,.0f} saved"
            )
        elif self.at_list > 0:
            text += f", no more than the {here} GPU-hours it leaves"
        return text


def _percent(share: float) -> str:
    """A share as a whole percent, never rounded up to all or down to none."""
    if share <= 0:
        return "0 %"
    if share < 0.01:
        return "under 1 %"
    return f"{min(99, math.floor(share * 100))} %"


class Capacity:
    """The unheld GPUs, bucket by bucket, of the nodes some moves could use, less what moves
    advised so far take; and what each move's work held, bucket by bucket (see the module
    docstring). Made once per audit, in one pass over the whole-GPU rows for each side."""

    def __init__(
        self,
        views: Views,
        movers: Sequence[Sequence[int]],
        nodes: Sequence[str],
        caps: Sequence[int],
    ) -> None:
        """`movers`: per move, the holding positions of the work it moves; `nodes`: every node
        any of them could move onto, with the most GPUs each offers (`caps`)."""
        whole = views.whole_rows
        self.step_h = views.inv.step_s / 3600.0
        ends, self.need = held_per_bucket(whole, movers)
        self.row = {n: i for i, n in enumerate(nodes)}
        most = np.array(caps, dtype=np.int64).reshape(-1, 1)
        self.raw = np.minimum(unheld_per_bucket(whole, nodes, ends), most).astype(np.int32)
        self.left = self.raw.copy()

    def _cells(
        self, move: int, nodes: Sequence[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The grid rows of `nodes`, the move's bucket columns, and its GPUs in each."""
        cols = np.flatnonzero(self.need[move])
        rows = np.array([self.row[n] for n in nodes], dtype=np.int64)
        return rows, cols, self.need[move, cols]

    def each(self, move: int, nodes: Sequence[str]) -> tuple[list[float], list[float]]:
        """GPU-hours of the move's work the unheld GPUs of each node alone cover: less what
        earlier moves take, and as they sat unheld."""
        rows, cols, need = self._cells(move, nodes)
        out = []
        for grid in (self.left, self.raw):
            covered = np.minimum(grid[np.ix_(rows, cols)], need).sum(axis=1, dtype=np.int64)
            out.append([float(c) * self.step_h for c in covered.tolist()])
        return out[0], out[1]

    def together(self, move: int, nodes: Sequence[str]) -> tuple[float, float]:
        """GPU-hours of the move's work the unheld GPUs of `nodes` together cover: less what
        earlier moves take, and as they sat unheld."""
        rows, cols, need = self._cells(move, nodes)
        out = []
        for grid in (self.left, self.raw):
            pooled = grid[np.ix_(rows, cols)].sum(axis=0, dtype=np.int64)
            out.append(float(np.minimum(pooled, need).sum(dtype=np.int64)) * self.step_h)
        return out[0], out[1]

    def take(self, move: int, nodes: Sequence[str]) -> None:
        """The move is advised: its work takes the unheld GPUs it uses, on `nodes` in order."""
        rows, cols, need = self._cells(move, nodes)
        rest = need.astype(np.int64)
        for r in rows.tolist():
            got = np.minimum(self.left[r, cols], rest)
            self.left[r, cols] -= got.astype(np.int32)
            rest -= got
