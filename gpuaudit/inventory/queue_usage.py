"""What each queue did with its GPU quota over the window: per queue, flavor and GPU resource,
the quota, what was admitted under it, what its pods held and how much of that was busy, hour by
hour (see `QueueUsage`).

The figures, each traceable to the data:

- admitted (Kueue): each Workload's admitted GPU quantity (`podSetAssignments[].resourceUsage`
  of the flavor) from the time its quota was reserved (`QuotaReserved`, else `Admitted`, True)
  to the time it finished (`Finished` True) or the window's end; at the window's end at least
  what the ClusterQueue's `status.flavorsReservation` says is reserved. The API keeps no
  history, so Workloads deleted before the scan, and earlier admissions of Workloads evicted
  since, are not seen: admitted figures are a lower bound. Volcano: what the queue's pods held
  (DCGM), and its `status.allocated` at the scan.
- held and busy: the GPUs (or MIG slices, for a MIG resource) the queue's pods held in each hour
  by DCGM, on the flavor's nodes; busy where the pod's mean engine activity in that hour is at
  or above the idle threshold.
- in its namespaces: what any pod of the namespaces that submit to the queue held on the
  flavor's nodes in each hour, whether or not the pod is still known: an upper bound on the
  queue's use that survives deleted Workloads and pods.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuaudit.domain import mig
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.kube import PRODUCT_LABEL
from gpuaudit.inventory.queues import (
    GPU,
    KUEUE,
    Admission,
    Queue,
    QueueNode,
    Queues,
    Quota,
    mig_profile,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpuaudit.inventory.derived import HeldRows, Holders, PodHours
    from gpuaudit.inventory.tables import Inventory

    Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Pending:
    """A Workload waiting now for GPU quota of a queue."""

    namespace: str
    name: str
    resource: str
    quantity: float
    since: float


@dataclass(frozen=True)
class QueueUsage:
    """One GPU resource of one flavor of one queue over the window. Quantities are in the
    resource's units (GPUs, or MIG slices for `nvidia.com/mig-*`); GPU-hours in whole-GPU
    equivalents (a slice counts its share of a GPU, `unit_gpus`)."""

    system: str
    kind: str
    queue: str
    cohort: str
    flavor: str
    resource: str
    quota: float
    """Kueue `nominalQuota`; Volcano `deserved`, else its guarantee."""
    guarantee: float
    """Volcano `guarantee` (0 for Kueue)."""
    borrowing_limit: float | None
    lending_limit: float | None
    fenced: float
    """The quota no other queue may use while it sits idle (see `Queue.fenced`; all of it in a
    cohort nobody else belongs to)."""
    allocatable: float | None
    """What the flavor's schedulable nodes allocate of the resource; None when unknown."""
    flavor_nodes: int | None
    """Schedulable (not cordoned) nodes of the flavor; None when unknown."""
    flavor_missing: bool
    """Whether the ResourceFlavors were read and none has the flavor's name."""
    unit_gpus: float
    """Whole-GPU equivalents of one unit of the resource."""
    product: str
    """The GPU product its GPUs are priced as: the flavor nodes' most common
    `nvidia.com/gpu.product` (Volcano: of the nodes its pods used, else of the cluster)."""
    hours: float
    admitted_gpu_hours: float
    held_gpu_hours: float
    busy_gpu_hours: float
    peak_admitted: float
    """Most admitted at any one time (Kueue Workloads; Volcano: its pods, or its allocation)."""
    admitted_now: float
    """Admitted at the window's end (Kueue Workloads; Volcano `status.allocated`)."""
    peak_held: float
    """Most the queue's pods held in one hour (DCGM)."""
    peak_namespaces: float
    """Most pods of its namespaces held on the flavor's nodes in one hour (DCGM)."""
    namespaces: tuple[str, ...]
    use_by_bucket: tuple[float, ...]
    """Per hour of the window: the most of admitted, held and held in its namespaces."""
    bucket_start: float
    """End of the window's first hour; hour `i` ends at `bucket_start + i * step`."""
    step_s: float
    pending: tuple[Pending, ...]
    unaudited: bool = False
    """Whether a quantity of the queue, or of what was admitted to it, could not be read
    (`Queue.unaudited`): its quota and use are unknown, and not to be judged."""
    admitted_by_bucket: tuple[float, ...] = ()
    """Per hour of the window: the most admitted at one instant of it (Kueue Workloads, and in
    the last hour at least `admitted_now`; Volcano: what its pods held). Its largest value is
    `peak_admitted`; added over the queues of a flavor hour by hour, it gives what they
    admitted together (queues that peak in different hours share). Empty where unknown."""

    @property
    def quota_gpu_hours(self) -> float:
        return self.quota * self.unit_gpus * self.hours

    @property
    def peak_use(self) -> float:
        """The most the queue used at once by any measure (admitted, held, held in its
        namespaces): what its quota must at least cover."""
        return max(self.peak_admitted, self.peak_held, self.peak_namespaces)

    def use_since(self, ts: float) -> float:
        """The most it used in any hour that ended after `ts`."""
        vals = [
            v for i, v in enumerate(self.use_by_bucket) if self.bucket_start + i * self.step_s > ts
        ]
        return max(vals, default=0.0)


@dataclass(frozen=True)
class _Rows:
    """Held hourly rows in the window as arrays: bucket of the window, holding position, and
    whether the row's pod was busy; the units of each holding."""

    k: npt.NDArray[np.int32]
    holding: npt.NDArray[np.int32]
    unit: Floats
    """Per holding: what one of its rows counts in units of its resource (a MIG slice is one
    unit of its MIG resource; a GPU its fraction)."""
    busy: npt.NDArray[np.bool_]
    nb: int
    starts: npt.NDArray[np.intp] | None = None
    """Where each holding's rows start (and, last, where they end), where the rows are
    grouped by holding (a built inventory's are); None where they are not."""

    def of(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp] | None:
        """The positions, in row order, of the rows whose holding `mask` marks, read from
        `starts` (only those rows are touched); None where every row is better tested (the
        rows are not grouped by holding, or the mask marks more than an eighth of them: their
        positions would take more memory than a mask over every row)."""
        import numpy as np

        if self.starts is None:
            return None
        which = np.flatnonzero(mask)
        first, lengths = self.starts[which], self.starts[which + 1] - self.starts[which]
        ends = np.cumsum(lengths)
        if len(ends) and ends[-1] > len(self.k) // 8:
            return None
        out: npt.NDArray[np.intp] = np.repeat(first - (ends - lengths), lengths)
        out += np.arange(len(out))
        return out


def _rows(inv: Inventory, rows: HeldRows, pods: Holders, ph: PodHours, idle: float) -> _Rows:
    """Each held hourly row's window bucket, holding, and whether its pod was busy in that
    hour, worked out a slice of rows at a time into arrays of 4-byte integers (they are as long
    as the held hourly rows)."""
    import numpy as np

    from gpuaudit.inventory.arrays import KeyTable, slices
    from gpuaudit.inventory.derived import bucket_hours, edge

    # Each bucket's hour of the window, and which lie in it.
    hour, nb = bucket_hours(inv, rows)
    hour_in = (hour >= 0) & (hour < nb)
    h = inv.holdings
    prof = h[C.MIG_PROFILE].fillna("").astype(str).to_numpy()
    unit = np.where(prof == "", h[C.FRACTION].to_numpy(dtype="float64"), 1.0)
    if len(rows.rows) == 0 or nb == 0 or len(rows.bucket_ts) == 0:
        empty = np.zeros(0, dtype=np.int32)
        return _Rows(empty, empty, unit, np.zeros(0, dtype=bool), nb)
    # The pod's mean activity in the bucket (`PodHours`: one entry per pod and bucket).
    nbb = max(len(ph.bucket_ts), 1)
    table = KeyTable.of_pairs(ph.pod, ph.bucket, nbb, ph.act, len(pods.namespace) * nbb)
    parts = slices(len(rows.rows))

    def inside(sl: slice) -> npt.NDArray[np.bool_]:
        b = rows.bucket[sl]
        ok: npt.NDArray[np.bool_] = (b >= 0) & hour_in[np.clip(b, 0, None)]
        return ok

    n = sum(int(np.count_nonzero(inside(sl))) for sl in parts)
    k = np.empty(n, dtype=np.int32)
    holding = np.empty(n, dtype=np.int32)
    busy = np.empty(n, dtype=bool)
    at = 0
    for sl in parts:
        keep = inside(sl)
        b = rows.bucket[sl][keep]
        hp = rows.holding[sl][keep]
        end = at + len(b)
        k[at:end] = hour[b]
        holding[at:end] = hp
        pod = pods.of_holding[hp].astype(np.int64)
        act = table.get(np.where(pod >= 0, pod * nbb + b, -1))
        with np.errstate(invalid="ignore"):
            busy[at:end] = act >= edge(idle)  # a mean of sums: at the threshold's edge
        at = end
    starts = None
    if all(bool(np.all(np.diff(holding[sl.start : sl.stop + 1]) >= 0)) for sl in parts):
        starts = np.searchsorted(holding, np.arange(len(h) + 1)).astype(np.intp)
    return _Rows(k, holding, unit, busy, nb, starts)


def _intervals(
    adms: list[Admission], flavor: str, resource: str, start: float, end: float
) -> list[tuple[float, float, float]]:
    """(from, to, quantity) of Workloads admitted under the flavor's resource, clipped to the
    window."""
    out = []
    for a in adms:
        qty = sum(v for f, r, v in a.usage if (f, r) == (flavor, resource))
        if qty <= 0 or a.reserved_at is None:
            continue
        lo = max(a.reserved_at, start)
        hi = min(a.finished_at if a.finished_at is not None else end, end)
        if hi > lo:
            out.append((lo, hi, qty))
    return out


def _peak(intervals: list[tuple[float, float, float]]) -> float:
    """The largest total quantity admitted at one instant (an end before a start at a tie)."""
    events = sorted([(a, 1, q) for a, _, q in intervals] + [(b, 0, -q) for _, b, q in intervals])
    run = best = 0.0
    for _, _, q in events:
        run += q
        best = max(best, run)
    return best


def _peak_by_bucket(
    intervals: list[tuple[float, float, float]], start: float, step: float, nb: int
) -> list[float]:
    """Per hour: the largest total quantity admitted at one instant of it (an interval holds
    from its start to just before its end; an end before a start at a tie)."""
    events = sorted([(a, 1, q) for a, _, q in intervals] + [(b, 0, -q) for _, b, q in intervals])
    out = [0.0] * nb
    run, e, k = 0.0, 0, 0
    while k < nb:
        lo, hi = start + k * step, start + (k + 1) * step
        while e < len(events) and events[e][0] <= lo:
            run += events[e][2]
            e += 1
        if e == len(events) or events[e][0] >= hi:
            # No event inside: the hours up to the next event's hold what holds now.
            upto = (
                nb if e == len(events) else max(k + 1, min(nb, int((events[e][0] - start) // step)))
            )
            out[k:upto] = [run] * (upto - k)
            k = upto
            continue
        best = run
        while e < len(events) and events[e][0] < hi:
            run += events[e][2]
            e += 1
            best = max(best, run)
        out[k] = best
        k += 1
    return out


def _by_bucket(
    intervals: list[tuple[float, float, float]], start: float, step: float, nb: int
) -> list[float]:
    """Per hour: the total of every interval that overlaps it (a bound on its peak)."""
    out = [0.0] * nb
    for lo, hi, q in intervals:
        first = max(0, int((lo - start) // step))
        last = min(nb - 1, int(-(-(hi - start) // step)) - 1)
        for i in range(first, last + 1):
            out[i] += q
    return out


class _Lookup:
    """What every quota line looks up in the holdings and the nodes, worked out once (not once
    per line: a cluster may hold tens of thousands of queues): each holding's queue, resource,
    node and namespace as numbers, each flavor's nodes, and each node's GPU product."""

    def __init__(self, inv: Inventory, qs: Queues) -> None:
        import numpy as np
        import pandas as pd

        self.inv, self.qs = inv, qs
        h = inv.holdings
        self.prof = h[C.MIG_PROFILE].fillna("").astype(str).to_numpy()
        # Each holding's queue: the queue's position, -1 for none.
        index = {(q.system, q.name): i for i, q in enumerate(qs.queues)}
        self.owner = np.array(
            [
                index.get(qs.pod_queue.get((ns, pod), ("", "")), -1)
                for ns, pod in zip(h[C.NAMESPACE].tolist(), h[C.POD].tolist(), strict=True)
            ],
            dtype=np.intp,
        )
        node_code, node_names = pd.factorize(h[C.NODE].astype(str))
        self.node_code = np.asarray(node_code, dtype=np.intp)
        self.node_of = {str(n): i for i, n in enumerate(node_names)}
        self.node_names = [str(n) for n in node_names]
        ns_code, ns_names = pd.factorize(h[C.NAMESPACE].astype(str))
        self.ns_code = np.asarray(ns_code, dtype=np.intp)
        self.ns_of = {str(n): i for i, n in enumerate(ns_names)}
        self.model = [str(m) for m in h[C.MODEL].tolist()]
        self.product_of = dict(
            zip(inv.nodes[C.NODE].astype(str), inv.nodes[C.PRODUCT].astype(str), strict=True)
        )
        self._resource: dict[str, npt.NDArray[np.bool_]] = {}
        self._flavor: dict[tuple[str, str], _Flavor] = {}
        self._unit: dict[tuple[str, str, str], float] = {}

    def resource(self, res: str) -> npt.NDArray[np.bool_]:
        """The holdings of a GPU resource: whole GPUs and their shares, or one MIG profile."""
        if res not in self._resource:
            p = mig_profile(res)
            self._resource[res] = self.prof == p if p else (self.prof == "") & (res == GPU)
        return self._resource[res]

    def flavor(self, q: Queue, quota: Quota) -> _Flavor:
        """The nodes of the quota line's flavor (Volcano: every node) and the holdings on them."""
        import numpy as np

        key = (q.system, quota.flavor)
        if key not in self._flavor:
            nodes = self.qs.flavor_nodes(quota.flavor) if q.system == KUEUE else self.qs.nodes
            if nodes is None:
                on = np.ones(len(self.node_code), dtype=bool)
            else:
                codes = [self.node_of[n.name] for n in nodes if n.name in self.node_of]
                on = np.isin(self.node_code, codes)
            self._flavor[key] = _Flavor(nodes, on)
        return self._flavor[key]

    def in_namespaces(self, namespaces: tuple[str, ...]) -> npt.NDArray[np.bool_]:
        import numpy as np

        return np.isin(self.ns_code, [self.ns_of[n] for n in namespaces if n in self.ns_of])

    def unit_gpus(self, q: Queue, quota: Quota, f: _Flavor) -> float:
        """Whole-GPU equivalents of one unit: 1 for `nvidia.com/gpu`, a slice's share of its
        GPU (by the model DCGM reports most for that profile on the flavor's nodes) for MIG."""
        profile = mig_profile(quota.resource)
        if not profile:
            return 1.0
        key = (q.system, quota.flavor, profile)
        if key not in self._unit:
            import numpy as np

            seen = np.flatnonzero((self.prof == profile) & f.on)
            models = Counter(self.model[i] for i in seen.tolist())
            model = models.most_common(1)[0][0] if models else ""
            self._unit[key] = mig.slice_fraction(profile, model)
        return self._unit[key]

    def product(self, nodes: tuple[QueueNode, ...] | None, mine: npt.NDArray[np.bool_]) -> str:
        """The most common GPU product of `nodes` (by their GPUs), else of the nodes the
        queue's pods held GPUs on, else of every node; empty when no node names one."""
        import numpy as np

        of_flavor: Counter[str] = Counter()
        for n in nodes or ():
            of_flavor[n.labels.get(PRODUCT_LABEL, "")] += int(sum(n.allocatable.values()) or 1)
        used = Counter(
            self.product_of.get(self.node_names[c], "")
            for c in self.node_code[np.flatnonzero(mine)].tolist()
        )
        for count in (of_flavor, used, Counter(self.product_of.values())):
            count.pop("", None)
            if count:
                return count.most_common(1)[0][0]
        return ""


@dataclass(frozen=True)
class _Flavor:
    nodes: tuple[QueueNode, ...] | None
    """The flavor's nodes; None when unknown (the ResourceFlavors were not read)."""
    on: npt.NDArray[np.bool_]
    """The holdings on those nodes (every holding where they are unknown)."""


@dataclass(frozen=True)
class _Held:
    """Per hour of the window, in units of the resource: what the queue's pods held on the
    flavor's nodes, the busy part of it, and what pods of its namespaces held there."""

    held: Floats
    busy: Floats
    in_namespaces: Floats
    mine: npt.NDArray[np.bool_]
    """The holdings of the queue's pods on the flavor's nodes."""


def _held(
    r: _Rows,
    base: npt.NDArray[np.bool_],
    queue: npt.NDArray[np.bool_],
    namespaces: npt.NDArray[np.bool_],
) -> _Held:
    """`base`: the holdings of the line's resource on the flavor's nodes; `queue`: those of
    the queue's pods; `namespaces`: those of pods of its namespaces."""
    import numpy as np

    mine = base & queue
    in_ns = base & namespaces

    def per_bucket(mask: npt.NDArray[np.bool_], busy: bool = False) -> Floats:
        rows = r.of(mask)
        if rows is None:
            sel = mask[r.holding] & r.busy if busy else mask[r.holding]
            hold, k = r.holding[sel], r.k[sel]
        else:  # the same rows, in the same order, found without testing every row
            hold, k = r.holding[rows], r.k[rows]
            if busy:
                hit = r.busy[rows]
                hold, k = hold[hit], k[hit]
        out: Floats = np.bincount(k, weights=r.unit[hold], minlength=r.nb).astype(float)
        return out

    return _Held(per_bucket(mine), per_bucket(mine, True), per_bucket(in_ns), mine)


@dataclass(frozen=True)
class _Admitted:
    """What a queue admitted under one quota line, in units of the resource."""

    by_bucket: list[float]
    unit_hours: float
    now: float
    peak: float
    peaks: list[float]
    """Per hour: the most admitted at one instant of it."""


def _admitted(
    inv: Inventory, q: Queue, quota: Quota, adms: list[Admission], held: Floats, nb: int
) -> _Admitted:
    start, step, end = float(inv.window_start), float(inv.step_s), float(inv.window_end)
    if q.system == KUEUE:
        spans = _intervals(adms, quota.flavor, quota.resource, start, end)
        # The ClusterQueue's own count of what is reserved now covers Workloads the scan did
        # not read (other namespaces): a floor for what was admitted.
        floor = q.reserved.get((quota.flavor, quota.resource), 0.0)
        now = max(sum(v for _, hi, v in spans if hi >= end), floor)
        peaks = _peak_by_bucket(spans, start, step, nb)
        if peaks:
            peaks[-1] = max(peaks[-1], now)
        return _Admitted(
            _by_bucket(spans, start, step, nb),
            sum((hi - lo) / 3600.0 * v for lo, hi, v in spans),
            now,
            max(_peak(spans), now),
            peaks,
        )
    now = q.allocated.get(quota.resource, 0.0)
    peaks = held.tolist()
    if peaks:
        peaks[-1] = max(peaks[-1], now)
    return _Admitted(
        held.tolist(),
        float(held.sum()) * step / 3600.0,
        now,
        max(float(held.max(initial=0.0)), now),
        peaks,
    )


def _line(
    inv: Inventory,
    look: _Lookup,
    q: Queue,
    quota: Quota,
    r: _Rows,
    queue: npt.NDArray[np.bool_],
) -> QueueUsage:
    """`queue`: the holdings of the queue's pods."""
    import numpy as np

    qs = look.qs
    flavor = look.flavor(q, quota)
    nodes = flavor.nodes
    namespaces = qs.namespaces(q)
    held = _held(
        r, look.resource(quota.resource) & flavor.on, queue, look.in_namespaces(namespaces)
    )
    adms = list(qs.admitted(q))
    adm = _admitted(inv, q, quota, adms, held.held, r.nb)
    unit = look.unit_gpus(q, quota, flavor)
    step = float(inv.step_s)
    use = np.maximum(
        np.maximum(np.asarray(adm.by_bucket, dtype="float64"), held.held), held.in_namespaces
    )
    pending = tuple(
        Pending(a.namespace, a.name, quota.resource, qty, a.pending_since)
        for a in adms
        if a.pending_since is not None
        for res, qty in a.requests
        if res == quota.resource and qty > 0
    )
    schedulable = [n for n in nodes if not n.cordoned] if nodes is not None else None
    return QueueUsage(
        system=q.system,
        kind=q.kind,
        queue=q.name,
        cohort=q.cohort,
        flavor=quota.flavor,
        resource=quota.resource,
        quota=quota.nominal if q.system == KUEUE else (quota.nominal or quota.guarantee),
        guarantee=quota.guarantee,
        borrowing_limit=quota.borrowing_limit,
        lending_limit=quota.lending_limit,
        # A cohort with nobody else in it lends to nobody: its quota is fenced off as if alone.
        fenced=q.fenced(quota) if q.system != KUEUE or qs.lends(q) else quota.nominal,
        flavor_missing=bool(quota.flavor) and qs.flavors_read and quota.flavor not in qs.flavors,
        allocatable=(
            sum(n.allocatable.get(quota.resource, 0.0) for n in schedulable)
            if schedulable is not None
            else None
        ),
        flavor_nodes=len(schedulable) if schedulable is not None else None,
        unit_gpus=unit,
        product=look.product(nodes if q.system == KUEUE else None, held.mine),
        hours=inv.window_hours,
        admitted_gpu_hours=adm.unit_hours * unit,
        held_gpu_hours=float(held.held.sum()) * step / 3600.0 * unit,
        busy_gpu_hours=float(held.busy.sum()) * step / 3600.0 * unit,
        peak_admitted=adm.peak,
        admitted_now=adm.now,
        peak_held=float(held.held.max(initial=0.0)),
        peak_namespaces=float(held.in_namespaces.max(initial=0.0)),
        namespaces=namespaces,
        use_by_bucket=tuple(float(v) for v in use),
        bucket_start=float(inv.window_start) + step,
        step_s=step,
        pending=pending,
        unaudited=q.unaudited,
        admitted_by_bucket=tuple(float(v) for v in adm.peaks),
    )


def usage(
    inv: Inventory, rows: HeldRows, pods: Holders, ph: PodHours, idle: float
) -> tuple[QueueUsage, ...]:
    """Every GPU quota line of every queue (`inv.queues`) over the window, in queue order;
    busy where a pod's hourly mean activity reaches `idle`."""

    qs = inv.queues
    if not qs.queues:
        return ()
    r = _rows(inv, rows, pods, ph, idle)
    look = _Lookup(inv, qs)
    out: list[QueueUsage] = []
    for i, q in enumerate(qs.queues):
        mine = look.owner == i
        out.extend(_line(inv, look, q, quota, r, mine) for quota in q.quotas)
    return tuple(out)
