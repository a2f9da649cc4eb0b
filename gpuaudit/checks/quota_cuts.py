"""Which ClusterQueues to lower, and to what, when a ResourceFlavor's quotas together exceed what
its nodes allocate (GPU090's flavor totals).

Not a check (only `gpuNNN_*` modules are), so GPU090 may import it.

Each queue's own peak is the most it admitted at one instant (`QueueUsage.peak_admitted`); the
peak that matters for quotas lowered together is what the queues admitted at once. Per hour of
the window, each queue's most admitted at one instant of it (`QueueUsage.admitted_by_bucket`) is
added over the queues: queues that peak in different hours share, and the largest such sum is
their concurrent peak (an hour in which two queues peak at different minutes counts both: a
bound from above, never below what was admitted at once).

The cuts, in whole units of the resource:

1. Each queue down to its own peak (rounded up), the most unused quota (quota less own peak)
   first, until the excess is gone.
2. If the excess is not gone, the queues of one Kueue cohort may share: where none of the
   cohort's ClusterQueues for the flavor and resource has a `lendingLimit` (each lends all its
   idle quota), a queue may go below its own peak by what it may borrow (its `borrowingLimit`;
   no limit: all of it), and their quota together never below the cohort's concurrent peak (all
   its ClusterQueues of the flavor and resource, those without quota included). Every hour the
   cohort then holds quota for what its queues admitted together, and a queue at its peak
   borrows the rest from the others' idle quota. The largest quotas are lowered first, to a
   common level (where that takes off too much, the queues with the most quota before keep one
   unit more, then by name).

Whatever is left is `short`: what no lowering takes off within those rules.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.inventory.queue_usage import QueueUsage

EPS = 1e-9


def _up(x: float) -> float:
    return float(max(0, math.ceil(x - EPS)))


def together(lines: Sequence[QueueUsage]) -> tuple[float, int | None]:
    """The most `lines` admitted together in one hour (each line's most at one instant of it,
    added), and that hour's index; a line whose hours are unknown counts its own peak in every
    hour. (0, None) without lines."""
    if not lines:
        return 0.0, None
    nb = max(len(u.admitted_by_bucket) for u in lines)
    sums = [0.0] * max(nb, 1)
    for u in lines:
        hours = u.admitted_by_bucket or (u.peak_admitted,) * len(sums)
        for k, v in enumerate(hours):
            sums[k] += v
    k = max(range(len(sums)), key=lambda i: (sums[i], -i))
    return sums[k], k if nb else None


@dataclass(frozen=True)
class Cuts:
    """The queues to lower and to what, and what is left over."""

    changes: list[dict[str, Any]]
    """Per queue lowered: `queue`, `kind`, `from`, `to`, `peak` (its own peak admitted) and
    `borrows_at_peak` (what it borrows from its cohort at its own peak: its own peak, rounded
    up, less `to`; 0 when it stays at or above it)."""
    short: float
    """The excess no lowering takes off."""
    shared: dict[str, float] = field(default_factory=dict)
    """Cohort -> its queues' concurrent peak, for each cohort whose queues went below their
    own peaks."""


def plan(us: Sequence[QueueUsage], excess: float, peers: Sequence[QueueUsage]) -> Cuts:
    """The cuts that take `excess` off the quotas of `us` (the flavor's ClusterQueues with
    quota for the resource); `peers`: every audited ClusterQueue line of the flavor and
    resource, those without quota included (they borrow from the others), and those whose
    quota or use could not be read (a cohort with one does not share)."""
    new = {u.queue: u.quota for u in us}
    own = {u.queue: _up(u.peak_admitted) for u in us}
    slack = sorted(us, key=lambda u: (-(u.quota - own[u.queue]), u.queue))
    left = excess
    for u in slack:
        spare = u.quota - own[u.queue]
        if left <= EPS or spare <= EPS:
            break
        cut = min(spare, left)
        new[u.queue] -= cut
        left -= cut
    shared: dict[str, float] = {}
    if left > EPS:
        left = _share(us, peers, new, own, left, shared)
    changes = [
        {
            "queue": u.queue,
            "kind": u.kind,
            "from": u.quota,
            "to": new[u.queue],
            "peak": u.peak_admitted,
            "borrows_at_peak": max(0.0, own[u.queue] - new[u.queue]),
        }
        for u in sorted(us, key=lambda u: (new[u.queue] - u.quota, u.queue))
        if new[u.queue] < u.quota - EPS
    ]
    return Cuts(changes, max(0.0, left), shared)


def _share(
    us: Sequence[QueueUsage],
    peers: Sequence[QueueUsage],
    new: dict[str, float],
    own: dict[str, float],
    left: float,
    shared: dict[str, float],
) -> float:
    """Step 2: lower the queues of each cohort that may share below their own peaks, cohort by
    cohort (by name); `new` is changed in place. What is left of the excess."""
    members: dict[str, list[QueueUsage]] = defaultdict(list)
    for u in us:
        if u.cohort:
            members[u.cohort].append(u)
    everyone: dict[str, list[QueueUsage]] = defaultdict(list)
    for u in peers:
        everyone[u.cohort].append(u)
    for cohort, mine in sorted(members.items()):
        lines = everyone.get(cohort, mine)
        if left <= EPS:
            break
        # Sharing needs two queues that lend all they leave idle, and every use known.
        lends = all(u.lending_limit is None and not u.unaudited for u in lines)
        if len({u.queue for u in lines}) < 2 or not lends:
            continue
        peak = _up(together(lines)[0])
        floor = {
            u.queue: min(
                new[u.queue],
                0.0 if u.borrowing_limit is None else max(0.0, own[u.queue] - u.borrowing_limit),
            )
            for u in mine
        }
        room = min(
            sum(new[u.queue] for u in mine) - peak, sum(new[q] - f for q, f in floor.items())
        )
        need = min(left, room)
        if need <= EPS:
            continue
        _level(new, floor, need)
        left -= need
        shared[cohort] = peak
    return left


def _level(new: dict[str, float], floor: dict[str, float], need: float) -> None:
    """Take `need` off the quotas of `floor`'s queues in `new`, the largest first down to a
    common whole level, none below its floor; of those left at the level, the ones with the
    most quota before (then by name) keep what that takes off too much, one unit each."""
    names = sorted(floor)
    start = {q: new[q] for q in names}

    def taken(level: float) -> float:
        return sum(max(0.0, start[q] - max(level, floor[q])) for q in names)

    lo, hi = math.floor(min(floor.values())), math.ceil(max(start.values()))
    while lo < hi:  # the highest whole level that takes at least `need`
        mid = (lo + hi + 1) // 2
        if taken(mid) >= need - EPS:
            lo = mid
        else:
            hi = mid - 1
    for q in names:
        new[q] = min(start[q], max(float(lo), floor[q]))
    over = taken(lo) - need
    for q in sorted(names, key=lambda q: (-start[q], q)):
        if over <= EPS:
            break
        if new[q] < start[q] - EPS and abs(new[q] - lo) < EPS:
            back = min(1.0, over, start[q] - new[q])
            new[q] += back
            over -= back
