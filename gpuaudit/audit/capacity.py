"""The capacity plan: how much hardware the window's work needed.

Per GPU product (`nvidia.com/gpu.product`, else the DCGM model), from the hourly history: the
GPUs held and the GPUs busy in each hour (peak, nearest-rank p95 and mean over the window's
hours), the nodes that ran GPU pods against the fewest nodes the peak hour's holdings fit on
when packed, and the same after releasing the idle reservations the audit found (GPU001's
idle pods, GPU002's idle tails). Every assumption is stated in `ASSUMPTIONS` and carried in
the report.

The packer (`pack_ffd`) takes each schedulable node's room and, per item, the nodes it may use
as the scheduler feasibility model decides (`gpuaudit.inventory.feasibility`: selectors,
required affinity, taints, allocatable of the resource asked for), with whole-node gang
members a node each.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import TYPE_CHECKING, Any

from gpuaudit.checks.base import short_model
from gpuaudit.inventory import Capability, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import KAI_METHODS, Method
from gpuaudit.inventory.derived import WindowHours
from gpuaudit.inventory.feasibility import GPU, NodeFacts, PodKey
from gpuaudit.inventory.prom import cluster_of
from gpuaudit.inventory.queue_usage import QueueUsage

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.intp]
    Floats = npt.NDArray[np.float64]

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
COUNT_LABEL = "nvidia.com/gpu.count"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_PREFIX = "nvidia.com/mig-"
SHARED_GPU = "nvidia.com/gpu.shared"
RELEASE_IDLE = "release-idle"
WHAT_IFS = (RELEASE_IDLE,)
"""The scenarios `--what-if` may ask for: `release-idle` shows the plan after releasing the
idle reservations the audit found."""
EPS = 1e-9

ASSUMPTIONS = (
    "Hourly values: each hour of the window is one value per GPU product; hours in which DCGM "
    "reported none of the product's GPUs are left out (counted as hours without data); a "
    "product DCGM never reported has the hours in which the Kubernetes API shows some of its "
    "GPUs held.",
    "GPUs held: every GPU DCGM shows held by a pod and every GPU the Kubernetes API shows a "
    "pod holding where no DCGM series names the pod (a node without an exporter, a "
    "DRA claim no series could be joined to, a pod no series names), the latter in every "
    "hour the pod ran in (from the hour it started in to the hour it ended in, or the "
    "window's end) but those the Kubernetes-side join gave it its devices in, on the product "
    "of its node's "
    "nvidia.com/gpu.product label (else the model DCGM reports there, else unknown). A pod's "
    "whole GPUs count one each; a MIG-partitioned GPU counts as one GPU in an hour when any of "
    "its slices is held, whatever their share of it (it cannot go whole to other work, and it "
    "moves whole); MIG slices held without DCGM series first fill the room the node's MIG "
    "GPUs DCGM shows held leave (which GPU they sit on is not known), and the rest counts as "
    "the fewest GPUs its shares fit on (their sum on the node, rounded up); a GPU KAI "
    "Scheduler reserves for fraction pods counts as one GPU in an hour when any of its pods "
    "holds it; a GPU shared by time-slicing (node label "
    "nvidia.com/gpu.replicas = R above 1) counts 1/R for each pod holding it.",
    "GPUs busy: held GPUs in an hour whose mean engine activity reaches the idle threshold: a "
    "pod's mean over its GPUs on one node, or a MIG-partitioned GPU's mean over its held "
    "slices weighted by their size. GPUs held without DCGM series, and GPUs whose series have "
    "no activity sample in the hour, are of unknown activity: counted as held, neither busy "
    "nor idle.",
    "Peak, p95 and mean: the largest hourly value, the nearest-rank 95th percentile (the "
    "ceil(0.95 n)-th smallest of n hourly values) and their average.",
    "Nodes that ran GPU pods: nodes on which a pod held a GPU in some hour of the window "
    "(DCGM), or on which the Kubernetes API shows a running pod holding GPUs without DCGM "
    "series.",
    "Fewest nodes at the peak: the holdings of the hour with the most GPUs held, packed first "
    "fit decreasing (largest first, each into the first opened node that admits it and has "
    "room, else the roomiest unused node that does: among equals, the one the most of the "
    "hour's units may use, or for a whole-node gang member the fewest); then each unit "
    "left without a place (the work ran, so a place exists) takes the place of one unit "
    "moved out of its way: over the opened nodes it may use, in the order they were opened, "
    "the first unit whose going leaves it room and that fits another opened node it may "
    "use, else an unused one (opened for it); a unit that would need more than one move "
    "stays unplaced. A pod's GPUs stay on one node, a MIG-partitioned GPU moves whole, and "
    "work stays on its own GPU product.",
    "Where work may go: as the scheduler's filters decide at the window's end (node "
    "selector, required node affinity, taints against tolerations, allocatable of each "
    "resource the pod requests: nvidia.com/gpu, nvidia.com/mig-<profile>, shared replicas); "
    "a MIG GPU only onto a MIG node that admits every pod holding a slice of it, with its "
    "slices assumed available there; shared replicas only onto nodes shared as many ways; a "
    "pod whose spec Kubernetes did not return onto any node of its product offering GPUs the "
    "same way; in a scan of every cluster, only onto nodes of its own cluster; pod affinity, "
    "topology spread, volumes and DRA claims are not modelled.",
    "A node's room: allocatable nvidia.com/gpu (or nvidia.com/gpu.shared) over its "
    "nvidia.com/gpu.replicas (on a node HAMi shares, over its GPUs' split count: allocatable "
    "over the GPUs its annotation hami.io/node-nvidia-register registers); for a MIG node, "
    "and a node that advertises neither (its GPUs go out through DRA claims), its "
    "nvidia.com/gpu.count label, else the GPUs DCGM saw on "
    "it; for a node Kubernetes did not list, the GPUs DCGM saw, and it refuses no pod. "
    "Cordoned nodes offer no room.",
    "Whole-node gangs: members of one gang that each held every GPU of their node at the "
    "peak hour get a node each.",
    "After releasing idle reservations: every pod GPU001 reported (after waivers) holds "
    "nothing for the whole window, and every pod GPU002 reported holds nothing from the "
    "start of its idle tail; a GPU KAI Scheduler shares stays reserved whole while a "
    "fraction pod of its group is left, and goes with its reservation pod when every "
    "fraction pod that held it is released; the figures are computed again. GPU003's "
    "part-time "
    "reservations are not released. Nodes freed are the difference in the fewest nodes at "
    "the peak; their cost is their GPUs x the window's hours x the price per GPU-hour of "
    "the product.",
)
"""What the capacity figures assume, stated in every report."""


@dataclass(frozen=True)
class Stat:
    """Peak, nearest-rank p95 and mean of hourly values."""

    peak: float
    p95: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        """Of `values` (zeros when there are none)."""
        if not values:
            return cls(0.0, 0.0, 0.0)
        ordered = sorted(values)
        rank = max(1, math.ceil(0.95 * len(ordered) - EPS))
        return cls(ordered[-1], ordered[rank - 1], sum(ordered) / len(ordered))


# ---- the packer ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """Something to place: a pod's GPUs on one node, or one MIG-partitioned GPU."""

    key: str
    size: float
    """GPUs (a shared replica counts its share)."""
    nodes: frozenset[str] | None = None
    """The nodes it may go on (a feasibility model's answer); None: any node."""
    whole_node: bool = False
    """Whether it needs a node to itself (a whole-node gang member)."""


@dataclass(frozen=True)
class Packing:
    """Where the items went."""

    used: tuple[str, ...]
    """Nodes used, in the order they were opened."""
    placed: Mapping[str, str]
    """Item key -> node."""
    unplaced: tuple[Item, ...]
    """Items no node had room for, even after moving one item out of their way."""


def pack_ffd(items: Sequence[Item], room: Mapping[str, float]) -> Packing:
    """Pack `items` into nodes of `room` (GPUs per node) first fit decreasing: largest first
    (ties by key), each into the first node opened so far that may take it and has room, else
    into the roomiest unused node that may take it. A `whole_node` item opens a node of its
    own and closes it. Among equally roomy unused nodes, an item that shares its node opens
    the one the most items may use (so that a node few may use, such as a tainted one, is not
    opened half empty while others would do), a `whole_node` item the one the fewest may use
    (so that it takes no node others need); then by name.

    Then a repair, for each item left unplaced (in the order above; not a `whole_node` one):
    into the first opened node it may use that has room now (an earlier repair may have left
    some); else it takes the place of one item moved out of its way: over the opened nodes it
    may use (not closed), in the order they were opened, and their items in the order they
    went there, the first item whose going leaves it room and that may go to another opened
    node with room (not closed; the first opened); only where none may, the first that
    may go to an unused node, opened for it (the roomiest it may use, as above). An item
    still without a place is left unplaced (no node can take it, or it needs more than one
    move). The repair runs only for the unplaced items, which are few, each in the opened
    nodes plus their items plus, per distinct node set and size of the items it may move,
    one pass over the opened nodes and one over the unused ones: never items times nodes.

    Items of one spec share their set of nodes, so the search runs per distinct set: the
    first opened node of the set with room is found in a max tree over the set's opened
    nodes, and the roomiest unused node is the next unopened one in one ordering of the set
    (an unused node's room never changes), so that a peak hour of 100,000 GPUs packs in the
    items times a logarithm of the nodes, not items times nodes."""
    # Items of one spec share one set object: count them by object, then merge the objects
    # that hold equal sets (comparing two large sets costs their size, so never per item).
    per_object = Counter(id(i.nodes) for i in items)
    objects = {id(i.nodes): i.nodes for i in items}
    same: dict[frozenset[str] | None, frozenset[str] | None] = {}
    counts: dict[frozenset[str] | None, int] = {}
    for oid, nodes in objects.items():
        canon = same.setdefault(nodes, nodes)
        counts[canon] = counts.get(canon, 0) + per_object[oid]
    usable = dict.fromkeys(room, 0)
    for nodes, n_items in counts.items():
        for n in room if nodes is None else nodes:
            if n in usable:
                usable[n] += n_items
    left = dict(room)
    sets = {nodes: _NodeSet(nodes, room, usable, n_items) for nodes, n_items in counts.items()}
    set_of = {oid: sets[same[nodes]] for oid, nodes in objects.items()}
    member_of: dict[str, list[_NodeSet]] = {}
    for ns in sets.values():
        for n in ns.members:
            member_of.setdefault(n, []).append(ns)
    opened: list[str] = []
    is_open: set[str] = set()
    placed: dict[str, str] = {}
    unplaced: list[Item] = []
    on: dict[str, list[Item]] = {}
    for item in sorted(items, key=lambda i: (-i.size, i.key)):
        ns = set_of[id(item.nodes)]
        ns.remaining -= 1
        need = item.size - EPS
        node = None if item.whole_node else ns.first_open_with(need)
        if node is None:
            node = ns.roomiest_unused(item.whole_node, is_open, left, need)
            if node is None:
                unplaced.append(item)
                continue
            opened.append(node)
            is_open.add(node)
            for other in member_of.get(node, ()):
                other.opened(node)
        left[node] -= item.size
        value = -math.inf if item.whole_node or left[node] != left[node] else left[node]
        for other in member_of.get(node, ()):
            other.set_room(node, value)
        placed[item.key] = node
        on.setdefault(node, []).append(item)
    if unplaced:
        state = _Placed(opened, is_open, placed, on, left)
        spare = sorted(
            (n for n in room if room[n] == room[n] and n not in is_open),
            key=lambda n: (room[n], usable[n], n),
            reverse=True,
        )
        unplaced = [i for i in unplaced if not _repair(i, state, spare)]
    return Packing(tuple(opened), placed, tuple(unplaced))


@dataclass
class _Placed:
    """A packing under way, for `_repair`: the nodes opened (in order, and as a set), where
    each item went, the items on each node in the order they went there, each node's room."""

    opened: list[str]
    is_open: set[str]
    placed: dict[str, str]
    on: dict[str, list[Item]]
    left: dict[str, float]

    def put(self, item: Item, node: str) -> None:
        if node not in self.is_open:
            self.opened.append(node)
            self.is_open.add(node)
        self.left[node] -= item.size
        self.placed[item.key] = node
        self.on.setdefault(node, []).append(item)


def _may(item: Item, node: str) -> bool:
    return item.nodes is None or node in item.nodes


def _repair(item: Item, s: _Placed, spare: Sequence[str]) -> bool:
    """Place `item`, which first fit decreasing left unplaced, by moving one item out of its
    way (see `pack_ffd`); False when no such move exists (nothing changes then). `spare`: the
    unused nodes, roomiest first, as first fit decreasing opens them for an item that shares
    its node (some may have been opened since)."""
    if item.whole_node:
        return False
    need = item.size - EPS
    # An earlier repair may have left room on a node opened before.
    for node in s.opened:
        if _may(item, node) and s.left[node] >= need and _open(s, node):
            s.put(item, node)
            return True
    # Where an item of a node set and size may go: the first two opened nodes (one of them is
    # not the node it leaves), and the roomiest unused one; found once per set and size.
    found: dict[tuple[int, float, bool], list[str]] = {}

    def targets(m: Item, unused: bool) -> list[str]:
        key = (id(m.nodes), m.size, unused)
        if key not in found:
            want = m.size - EPS
            if unused:
                first = next((n for n in spare if n not in s.is_open and _may(m, n)), None)
                found[key] = [first] if first is not None and s.left[first] >= want else []
            else:
                ok = (n for n in s.opened if _may(m, n) and s.left[n] >= want and _open(s, n))
                found[key] = list(islice(ok, 2))
        return found[key]

    for unused in (False, True):
        for node in s.opened:
            if not (_may(item, node) and _open(s, node)):
                continue
            for m in s.on.get(node, ()):
                if not s.left[node] + m.size >= need:
                    continue
                to = next((n for n in targets(m, unused) if n != node), None)
                if to is None:
                    continue
                s.on[node].remove(m)
                s.left[node] += m.size
                s.put(m, to)
                s.put(item, node)
                return True
    return False


def _open(s: _Placed, node: str) -> bool:
    """Whether `node`, opened, takes more items (no whole-node item closed it)."""
    return not any(o.whole_node for o in s.on.get(node, ()))


class _NodeSet:
    """The nodes of `room` a set of items may use (`Item.nodes`; None: all), for `pack_ffd`:
    its unused nodes in the order each kind of item opens them, and its opened nodes' room in
    a max tree by the order they were opened (a closed node holds minus infinity). A node
    whose room is not a number never takes an item and is left out."""

    def __init__(
        self,
        nodes: frozenset[str] | None,
        room: Mapping[str, float],
        usable: Mapping[str, int],
        n_items: int,
    ) -> None:
        pool = room if nodes is None else [n for n in nodes if n in room]
        self.members = [n for n in pool if room[n] == room[n]]
        self.remaining = n_items
        """Items of the set not packed yet: once none is left, its tree is not kept."""
        self._room, self._usable = room, usable
        self._order: dict[bool, tuple[list[str], int]] = {}
        self._pos: dict[str, int] = {}
        self._by_pos: list[str] = []
        size = 1
        while size < max(len(self.members), 1):
            size *= 2
        self._size = size
        self._max = [-math.inf] * (2 * size)

    def roomiest_unused(
        self, whole_node: bool, is_open: set[str], left: Mapping[str, float], need: float
    ) -> str | None:
        """The roomiest unused node of the set (see `pack_ffd` for ties), when it has room
        for `need`; None otherwise (no unused node has more)."""
        if whole_node not in self._order:
            sign = -1 if whole_node else 1
            room, usable = self._room, self._usable
            key = {n: (room[n], sign * usable[n], n) for n in self.members}
            self._order[whole_node] = (sorted(self.members, key=key.__getitem__, reverse=True), 0)
        order, at = self._order[whole_node]
        while at < len(order) and order[at] in is_open:
            at += 1
        self._order[whole_node] = (order, at)
        if at < len(order) and left[order[at]] >= need:
            return order[at]
        return None

    def opened(self, node: str) -> None:
        """`node`, of this set, was opened: it takes the next place in the tree."""
        if self.remaining > 0:
            self._pos[node] = len(self._by_pos)
            self._by_pos.append(node)

    def set_room(self, node: str, value: float) -> None:
        """An opened node's room is now `value` (minus infinity: closed)."""
        pos = self._pos.get(node)
        if pos is None or self.remaining <= 0:
            return
        i = pos + self._size
        m = self._max
        m[i] = value
        i //= 2
        while i:
            a, b = m[2 * i], m[2 * i + 1]
            m[i] = a if a >= b else b
            i //= 2

    def first_open_with(self, need: float) -> str | None:
        """The first opened node of the set, in the order they were opened, with at least
        `need` room and not closed; None when none has."""
        m = self._max
        if not m[1] >= need:
            return None
        i = 1
        while i < self._size:
            i *= 2
            if not m[i] >= need:
                i += 1
        return self._by_pos[i - self._size]


# ---- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProductPlan:
    """The capacity figures of one GPU product."""

    product: str
    nodes: int
    """Nodes of the product (Kubernetes nodes, and nodes only DCGM saw)."""
    gpus: float
    """Their room in GPUs (see `ASSUMPTIONS`)."""
    hours_with_data: int
    gpus_held: Stat
    gpus_busy: Stat
    nodes_ran_gpu_pods: int
    min_nodes_at_peak: int
    peak_hour: float | None
    """End of the hour with the most GPUs held (unix seconds); None without data."""
    unplaced_gpus: float
    """GPUs of the peak hour no node had room for (counted in no node)."""
    nodes_used: tuple[str, ...] = ()
    """The nodes the packing used."""
    gpus_of_nodes_used: float = 0.0
    hour_ends: tuple[float, ...] = ()
    held_by_hour: tuple[float | None, ...] = ()
    """GPUs held per hour of the window; None for an hour without data."""
    busy_by_hour: tuple[float | None, ...] = ()
    nodes_cordoned: int = 0
    """Nodes of the product cordoned at the window's end: no room for the packer."""
    nodes_unlisted: int = 0
    """Nodes only DCGM saw (Kubernetes did not list them)."""
    units_without_spec: int = 0
    """Peak-hour units holding a pod whose spec Kubernetes did not return (placed on any node
    of the product that offers GPUs the same way)."""
    whole_node_units: int = 0
    """Peak-hour units packed a node each, as members of a whole-node gang."""
    gpus_without_dcgm: Stat = Stat(0.0, 0.0, 0.0)
    """GPUs held per hour that the Kubernetes API shows and no DCGM series measures (part of
    `gpus_held`; see `ApiHolding`)."""
    gpus_activity_unknown: Stat = Stat(0.0, 0.0, 0.0)
    """GPUs held per hour whose activity is unknown (part of `gpus_held`, neither busy nor
    idle): those without DCGM series, and those whose series have no activity sample in the
    hour."""
    without_dcgm_by_hour: tuple[float | None, ...] = ()
    unknown_by_hour: tuple[float | None, ...] = ()
    nodes_without_dcgm: int = 0
    """Of `nodes_ran_gpu_pods`, the nodes from which no DCGM series came (no exporter)."""


@dataclass(frozen=True)
class Freed:
    """What releasing the idle reservations frees of one product at the peak."""

    nodes: int
    gpus: float
    cost: float


@dataclass(frozen=True)
class CapacityPlan:
    """The capacity plan of one audit (see the module docstring)."""

    window_hours: float
    idle_activity: float
    currency: str
    by_product: Mapping[str, ProductPlan]
    after_release_idle: Mapping[str, ProductPlan]
    freed: Mapping[str, Freed]
    released: tuple[Release, ...] | None
    """The idle reservations released (GPU001's and GPU002's findings after waivers); None
    when neither check ran."""
    release_note: str = ""
    """Why nothing was released, when neither check ran."""
    released_by_product: Mapping[str, int] = field(default_factory=dict)
    """How many of the released pods held GPUs of each product in what they released."""
    queues: tuple[QueueUsage, ...] = ()
    assumptions: tuple[str, ...] = ASSUMPTIONS
    short_names: Mapping[str, str] = field(default_factory=dict)
    what_if: tuple[str, ...] = ()
    """The scenarios the user asked to see (`--what-if`): the terminal, Markdown and HTML
    reports show the figures after releasing the idle reservations only with `release-idle`;
    JSON always carries them."""
    notes: tuple[str, ...] = ()
    """What the figures cannot see, a sentence each: GPUs held whose activity is unknown, per
    product; GPUs held without DCGM series that were not counted."""

    @property
    def release_idle(self) -> bool:
        """Whether `--what-if release-idle` was asked for."""
        return RELEASE_IDLE in self.what_if

    @property
    def released_pods(self) -> tuple[str, ...] | None:
        """`namespace/pod` of the released reservations, each once, sorted."""
        if self.released is None:
            return None
        return tuple(sorted({f"{r.namespace}/{r.pod}" for r in self.released}))

    def headlines(self) -> list[str]:
        """One sentence per product: the nodes the work fit on and, with `--what-if
        release-idle`, what releasing the idle reservations would have let go."""
        out = []
        for product, p in self.by_product.items():
            name = self.short_names.get(product, product)
            if p.hours_with_data == 0:
                out.append(f"{name}: no DCGM data in the window, so no capacity figures.")
                continue
            unknown = p.gpus_activity_unknown.peak
            text = (
                f"The window's work fit on {p.min_nodes_at_peak} of {p.nodes} {name} nodes at "
                f"its peak hour ({_num(p.gpus_held.peak)} GPUs held, "
                f"{_num(p.gpus_busy.peak)} busy at most"
                + (f" and up to {_num(unknown)} of unknown activity" if unknown > EPS else "")
                + f"; {p.nodes_ran_gpu_pods} nodes ran GPU pods)"
            )
            if p.unplaced_gpus > EPS:
                text += f", {_num(p.unplaced_gpus)} GPUs fitting no node"
            if self.release_idle:
                text += "; " + self._release_text(product)
            out.append(text + ".")
        return out

    def what_if_hint(self) -> str:
        """Without `--what-if release-idle`: a sentence saying what it would show; else empty."""
        pods = self.released_pods
        if self.release_idle or not pods:
            return ""
        n = len(pods)
        return (
            f"Run with --what-if release-idle to see the plan after releasing the {n} idle "
            f"reservation{'s' if n != 1 else ''} gpuaudit found."
        )

    def _release_text(self, product: str) -> str:
        if self.released is None:
            why = self.release_note or "GPU001 and GPU002 did not run"
            return f"no idle reservation was released ({why})"
        n = self.released_by_product.get(product, 0)
        if n == 0:
            return "gpuaudit found no idle reservation (GPU001, GPU002) on it to release"
        f = self.freed.get(product, Freed(0, 0.0, 0.0))
        what = f"releasing the {n} idle reservation{'s' if n != 1 else ''} gpuaudit found on it"
        if f.nodes <= 0:
            return f"{what} would have freed no node of it at the peak"
        return (
            f"{what} would have let {f.nodes} more go: {_num(f.cost)} {self.currency} "
            f"over the window"
        )


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x - round(x)) < 1e-6 or abs(x) >= 100 else f"{x:,.1f}"


# ---- computing it -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Holdings:
    """Holding-level facts the plan groups by, each an array over `inv.holdings` rows."""

    unit: Ints
    """The unit each holding belongs to: a pod's GPUs on one node, one MIG GPU, or one GPU KAI
    Scheduler shares among fraction pods."""
    unit_label: list[str]
    unit_mig: npt.NDArray[np.bool_]
    unit_gpu: npt.NDArray[np.bool_]
    """Whether a unit is one GPU held whole in an hour it has a holding in (a MIG GPU, a GPU KAI
    reserves for its fraction pods, whose reservation pod holds it whole)."""
    product: Ints
    products: list[str]
    node: Ints
    nodes: list[str]
    share: Floats
    """What a holding adds to its unit's size: its fraction over its node's replicas."""
    weight: Floats
    """Its weight in its unit's mean activity (its fraction of a GPU)."""
    slice_share: Floats
    """A MIG holding's share of its GPU (its fraction); 0 for other holdings."""
    pods: list[PodKey]
    """Its pod."""
    gang_of: dict[PodKey, str]
    """Pod -> the gang it belongs to (pods of no gang left out)."""
    window: WindowHours
    """Each held row's hour of the window (`views.window_hours`), made once per plan."""


def _replicas(views: Views) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in views.inv.queues.nodes:
        raw = n.labels.get(REPLICAS_LABEL, "")
        if raw.strip().isdigit() and int(raw) > 1:
            out[n.name] = float(min(int(raw), 1024))
    return out


def _holdings(views: Views) -> _Holdings:
    import numpy as np
    import pandas as pd

    h = views.inv.holdings
    node = h[C.NODE].fillna("").astype(str).tolist()
    model = h[C.MODEL].fillna("").astype(str).tolist()
    products = views.node_products
    product = [products.get(n, "") or m for n, m in zip(node, model, strict=True)]
    mig_id = h[C.MIG_ID].fillna("").astype(str).to_numpy()
    uuid = h[C.UUID].fillna("").astype(str).tolist()
    slot = h[C.SLOT].fillna("").astype(str).tolist()
    ns, pod = h[C.NAMESPACE].astype(str).tolist(), h[C.POD].astype(str).tolist()
    is_mig = mig_id != ""
    is_kai = h[C.ATTRIBUTION].isin(KAI_METHODS).to_numpy(dtype=bool)
    whole = is_mig | is_kai
    labels = [
        f"{n}/{u or s}" if m else f"{a}/{b}@{n}"
        for n, u, s, m, a, b in zip(node, uuid, slot, whole.tolist(), ns, pod, strict=True)
    ]
    unit, uniques = pd.factorize(pd.Series(labels, dtype=object))
    unit_mig = np.zeros(len(uniques), dtype=bool)
    unit_mig[unit[is_mig]] = True
    unit_gpu = np.zeros(len(uniques), dtype=bool)
    unit_gpu[unit[whole]] = True
    pcode, pnames = pd.factorize(pd.Series(product, dtype=object))
    ncode, nnames = pd.factorize(pd.Series(node, dtype=object))
    reps = _replicas(views)
    frac = h[C.FRACTION].to_numpy(dtype="float64")
    rep = np.array([reps.get(n, 1.0) for n in node], dtype="float64")
    # Held holdings of shared devices already count their share (`inventory.sharing`).
    rep = np.where(h[C.REPLICAS].to_numpy(dtype="float64") > 1, 1.0, rep)
    return _Holdings(
        unit=unit.astype(np.intp),
        unit_label=[str(x) for x in uniques],
        unit_mig=unit_mig,
        unit_gpu=unit_gpu,
        product=pcode.astype(np.intp),
        products=[str(x) for x in pnames],
        node=ncode.astype(np.intp),
        nodes=[str(x) for x in nnames],
        share=np.where(is_mig, 0.0, frac / rep),
        weight=frac,
        slice_share=np.where(is_mig, frac, 0.0),
        pods=list(zip(ns, pod, strict=True)),
        gang_of=_gangs(views),
        window=views.window_hours,
    )


@dataclass(frozen=True)
class _Groups:
    """Per (unit, hour of the window) with a holding: size, busy, product and node."""

    unit: Ints
    k: Ints
    size: Floats
    slices: Floats
    """Of a MIG GPU's group, the share of the GPU its held slices add up to (0 for others)."""
    busy: npt.NDArray[np.bool_]
    unknown: npt.NDArray[np.bool_]
    """Whether no row of the group has an activity sample (its activity is unknown)."""
    product: Ints
    node: Ints
    key: npt.NDArray[np.int64]
    """Each group's key (unit x the window's hours + hour), ascending."""
    keep: npt.NDArray[np.bool_]
    """The held rows the groups were made of (a mask over `views.held_rows`)."""

    def rows_of(self, views: Views, hs: _Holdings, at: Ints) -> tuple[Ints, Ints]:
        """(group, holding) of each held row of the groups `at`, in row order."""
        import numpy as np

        w = hs.window
        hour = np.zeros(max(w.hours, 1), dtype=bool)
        hour[self.k[at]] = True
        rows = np.flatnonzero(self.keep & w.inside & hour[np.clip(w.k, 0, len(hour) - 1)])
        holding = views.held_rows.holding[rows]
        key = hs.unit[holding].astype(np.int64) * max(w.hours, 1) + w.k[rows]
        group = np.searchsorted(self.key, key)
        mine = np.zeros(len(self.key), dtype=bool)
        mine[at] = True
        ok = mine[group]
        return group[ok].astype(np.intp), holding[ok].astype(np.intp)


def _groups(views: Views, hs: _Holdings, keep: npt.NDArray[np.bool_], idle: float) -> _Groups:
    """The groups of the held rows `keep` selects (a mask over `views.held_rows`).

    The rows are read in slices (`arrays.slices`): a first pass marks which (unit, hour) keys occur,
    a second adds each row's weights to its group with `np.add.at`, which adds in row order,
    so every sum is the one a single pass over all rows gives."""
    import numpy as np

    from gpuaudit.inventory.arrays import slices

    rows = views.held_rows
    w = hs.window
    nb = max(w.hours, 1)
    space = len(hs.unit_label) * nb
    act_col = views.inv.hourly[C.ACT].to_numpy(dtype="float64")
    parts = slices(len(rows.rows))

    def keys(sl: slice) -> tuple[Ints, npt.NDArray[np.int64]]:
        sel = np.flatnonzero(w.inside[sl] & keep[sl])
        sel += sl.start
        return sel, hs.unit[rows.holding[sel]].astype(np.int64) * nb + w.k[sel]

    present = np.zeros(space, dtype=bool)
    for sl in parts:
        present[keys(sl)[1]] = True
    uniq = np.flatnonzero(present).astype(np.int64)
    n = len(uniq)
    # Each present key's group: its rank among the present keys (a look-up, not a search).
    rank = np.cumsum(present, dtype=np.int32 if n < 2**31 else np.int64)
    rank -= 1
    del present
    wsum, wact, share, slice_sum = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    any_mig = bool(hs.unit_mig.any())
    first = np.full(n, -1, dtype=np.intp)
    for sl in parts:
        sel, key = keys(sl)
        group = rank[key].astype(np.intp)  # `np.add.at` is fast with native indices only
        del key
        hp = rows.holding[sel]
        act = act_col[rows.rows[sel]]
        has = ~np.isnan(act)
        wt = hs.weight[hp]
        np.add.at(wsum, group, np.where(has, wt, 0.0))
        np.add.at(wact, group, np.where(has, wt * act, 0.0))
        np.add.at(share, group, hs.share[hp])
        if any_mig:
            np.add.at(slice_sum, group, hs.slice_share[hp])
        # A group's first row: the first of its rows in this slice, where no earlier slice
        # had one.
        fresh = first[group] < 0
        first[group[fresh][::-1]] = hp[fresh][::-1]
    g_unit = (uniq // nb).astype(np.intp)
    size = np.where(hs.unit_gpu[g_unit], 1.0, share)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = wact / wsum
        busy = mean >= idle
    # A unit's product and node: those of any of its holdings (a unit sits on one node).
    return _Groups(
        unit=g_unit,
        k=(uniq % nb).astype(np.intp),
        size=size,
        slices=slice_sum,
        busy=np.asarray(busy, dtype=bool),
        unknown=wsum <= 0,
        product=hs.product[first] if n else np.zeros(0, dtype=np.intp),
        node=hs.node[first] if n else np.zeros(0, dtype=np.intp),
        key=uniq,
        keep=keep,
    )


def _data_hours(views: Views, hs: _Holdings, nb: int) -> npt.NDArray[np.bool_]:
    """(product, hour) -> whether DCGM reported any GPU of the product in that hour."""
    import numpy as np

    inv = views.inv
    hr = inv.hourly
    out = np.zeros((len(hs.products), max(nb, 0)), dtype=bool)
    if hr.empty or nb == 0 or inv.holdings.empty:
        return out
    from gpuaudit.inventory.arrays import slices

    ids = inv.holdings[C.HOLDING].to_numpy(dtype=np.int64)
    hid_all = hr[C.HOLDING].to_numpy(dtype=np.int64)
    ts_all = hr[C.TS].to_numpy(dtype="float64")
    # Holding ids are row positions in a built inventory; a hand-built one is looked up.
    positions = bool(np.array_equal(ids, np.arange(len(ids))))
    order = np.argsort(ids, kind="stable")
    start, step = float(inv.window_start), float(inv.step_s)
    for sl in slices(len(hid_all)):
        hid = hid_all[sl]
        if positions:
            at = np.clip(hid, 0, len(ids) - 1)
        else:
            at = order[np.clip(np.searchsorted(ids[order], hid), 0, len(ids) - 1)]
        found = ids[at] == hid
        k = (np.rint((ts_all[sl] - start) / step) - 1).astype(np.intp)
        ok = found & (k >= 0) & (k < nb)
        out[hs.product[at[ok]], k[ok]] = True
    return out


def _seen_gpus(views: Views) -> tuple[dict[str, int], set[str]]:
    """Node -> physical GPUs DCGM reported on it (MIG instances by their parent GPU), and the
    nodes on which it reported MIG instances."""
    h = views.inv.holdings
    if h.empty:
        return {}, set()
    ids = h[C.UUID].where(h[C.UUID] != "", h[C.SLOT])
    seen = {str(k): int(v) for k, v in ids.groupby(h[C.NODE]).nunique().items()}
    mig = set(h.loc[h[C.MIG_ID].fillna("").astype(str) != "", C.NODE].astype(str))
    return seen, mig


@dataclass(frozen=True)
class Rooms:
    """The nodes of one product as the packer sees them (see `ASSUMPTIONS`)."""

    room: Mapping[str, float]
    """Schedulable node -> room in GPUs (cordoned nodes are left out)."""
    kind: Mapping[str, str]
    """Node -> how it offers its GPUs: `whole`, `shared/R` (R replicas each) or `mig`; for
    every node of the product, cordoned or not."""
    full: Mapping[str, float]
    """Node -> room in GPUs, cordoned nodes included (to tell a whole-node holding)."""
    cordoned: frozenset[str]
    unlisted: frozenset[str]
    """Nodes only DCGM saw: Kubernetes did not list them, so nothing is known to refuse a
    pod there."""


def _node_kind(facts: NodeFacts | None, node: str, mig_seen: set[str]) -> str:
    if node in mig_seen:
        return "mig"
    if facts is None:
        return "whole"
    if any(r.startswith(MIG_PREFIX) for r in facts.allocatable) or (
        facts.labels.get(MIG_STRATEGY_LABEL) == "single"
    ):
        return "mig"
    return f"shared/{facts.replicas}" if facts.replicas > 1 else "whole"


def _node_room(facts: NodeFacts | None, kind: str, seen: int) -> float:
    """A node's room in GPUs: what DCGM saw on a node Kubernetes did not list; the physical
    GPUs (`nvidia.com/gpu.count`, else what DCGM saw) of a MIG node, and of a node that
    advertises no `nvidia.com/gpu` nor `nvidia.com/gpu.shared` at all (its GPUs are handed out
    through DRA ResourceClaims: NVIDIA's DRA driver publishes them in ResourceSlices, not as
    allocatable); allocatable `nvidia.com/gpu` (or `nvidia.com/gpu.shared`) over the replicas
    of a shared node; else allocatable `nvidia.com/gpu`."""
    if facts is None:
        return float(seen)
    if kind == "mig" or not {GPU, SHARED_GPU} & set(facts.allocatable):
        count = facts.labels.get(COUNT_LABEL, "").strip()
        return float(min(int(count), 1024)) if count.isdigit() else float(seen)
    alloc = facts.allocatable.get(GPU, 0.0) or facts.allocatable.get(SHARED_GPU, 0.0)
    return alloc / max(1, facts.replicas)


def _rooms(
    views: Views,
    product: str,
    seen: Mapping[str, int],
    mig_seen: set[str],
    products: Mapping[str, str],
) -> Rooms:
    """Every node of `product` (`products`: node -> product), with its room and how it offers
    its GPUs."""
    pl = views.placement
    room: dict[str, float] = {}
    kind: dict[str, str] = {}
    full: dict[str, float] = {}
    cordoned: set[str] = set()
    unlisted: set[str] = set()
    for node, p in sorted(products.items()):
        if p != product or not node:
            continue
        facts = pl.nodes.get(node)
        if facts is None:
            unlisted.add(node)
        kind[node] = _node_kind(facts, node, mig_seen)
        full[node] = _node_room(facts, kind[node], seen.get(node, 0))
        if facts is not None and facts.unschedulable:
            cordoned.add(node)
        else:
            room[node] = full[node]
    return Rooms(room, kind, full, frozenset(cordoned), frozenset(unlisted))


def _allowed(
    views: Views,
    pods: AbstractSet[PodKey],
    kind: str,
    rooms: Rooms,
    memo: dict[Any, frozenset[str]],
    cluster: str | None = None,
) -> frozenset[str]:
    """The schedulable nodes of the product a unit may go on: those offering GPUs the way
    the node it ran on did, that admit every pod of it whose spec is known (see
    `gpuaudit.inventory.feasibility`), and the nodes only DCGM saw. In a scan of every
    cluster, only the nodes of the unit's own `cluster`: no pod moves between clusters."""
    pl = views.placement
    sets = {id(s): s for s in (pl.allowed(p) for p in pods if p in pl.pods)}
    # By the sets' identities (`allowed` shares one set per spec and keeps it): comparing two
    # equal sets of thousands of nodes would cost their size for every unit.
    key = (kind, frozenset(sets), cluster)
    if key not in memo:
        ok = {
            n
            for n in rooms.room
            if rooms.kind[n] == kind and (cluster is None or cluster_of(n) == cluster)
        }
        for s in sets.values():
            ok &= s | rooms.unlisted
        memo[key] = frozenset(ok)
    return memo[key]


Unit = tuple[str, float, str, str, AbstractSet[PodKey]]
"""One thing the packer places: its key, size in GPUs, the node it held, how that node offers
its GPUs (`Rooms.kind`, `mig` for a MIG-partitioned GPU) and the pods holding it."""


def _measured_units(views: Views, hs: _Holdings, g: _Groups, at: Ints, rooms: Rooms) -> list[Unit]:
    """The units of the groups `at` (one hour's units of one product, from DCGM)."""
    pods_of: dict[int, set[PodKey]] = {int(i): set() for i in at}
    group, holding = g.rows_of(views, hs, at)
    for i, h in zip(group.tolist(), holding.tolist(), strict=True):
        pods_of[i].add(hs.pods[h])
    out: list[Unit] = []
    for i in at.tolist():
        node = hs.nodes[int(g.node[i])]
        kind = "mig" if hs.unit_mig[int(g.unit[i])] else rooms.kind.get(node, "whole")
        out.append((hs.unit_label[int(g.unit[i])], float(g.size[i]), node, kind, pods_of[i]))
    return out


def _items(
    views: Views, units: Sequence[Unit], rooms: Rooms, gang_of: Mapping[PodKey, str]
) -> tuple[list[Item], int]:
    """The packer's items for `units`, and how many of them hold a pod whose spec Kubernetes
    did not return."""
    pl = views.placement
    items: list[Item] = []
    members: dict[str, list[tuple[int, str]]] = {}
    unknown = 0
    memo: dict[Any, frozenset[str]] = {}
    grouped = bool(views.inv.cluster_label)
    for key, size, node, kind, pods in units:
        unknown += any(p not in pl.pods for p in pods)
        cluster = cluster_of(node) if grouped else None
        allowed = _allowed(views, pods, kind, rooms, memo, cluster)
        items.append(Item(key, size, allowed))
        gangs = {gang_of.get(p, "") for p in pods}
        if kind != "mig" and len(gangs) == 1 and "" not in gangs:
            members.setdefault(gangs.pop(), []).append((len(items) - 1, node))
    # A gang whose members each held a whole node keeps a node per member.
    for idx in members.values():
        if all(items[j].size >= rooms.full.get(node, math.inf) - EPS for j, node in idx):
            for j, _ in idx:
                items[j] = replace(items[j], whole_node=True)
    return items, unknown


def _gangs(views: Views) -> dict[PodKey, str]:
    p = views.inv.pods
    if p.empty or C.GANG not in p.columns:
        return {}
    return {
        (str(ns), str(pod)): str(gang)
        for ns, pod, gang in zip(p[C.NAMESPACE], p[C.POD], p[C.GANG].fillna(""), strict=True)
        if gang
    }


# ---- holdings only the Kubernetes API shows ----------------------------------------------

UNKNOWN_PRODUCT = "unknown"
"""The product of a node that has no `nvidia.com/gpu.product` label and no DCGM series."""


@dataclass(frozen=True)
class ApiHolding:
    """GPUs a running pod holds as the Kubernetes API shows them, where no DCGM series names
    the pod (the attribution ledger's unattributed side,
    `gpuaudit.inventory.attribution.unattributed`): on a node without an exporter, through a
    DRA claim that could not be joined to a series, or a pod no series names. It holds them
    in the hours of `spans`: those it ran in (from the hour it started in, or the window's
    first, to the hour it ended in, or the window's last), less those the Kubernetes-side join
    gave it its devices in; what they did is unknown."""

    pod: PodKey
    node: str
    product: str
    """The node's `nvidia.com/gpu.product` label, else the model DCGM reports on the node,
    else `UNKNOWN_PRODUCT`."""
    kind: str
    """`whole`, `mig` or `shared` (`gpuaudit.inventory.attribution.KINDS`)."""
    gpus: float
    """Whole GPUs; MIG slices' shares of a GPU; shared replicas' shares of their device."""
    spans: tuple[tuple[int, int, float], ...]
    """The hours it holds in, as `(first, end, part)`: hours `first` to `end - 1` of the
    window, in each of which it holds `part` of `gpus` (`gpuaudit.inventory.columns.SPANS`)."""

    def gpus_at(self, k: int) -> float:
        """The GPUs it holds in hour `k` of the window."""
        return sum(self.gpus * part for first, end, part in self.spans if first <= k < end)


def _api_holdings(views: Views, products: Mapping[str, str], nb: int) -> list[ApiHolding]:
    """What pods hold without DCGM series, each held in some hour of the window."""
    un = views.unattributed
    if un.empty:
        return []
    out: list[ApiHolding] = []
    for ns, pod, node, model, gpus, kind, spans in zip(
        un[C.NAMESPACE].astype(str).tolist(),
        un[C.POD].astype(str).tolist(),
        un[C.NODE].astype(str).tolist(),
        un[C.MODEL].fillna("").astype(str).tolist(),
        un["gpus"].to_numpy(dtype="float64").tolist(),
        un["kind"].tolist(),
        un[C.SPANS].tolist(),
        strict=True,
    ):
        # The hours its GPU-hours lie in, as the ledger's unattributed side places them.
        held = tuple((max(0, a), min(nb, b), p) for a, b, p in spans if min(nb, b) > max(0, a))
        if not held or not gpus > 0:
            continue
        product = products.get(node) or model or UNKNOWN_PRODUCT
        out.append(ApiHolding((ns, pod), node, product, str(kind), gpus, held))
    return out


@dataclass(frozen=True)
class _Api:
    """The holdings of one product only the Kubernetes API shows, and what they hold in each
    hour of the window: whole GPUs and shared replicas (`whole`), and per node the share of a
    GPU its MIG slices add up to (`slices`)."""

    holdings: tuple[ApiHolding, ...]
    whole: Floats
    slices: Mapping[str, Floats]

    def held(self, spare: Mapping[str, Floats]) -> Floats:
        """GPUs held in each hour: `whole`, plus on each node the fewest GPUs its MIG slices
        fit on once they fill `spare` (per node and hour, the room its GPUs with slices DCGM
        shows held leave, `_spare`; which GPU an API-only slice sits on is not known, so it
        is counted on a GPU already held where its share fits)."""
        import numpy as np

        out: Floats = np.array(self.whole, dtype="float64")
        for node, share in self.slices.items():
            left = share - spare[node] if node in spare else share
            out += np.ceil(np.maximum(left, 0.0) - EPS)
        return out


def _api_by_product(holdings: Sequence[ApiHolding], nb: int) -> dict[str, _Api]:
    import numpy as np

    out: dict[str, _Api] = {}
    for product in sorted({h.product for h in holdings}):
        mine = [h for h in holdings if h.product == product]
        whole = np.zeros(nb)
        slices: dict[str, Floats] = {}
        for h in mine:
            share = slices.setdefault(h.node, np.zeros(nb)) if h.kind == "mig" else whole
            for first, end, part in h.spans:
                share[first:end] += h.gpus * part
        out[product] = _Api(tuple(mine), whole, slices)
    return out


def _spare(hs: _Holdings, g: _Groups, mine: npt.NDArray[np.bool_], api: _Api) -> dict[str, Floats]:
    """Per node with MIG slices only the API shows, and hour: the room the node's MIG GPUs DCGM
    shows held leave (1 less the share of each that its held slices add up to, at least 0),
    among the groups `mine`."""
    import numpy as np

    nb = max(hs.window.hours, 1)
    mig = mine & hs.unit_mig[g.unit]
    out: dict[str, Floats] = {}
    for node in api.slices:
        if node not in hs.nodes:
            continue
        sel = mig & (g.node == hs.nodes.index(node))
        room = np.clip(1.0 - g.slices[sel], 0.0, None)
        out[node] = np.bincount(g.k[sel], weights=room, minlength=nb).astype("float64")
    return out


def _api_units(api: _Api, k: int, rooms: Rooms, spare: Mapping[str, Floats]) -> list[Unit]:
    """The units of the hour `k`: a pod's whole GPUs (or shared replicas) on one node, and on
    each node the fewest MIG GPUs its held slices fit on once they fill the room its GPUs DCGM
    shows held leave (`spare`), each held by all their pods (which slice sits on which GPU is
    not known)."""
    out: list[Unit] = []
    slices: dict[str, tuple[float, set[PodKey]]] = {}
    for h in api.holdings:
        now = h.gpus_at(k)
        if not now > 0:
            continue
        if h.kind == "mig":
            share, pods = slices.get(h.node, (0.0, set()))
            slices[h.node] = (share + now, pods | {h.pod})
        else:
            kind = rooms.kind.get(h.node, "whole")
            key = f"{h.pod[0]}/{h.pod[1]}@{h.node} ({h.kind}, no DCGM series)"
            out.append((key, now, h.node, kind, frozenset({h.pod})))
    for node, (share, pods) in sorted(slices.items()):
        held = frozenset(pods)
        left = share - float(spare[node][k]) if node in spare else share
        gpus = range(math.ceil(max(left, 0.0) - EPS))
        out.extend((f"{node}/mig-{i} (no DCGM series)", 1.0, node, "mig", held) for i in gpus)
    return out


# ---- the plan of each product -----------------------------------------------------------


def _product_plan(
    views: Views,
    hs: _Holdings,
    g: _Groups,
    product: str,
    data: npt.NDArray[np.bool_],
    rooms: Rooms,
    api: _Api | None,
    dcgm_nodes: AbstractSet[str],
) -> ProductPlan:
    """`data`: the hours DCGM reported GPUs of the product; `api`: its holdings only the
    Kubernetes API shows; `dcgm_nodes`: the nodes DCGM reported."""
    import numpy as np

    inv = views.inv
    nb = len(data)
    code = hs.products.index(product) if product in hs.products else -1
    mine = g.product == code
    ok = g.size > 0

    def per_hour(sel: npt.NDArray[np.bool_]) -> Floats:
        out: Floats = np.bincount(g.k[sel], weights=g.size[sel], minlength=nb).astype("float64")
        return out

    held, busy, unknown = per_hour(mine), per_hour(mine & g.busy), per_hour(mine & g.unknown)
    ran = {hs.nodes[int(n)] for n in np.unique(g.node[mine & ok])} - {""}
    without = np.zeros(nb)
    spare: dict[str, Floats] = {}
    if api is not None:
        spare = _spare(hs, g, mine, api)
        without = api.held(spare)
        held = held + without
        unknown = unknown + without
        ran |= {h.node for h in api.holdings}
    # A product DCGM never reported has the hours in which the API shows it held.
    has = data if data.any() else without > EPS
    hours = np.flatnonzero(has)
    peak_k: int | None = int(hours[np.argmax(held[hours])]) if len(hours) else None
    packing = Packing((), {}, ())
    items: list[Item] = []
    no_spec = 0
    if peak_k is not None:
        at = np.flatnonzero(mine & (g.k == peak_k) & ok)
        units = _measured_units(views, hs, g, at, rooms)
        if api is not None:
            units += _api_units(api, peak_k, rooms, spare)
        items, no_spec = _items(views, units, rooms, hs.gang_of)
        packing = pack_ffd(items, rooms.room)
    step = float(inv.step_s)
    ends = tuple(float(inv.window_start + (i + 1) * step) for i in range(nb))

    def by_hour(values: Floats) -> tuple[float | None, ...]:
        return tuple(float(values[i]) if has[i] else None for i in range(nb))

    return ProductPlan(
        product=product,
        nodes=len(rooms.kind),
        gpus=float(sum(rooms.full.values())),
        hours_with_data=int(len(hours)),
        gpus_held=Stat.of([float(held[i]) for i in hours]),
        gpus_busy=Stat.of([float(busy[i]) for i in hours]),
        nodes_ran_gpu_pods=len(ran),
        min_nodes_at_peak=len(packing.used),
        peak_hour=ends[peak_k] if peak_k is not None else None,
        unplaced_gpus=float(sum(i.size for i in packing.unplaced)),
        nodes_used=packing.used,
        gpus_of_nodes_used=float(sum(rooms.room[n] for n in packing.used)),
        hour_ends=ends,
        held_by_hour=by_hour(held),
        busy_by_hour=by_hour(busy),
        nodes_cordoned=len(rooms.cordoned),
        nodes_unlisted=len(rooms.unlisted),
        units_without_spec=no_spec,
        whole_node_units=sum(1 for i in items if i.whole_node),
        gpus_without_dcgm=Stat.of([float(without[i]) for i in hours]),
        gpus_activity_unknown=Stat.of([float(unknown[i]) for i in hours]),
        without_dcgm_by_hour=by_hour(without),
        unknown_by_hour=by_hour(unknown),
        nodes_without_dcgm=len(ran - set(dcgm_nodes)),
    )


@dataclass(frozen=True)
class _Fleet:
    """What every product's plan reads besides the held rows, made once per plan."""

    data: npt.NDArray[np.bool_]
    """(product code, hour) -> whether DCGM reported any GPU of the product then."""
    rooms: Mapping[str, Rooms]
    api: Mapping[str, _Api]
    dcgm_nodes: frozenset[str]
    products: tuple[str, ...]
    """Every product, by name: of DCGM's holdings and of the API's."""


def _plans(
    views: Views,
    hs: _Holdings,
    keep: npt.NDArray[np.bool_],
    idle: float,
    fleet: _Fleet,
    only: set[str] | None = None,
) -> dict[str, ProductPlan]:
    """The plan of each product (of those in `only`, where given) from the held rows `keep`."""
    import numpy as np

    g = _groups(views, hs, keep, idle)
    none = np.zeros(fleet.data.shape[1], dtype=bool)
    out = {}
    for product in fleet.products:
        if only is not None and product not in only:
            continue
        code = hs.products.index(product) if product in hs.products else -1
        data = fleet.data[code] if code >= 0 else none
        out[product] = _product_plan(
            views,
            hs,
            g,
            product,
            data,
            fleet.rooms[product],
            fleet.api.get(product),
            fleet.dcgm_nodes,
        )
    return out


@dataclass(frozen=True)
class Release:
    """An idle reservation the audit found, to release for `after_release_idle`."""

    namespace: str
    pod: str
    code: str
    """The finding's check: `GPU001` (idle all window) or `GPU002` (an idle tail)."""
    since: float | None = None
    """Unix seconds from which the pod's holdings are released (the start of GPU002's idle
    tail); None for the whole window."""


def _kept_rows(
    views: Views, hs: _Holdings, releases: Sequence[Release]
) -> tuple[npt.NDArray[np.bool_], dict[str, int]]:
    """Which held rows stay after the releases (a mask over `views.held_rows`), and how many
    released pods held GPUs of each product in what they released."""
    import numpy as np

    rows = views.held_rows
    since_of: dict[PodKey, float] = {}
    for r in releases:
        key = (r.namespace, r.pod)
        start = -math.inf if r.since is None else float(r.since)
        since_of[key] = min(since_of.get(key, math.inf), start)
    since = np.array([since_of.get(p, math.inf) for p in hs.pods], dtype="float64")
    if len(rows.rows) == 0:
        return np.ones(0, dtype=bool), {}
    ts = rows.bucket_ts[np.clip(rows.bucket, 0, None)]
    gone = ts > since[rows.holding] + EPS
    inside = hs.window.inside
    by_product: dict[str, set[PodKey]] = {}
    for h in np.unique(rows.holding[gone & inside]).tolist():
        product = hs.products[int(hs.product[h])]
        by_product.setdefault(product, set()).add(hs.pods[h])
    return ~_kai_gone(views, gone), {p: len(v) for p, v in by_product.items()}


def _kai_gone(views: Views, gone: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """`gone` (released held rows) as KAI Scheduler keeps its shared GPUs: per GPU and bucket,
    a released fraction pod's share stays held, by the reservation pod, while another fraction
    pod of the GPU holds it; where every fraction pod that held it in the bucket is released,
    KAI deletes the reservation pod (`docs/domain.md`, KAI) and the whole GPU goes."""
    import numpy as np
    import pandas as pd

    rows = views.held_rows
    h = views.inv.holdings
    method = h[C.ATTRIBUTION]
    fraction = (method == Method.KAI_FRACTION.value).to_numpy(dtype=bool)[rows.holding]
    out: npt.NDArray[np.bool_] = np.array(gone, dtype=bool)
    if not (out & fraction).any():
        return out
    reserved = (method == Method.KAI_RESERVED.value).to_numpy(dtype=bool)[rows.holding]
    gpu = pd.factorize(h[C.NODE].astype(str) + "\0" + h[C.UUID].astype(str))[0]
    nb = len(rows.bucket_ts) + 1
    key = gpu[rows.holding].astype(np.int64) * nb + rows.bucket.astype(np.int64) + 1
    released = np.isin(key, key[fraction & out])
    kept = np.isin(key, key[fraction & ~out])
    out[fraction & out & kept] = False
    out[reserved & released & ~kept] = True
    return out


def plan(
    views: Views,
    idle_activity: float,
    currency: str,
    released: Sequence[Release] | None,
    release_note: str = "",
    queues: Sequence[QueueUsage] = (),
    what_if: Sequence[str] = (),
) -> CapacityPlan:
    """The capacity plan of the shared views' inventory. `released`: the idle reservations to
    release for `after_release_idle` (GPU001's and GPU002's findings), None when neither check
    ran (`release_note` says why). `what_if`: the scenarios the user asked to see
    (`WHAT_IFS`); the figures are computed whatever it holds."""
    import numpy as np

    hs = _holdings(views)
    rows = views.held_rows
    every = np.ones(len(rows.rows), dtype=bool)
    fleet = _fleet(views, hs)
    before = _plans(views, hs, every, idle_activity, fleet)
    keep, by_product = _kept_rows(views, hs, released or ())
    after = before
    if not keep.all():
        # A product none of whose rows in the window is released keeps its plan.
        changed = {p for p, n in by_product.items() if n}
        after = {**before, **_plans(views, hs, keep, idle_activity, fleet, changed)}
    hours = views.inv.window_hours
    freed = {}
    for product, b in before.items():
        a = after[product]
        gpus = max(0.0, b.gpus_of_nodes_used - a.gpus_of_nodes_used)
        nodes = max(0, b.min_nodes_at_peak - a.min_nodes_at_peak)
        freed[product] = Freed(nodes, gpus, gpus * hours * views.price(product))
    return CapacityPlan(
        window_hours=hours,
        idle_activity=idle_activity,
        currency=currency,
        by_product=before,
        after_release_idle=after,
        freed=freed,
        released=None if released is None else tuple(sorted(set(released), key=_release_key)),
        release_note=release_note,
        released_by_product=by_product,
        queues=tuple(queues),
        short_names={p: short_model(p.replace("-", " ")) for p in before},
        what_if=tuple(what_if),
        notes=_notes(views, before),
    )


def _fleet(views: Views, hs: _Holdings) -> _Fleet:
    """What releasing pods does not change: which hours have DCGM data, the holdings only the
    API shows, the nodes and their rooms."""
    nb = hs.window.hours
    products = dict(views.node_products)
    api = _api_holdings(views, products, nb)
    for h in api:
        products.setdefault(h.node, h.product)
    seen, mig_seen = _seen_gpus(views)
    names = sorted(({*hs.products} | {h.product for h in api}) - {""})
    return _Fleet(
        data=_data_hours(views, hs, nb),
        rooms={p: _rooms(views, p, seen, mig_seen, products) for p in names},
        api=_api_by_product(api, nb),
        dcgm_nodes=frozenset(seen),
        products=tuple(names),
    )


def _notes(views: Views, plans: Mapping[str, ProductPlan]) -> tuple[str, ...]:
    """What the figures cannot see: per product, the GPUs held whose activity is unknown, and
    without the Kubernetes pods, every GPU held without DCGM series."""
    out = []
    for product, p in plans.items():
        unknown = p.gpus_activity_unknown.peak
        if unknown <= EPS:
            continue
        name = short_model(product.replace("-", " "))
        without = p.gpus_without_dcgm.peak
        where = []
        if without > EPS:
            where.append(
                f"up to {_num(without)} held by pods the Kubernetes API shows and no DCGM "
                "series measures"
            )
        n = p.nodes_without_dcgm
        if n:
            where.append(f"{n} node{'s' if n != 1 else ''} without an exporter ran GPU pods")
        if unknown - without > EPS:
            where.append("GPUs whose DCGM series have no activity sample in the hour")
        out.append(
            f"{name}: the activity of up to {_num(unknown)} "
            f"GPU{'' if abs(unknown - 1) < EPS else 's'} held in an hour is unknown "
            f"({'; '.join(where)}): they count as held, neither busy nor idle."
        )
    inv = views.inv
    if Capability.KUBERNETES_PODS not in inv.capabilities:
        why = inv.missing.get(Capability.KUBERNETES_PODS, "the Kubernetes pods were not read")
        out.append(
            f"GPUs pods held without DCGM series are not counted ({why}): the figures are what "
            "DCGM measured."
        )
    return tuple(out)


def _release_key(r: Release) -> tuple[str, str, str, float]:
    return (r.namespace, r.pod, r.code, -math.inf if r.since is None else r.since)
