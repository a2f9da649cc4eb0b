"""`Views`: what several checks, the summary and the breakdown read besides the inventory's own
tables, each made at most once per audit and handed to all of them.

A `Views` is created once per audit (`gpuaudit.audit.assemble.run_checks`) from the frozen inventory
and the prices; each view is computed the first time it is asked for and kept by that `Views`
object, never by the inventory. Views are shared: nobody may change one. The functions that
make them live in `gpuaudit.inventory.derived` and `gpuaudit.inventory.grouped`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from gpuaudit.inventory import attribution, derived, grouped, kai, queue_usage, sharing
from gpuaudit.inventory.capabilities import Capability
from gpuaudit.inventory.comms import Comms
from gpuaudit.inventory.derived import HeldRows, Holders, PodHours, WindowHours
from gpuaudit.inventory.feasibility import Placement
from gpuaudit.inventory.grouped import PodOnNode, WholeRows
from gpuaudit.inventory.sharing import Sharing
from gpuaudit.inventory.tables import Inventory

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HeldRows", "Holders", "PodHours", "PodOnNode", "Views", "WholeRows", "WindowHours"]


class Views:
    """The shared views of one inventory at one set of prices (per GPU-hour, by GPU model)."""

    def __init__(self, inv: Inventory, prices: Mapping[str, float]) -> None:
        self.inv = inv
        """The inventory every view is made from."""
        self.prices = dict(prices)
        """Price per GPU-hour by GPU model (see `gpuaudit.domain.pricing`)."""
        self._waiting: dict[float, pd.DataFrame] = {}
        self._queues: dict[float, tuple[queue_usage.QueueUsage, ...]] = {}

    ROW_LONG = (
        "pod_hours",
        "pod_hourly",
        "per_pod",
        "whole_gpu_hourly",
        "whole_rows",
        "pods_on_nodes",
    )
    """The cached views as long as the hourly table (or made of one) that only checks read:
    let go of once no check still to run reads them (a check's `VIEWS`), and before the
    summary, the breakdown and the capacity plan (`forget_check_rows`)."""

    def forget(self, names: Iterable[str]) -> None:
        """Let go of these cached views (`ROW_LONG` names); one asked for again is made
        anew, the same."""
        for name in names:
            if name in self.ROW_LONG:
                self.__dict__.pop(name, None)

    def forget_check_rows(self) -> None:
        """Let go of the views as long as the hourly table that only the checks read (pod
        hours, whole-GPU rows and what is made of them): the summary, the breakdown, the
        capacity plan and the ledger read none of them (the plan reads queue usage, which is
        kept), and they are among the largest things an audit holds. One asked for again is
        made anew, the same."""
        self.forget(self.ROW_LONG)

    def price(self, model: str) -> float:
        """The price of one GPU-hour of `model`."""
        return derived.model_price(model, self.prices)

    @functools.cached_property
    def held(self) -> pd.DataFrame:
        """Holdings a pod held for some time (`inv.holdings` rows)."""
        return derived.held(self.inv)

    @functools.cached_property
    def kai_reservations(self) -> frozenset[tuple[str, str]]:
        """(namespace, pod) of KAI Scheduler's reservation pods (see `inventory.kai`): they
        hold GPUs for fraction pods and are no workload, so no finding is about them."""
        return kai.reservations(self.inv.pods)

    @functools.cached_property
    def sharing(self) -> dict[str, Sharing]:
        """Nodes that share their GPUs by time-slicing or MPS (see `inventory.sharing`)."""
        return sharing.by_node(self.inv.nodes, self.inv.holdings)

    @functools.cached_property
    def unattributed(self) -> pd.DataFrame:
        """Per running pod holding GPUs no DCGM series names: its GPU-hours in the window and
        the reason (`attribution.unattributed`, the ledger's unattributed side)."""
        inv = self.inv
        if inv.unattributed is not None:
            return inv.unattributed
        window = (inv.window_start, inv.window_end)
        # Without the pods at the window's end (not read, or --end before they were read) the
        # unattributed side is unknown, not empty (the ledger says so).
        pods = inv.pods if Capability.KUBERNETES_PODS in inv.capabilities else inv.pods.iloc[:0]
        return attribution.unattributed(
            inv.holdings,
            pods,
            inv.nodes,
            window,
            self.sharing,
            inv.hourly,
            inv.step_s,
            inv.hami.unmonitored,
        )

    @functools.cached_property
    def per_pod(self) -> pd.DataFrame:
        """One row per holder pod: GPUs (`pod_gpus`), hours, GPU-hours, `cost`, activity and
        owner (see `derived.per_pod`)."""
        return derived.per_pod(self.inv, self.prices)

    @functools.cached_property
    def held_rows(self) -> HeldRows:
        """The hourly rows of held holdings, as arrays (see `HeldRows`)."""
        return derived.held_rows(self.inv)

    @property
    def window_hours(self) -> WindowHours:
        """Each held row's hour of the window (see `derived.window_hours`): made anew each
        time (a look-up per row), not kept, as it is a row-sized array."""
        return derived.window_hours(self.inv, self.held_rows)

    @functools.cached_property
    def holders(self) -> Holders:
        """The holder pods of held holdings, numbered (see `Holders`)."""
        return derived.holders(self.inv)

    @functools.cached_property
    def pod_hours(self) -> PodHours:
        """Per holder pod and bucket: GPUs held and their mean activity, as arrays."""
        return derived.pod_hours(self.inv, self.held_rows, self.holders)

    @functools.cached_property
    def pod_hourly(self) -> pd.DataFrame:
        """`pod_hours` as a table (namespace, pod, ts, gpus, act)."""
        return derived.pod_hourly(self.pod_hours)

    @functools.cached_property
    def whole_gpu_hourly(self) -> pd.DataFrame:
        """Hourly rows of whole GPUs with node, slot, GPU index, holder and model."""
        return derived.whole_gpu_hourly(self.inv)

    @functools.cached_property
    def whole_rows(self) -> WholeRows:
        """The hourly rows of whole GPUs as holding positions (see `WholeRows`)."""
        return grouped.whole_rows(self.inv)

    @functools.cached_property
    def pods_on_nodes(self) -> tuple[tuple[PodOnNode, ...], pd.DataFrame]:
        """Per (namespace, pod, node) holding whole GPUs, sorted, with the key table its
        holding positions refer to (see `grouped.pods_on_nodes`)."""
        return grouped.pods_on_nodes(self.whole_rows)

    def free_counts(self, buckets: set[float]) -> dict[float, dict[str, int]]:
        """Bucket end -> node -> whole GPUs no pod held in that bucket."""
        return grouped.free_counts(self.whole_rows, buckets)

    def free_sets(self, buckets: set[float], nodes: set[str]) -> dict[tuple[str, float], set[str]]:
        """(node, bucket end) -> the GPU indices no pod held, for these buckets and nodes."""
        return grouped.free_sets(self.whole_rows, buckets, nodes)

    @functools.cached_property
    def node_products(self) -> dict[str, str]:
        """Node -> GPU product: the `nvidia.com/gpu.product` label, else the DCGM model."""
        return derived.node_products(self.inv.holdings, self.inv.nodes)

    @functools.cached_property
    def placement(self) -> Placement:
        """Where pods may run and what each node has free, as the scheduler decides it (see
        `gpuaudit.inventory.feasibility`): the model every "could fit" or "had room" asks."""
        return Placement.of(self.inv)

    @functools.cached_property
    def comms(self) -> Comms:
        """Whether work exchanges data between its GPUs (see `gpuaudit.inventory.comms`)."""
        return Comms(self.inv)

    @functools.cached_property
    def gpu_nodes(self) -> pd.DataFrame:
        """Schedulable GPU nodes with allocatable, `requested` and `free` whole GPUs."""
        return derived.gpu_nodes(self.inv)

    def waiting_for_gpus(self, min_minutes: float) -> pd.DataFrame:
        """Pods unschedulable for lack of GPUs for at least `min_minutes` (see
        `derived.waiting_for_gpus`), made once per threshold."""
        key = float(min_minutes)
        if key not in self._waiting:
            self._waiting[key] = derived.waiting_for_gpus(self.inv, key)
        return self._waiting[key]

    def queue_usage(self, idle_activity: float) -> tuple[queue_usage.QueueUsage, ...]:
        """Every GPU quota line of every Kueue or Volcano queue over the window, busy where a
        pod's hourly activity reaches `idle_activity` (see `queue_usage.usage`), made once per
        threshold."""
        key = float(idle_activity)
        if key not in self._queues:
            self._queues[key] = queue_usage.usage(
                self.inv, self.held_rows, self.holders, self.pod_hours, key
            )
        return self._queues[key]
