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
from collections.abc import Mapping
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


def _unit_gpus(inv: Inventory, resource: str, nodes: set[str] | None) -> float:
    """Whole-GPU equivalents of one unit: 1 for `nvidia.com/gpu`, a slice's share of its
    GPU (by the model DCGM reports most for that profile on those nodes) for MIG."""
    profile = mig_profile(resource)
    if not profile:
        return 1.0
    h = inv.holdings
    seen = h[h[C.MIG_PROFILE] == profile]
    if nodes is not None:
        seen = seen[seen[C.NODE].isin(sorted(nodes))]
    models = Counter(str(m) for m in seen[C.MODEL].tolist())
    model = models.most_common(1)[0][0] if models else ""
    return mig.slice_fraction(profile, model)


def _product(
    inv: Inventory, nodes: tuple[QueueNode, ...] | None, mine: npt.NDArray[np.bool_]
) -> str:
    """The most common GPU product of `nodes` (by their GPUs), else of the nodes the queue's
    pods held GPUs on, else of every node; empty when no node names one."""
    by_node = dict(
        zip(inv.nodes[C.NODE].astype(str), inv.nodes[C.PRODUCT].astype(str), strict=True)
    )
    of_flavor: Counter[str] = Counter()
    for n in nodes or ():
        of_flavor[n.labels.get(PRODUCT_LABEL, "")] += int(sum(n.allocatable.values()) or 1)
    used = Counter(by_node.get(str(n), "") for n in inv.holdings[C.NODE][mine].tolist())
    for count in (of_flavor, used, Counter(by_node.values())):
        count.pop("", None)
        if count:
            return count.most_common(1)[0][0]
    return ""


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
    inv: Inventory,
    r: _Rows,
    masks: Mapping[str, npt.NDArray[np.bool_]],
    key: tuple[str, str],
    names: set[str] | None,
    namespaces: tuple[str, ...],
) -> _Held:
    """`key`: the resource's and the queue's mask names; `names`: the flavor's nodes (None:
    every node)."""
    import numpy as np

    h = inv.holdings
    node_ok = (
        h[C.NODE].isin(sorted(names)).to_numpy(dtype=bool)
        if names is not None
        else np.ones(len(h), dtype=bool)
    )
    base = masks[key[0]] & node_ok
    mine = base & masks[key[1]]
    in_ns = base & h[C.NAMESPACE].isin(list(namespaces)).to_numpy(dtype=bool)

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
        return _Admitted(
            _by_bucket(spans, start, step, nb),
            sum((hi - lo) / 3600.0 * v for lo, hi, v in spans),
            now,
            max(_peak(spans), now),
        )
    now = q.allocated.get(quota.resource, 0.0)
    return _Admitted(
        held.tolist(),
        float(held.sum()) * step / 3600.0,
        now,
        max(float(held.max(initial=0.0)), now),
    )


def _line(
    inv: Inventory,
    qs: Queues,
    q: Queue,
    quota: Quota,
    r: _Rows,
    masks: Mapping[str, npt.NDArray[np.bool_]],
) -> QueueUsage:
    import numpy as np

    nodes = qs.flavor_nodes(quota.flavor) if q.system == KUEUE else qs.nodes
    names = {n.name for n in nodes} if nodes is not None else None
    namespaces = qs.namespaces(q)
    key = ("res:" + quota.resource, f"queue:{q.system}/{q.name}")
    held = _held(inv, r, masks, key, names, namespaces)
    adms = [a for a in qs.admissions if (a.system, a.queue) == (q.system, q.name)]
    adm = _admitted(inv, q, quota, adms, held.held, r.nb)
    unit = _unit_gpus(inv, quota.resource, names)
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
        product=_product(inv, nodes if q.system == KUEUE else None, held.mine),
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
    )


def usage(
    inv: Inventory, rows: HeldRows, pods: Holders, ph: PodHours, idle: float
) -> tuple[QueueUsage, ...]:
    """Every GPU quota line of every queue (`inv.queues`) over the window, in queue order;
    busy where a pod's hourly mean activity reaches `idle`."""
    import numpy as np

    qs = inv.queues
    if not qs.queues:
        return ()
    r = _rows(inv, rows, pods, ph, idle)
    h = inv.holdings
    prof = h[C.MIG_PROFILE].fillna("").astype(str).to_numpy()
    # Each holding's queue, looked up once: the queue's position, -1 for none.
    index = {(q.system, q.name): i for i, q in enumerate(qs.queues)}
    owner = np.array(
        [
            index.get(qs.pod_queue.get((ns, pod), ("", "")), -1)
            for ns, pod in zip(h[C.NAMESPACE].tolist(), h[C.POD].tolist(), strict=True)
        ],
        dtype=np.intp,
    )
    masks: dict[str, npt.NDArray[np.bool_]] = {}
    for i, q in enumerate(qs.queues):
        for quota in q.quotas:
            res = quota.resource
            if "res:" + res not in masks:
                p = mig_profile(res)
                masks["res:" + res] = prof == p if p else (prof == "") & (res == GPU)
        masks[f"queue:{q.system}/{q.name}"] = owner == i
    return tuple(_line(inv, qs, q, quota, r, masks) for q in qs.queues for quota in q.quotas)
