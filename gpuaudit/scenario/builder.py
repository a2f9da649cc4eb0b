"""The scenario under construction: one random stream, the nodes and their GPU slots, the pods,
who held which slot when, the extra API objects and the truth; and the primitives that
workloads and planted cases are built from.

Every random draw of a scenario comes from `Builder.rng`, so the order in which the builder's
callers draw is part of the output: the same calls in the same order give the same bytes. Each
`free_rest` starts a new stream (from the seed and how many came before), so the draws of the
free holdings, which `hold_free` skips, change nothing after them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import numpy as np

from gpuaudit.scenario import nodes
from gpuaudit.scenario.cluster import Holding, NodeSpec, PodSpec, SlotSpec

Rng = np.random.Generator
Arr = np.ndarray[Any, np.dtype[Any]]

_clip: Callable[..., Arr] = getattr(
    getattr(getattr(np, "_core", None), "umath", None), "clip", np.clip
)
"""The ufunc `np.clip` calls on float arrays with both bounds given, without the wrappers."""


def _round(x: Arr, decimals: int = 0) -> Arr:
    """`np.round(x, decimals)` of a float64 array by the same operations (multiply, round to
    nearest even, divide), without the wrappers' cost."""
    if x.dtype != np.float64:
        return np.round(x, decimals)
    if decimals == 0:
        return np.rint(x)
    f = 10.0**decimals
    y: Arr = x * f
    np.rint(y, out=y)
    y /= f
    return y


class Ids:
    """Random identifiers (hex strings, UUIDs, Kubernetes name suffixes) from the scenario's
    random stream."""

    def __init__(self, rng: Rng) -> None:
        self.rng = rng

    def hex(self, n: int) -> str:
        b = self.rng.integers(0, 256, size=(n + 1) // 2)
        return b.astype(np.uint8).tobytes().hex()[:n]

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def suffix(self, n: int = 5) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return "".join([alphabet[i] for i in self.rng.integers(0, len(alphabet), size=n).tolist()])


class Builder:
    """The state of a scenario being built and its primitives: nodes, activity patterns,
    holdings of GPU slots, pods and truth entries."""

    def __init__(self, seed: int, gpus: int, days: int, end: int, scrape_s: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.ids = Ids(self.rng)
        self._forks = 0
        self.seed, self.days, self.end, self.scrape_s = seed, days, end, scrape_s
        self.H = days * 24
        """The window's length in hours; hour indices count from its start."""
        self.start = end - self.H * 3600
        self.target = gpus
        self.nodes: list[NodeSpec] = []
        self.slots_by_node: dict[str, list[SlotSpec]] = {}
        self.holdings: list[Holding] = []
        self.pods: list[PodSpec] = []
        self.truth: dict[str, Any] = {"planted": {}, "near_misses": {}}
        self.pytorchjobs: list[dict[str, Any]] = []
        self.used: dict[str, list[tuple[int, int]]] = {}
        self._free: dict[tuple[int, str, float, bool], tuple[Arr, Arr]] = {}
        self.api: dict[str, list[dict[str, Any]]] = {
            "volcano_podgroups": [],
            "coscheduling_podgroups": [],
            "kueue_workloads": [],
            "jobsets": [],
            "priorityclasses": [],
        }
        """Whole API objects by list key (the extra PriorityClasses besides the three base
        ones, gang objects)."""

    # ---- nodes and slots -------------------------------------------------------------
    def add_node(self, kind: str, i: int) -> NodeSpec:
        """Add the `i`-th node of a kind with its GPU slots."""
        node = nodes.node_spec(
            kind, i, len(self.nodes), f"nvidia-dcgm-exporter-{self.ids.suffix()}"
        )
        uuids = ["GPU-" + self.ids.uuid() for _ in range(node.gpu_count)]
        self.nodes.append(node)
        self.slots_by_node[node.name] = nodes.slots(node, uuids)
        return node

    def of_kind(self, kind: str) -> list[NodeSpec]:
        """The nodes of a kind, in the order they were added."""
        return [n for n in self.nodes if n.kind == kind]

    def free_slots(self, node: NodeSpec) -> list[SlotSpec]:
        """The node's slots nobody has held yet."""
        return [s for s in self.slots_by_node[node.name] if s.key not in self.used]

    def iso(self, h: float, delta_s: int = 0) -> str:
        """The RFC 3339 time of hour index `h` plus `delta_s` seconds."""
        ts = self.start + h * 3600 + delta_s
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    # ---- activity patterns -----------------------------------------------------------
    def pattern(self, name: str, n: int, h0: int, **kw: float) -> Arr:
        """`n` hourly activity levels (ratios, 4 decimals) from hour index `h0` on, by the
        named pattern and its parameters."""
        r = self.rng
        hod = (np.arange(h0, h0 + n) + (self.start // 3600)) % 24
        if name == "busy":
            v = r.uniform(kw.get("lo", 0.55), kw.get("hi", 0.92), n)
        elif name == "diurnal":
            base, peak = kw.get("base", 0.15), kw.get("peak", 0.6)
            v = base + (peak - base) * np.clip(np.sin((hod - 6) / 24 * 2 * np.pi), 0, None)
            v = v + r.uniform(-0.03, 0.03, n)
        elif name == "idle":
            v = r.uniform(0.0, kw.get("hi", 0.02), n)
        elif name == "level":
            x, j = kw["x"], kw.get("jitter", 0.004)
            v = x + r.uniform(-j, j, n)
            v = v - (v.mean() - x)  # centre exactly on the target mean
        elif name == "nightly":
            v = np.where((hod >= 1) & (hod < 4), r.uniform(0.75, 0.92, n), r.uniform(0, 0.01, n))
        elif name == "tail":
            idle_last = int(kw["idle_last"])
            v = r.uniform(0.6, 0.9, n)
            v[n - idle_last :] = r.uniform(0.0, 0.02, idle_last)
        elif name == "window":
            a, b = int(kw["start_h"]), int(kw["end_h"])
            v = np.where((hod >= a) & (hod < b), r.uniform(0.7, 0.9, n), r.uniform(0, 0.01, n))
        elif name == "notebook":
            bursts = r.random(n) < 0.15
            v = np.where(bursts, r.uniform(0.3, 0.7, n), r.uniform(0.0, 0.03, n))
        else:  # pragma: no cover - programming error
            raise ValueError(name)
        return _round(_clip(v, 0.0, 1.0), 4)

    # ---- holdings --------------------------------------------------------------------
    def hold(
        self,
        slot: SlotSpec,
        pod: PodSpec | None,
        h0: int,
        h1: int,
        act: Arr,
        fb_level: float,
        util: Arr | None = None,
    ) -> None:
        """`pod` holds `slot` over hours [h0, h1) at activity `act`, its framebuffer about
        `fb_level` full; GPU_UTIL follows the activity unless `util` is given."""
        n = h1 - h0
        r = self.rng
        act_amp = _round(np.minimum(np.minimum(act, 1.0 - act), 0.02), 4)
        cap = slot.mem_mib * 0.995
        fb = _round(_clip(fb_level * slot.mem_mib * r.uniform(0.97, 1.0, n), 0, cap))
        fb_amp = np.minimum(_round(fb * 0.01), np.maximum(np.floor(cap - fb), 0))
        tdp = nodes.TDP[slot.node.model]
        power = _round(tdp * (0.09 + 0.8 * act) * slot.fraction, 3)
        if slot.mig_id:
            util = np.zeros(n)
        elif util is None:
            util = _round(_clip(act * 100 * 1.15, 0, 100))
        util_amp = np.minimum(np.minimum(util, 100 - util), 2)
        self.holdings.append(
            Holding(slot, pod, h0, h1, act, act_amp, fb, fb_amp, power, util, util_amp)
        )
        self.used.setdefault(slot.key, []).append((h0, h1))

    def start_later(self, pod: PodSpec, hours: int) -> None:
        """The pod's GPUs show in DCGM `hours` after it was placed (its image pull, say): its
        holdings start later and the hours before are left to `free_rest`, without a random
        draw (the scenario's other bytes stay as they were)."""
        for i, h in enumerate(self.holdings):
            if h.pod is not pod or h.h1 - h.h0 <= hours:
                continue
            k = hours
            self.holdings[i] = Holding(
                h.slot,
                pod,
                h.h0 + k,
                h.h1,
                h.act[k:],
                h.act_amp[k:],
                h.fb_used[k:],
                h.fb_amp[k:],
                h.power[k:],
                h.util[k:],
                h.util_amp[k:],
            )
            spans = self.used[h.slot.key]
            spans[spans.index((h.h0, h.h1))] = (h.h0 + hours, h.h1)

    def draw_power(self, pod: PodSpec, share: float) -> None:
        """The pod's GPUs draw a flat `share` of their board power (`nodes.TDP`), whatever
        their activity (work the activity reading misses), without a random draw."""
        for i, h in enumerate(self.holdings):
            if h.pod is pod:
                level = nodes.TDP[h.slot.node.model] * share * h.slot.fraction
                power = _round(np.full(h.h1 - h.h0, level), 3)
                self.holdings[i] = dataclasses.replace(h, power=power)

    def hold_free(self, slot: SlotSpec, h0: int, h1: int) -> None:
        """What `hold(slot, None, h0, h1, np.zeros(h1 - h0), 0.0)` holds, without its random
        draws (they change nothing: the framebuffer is 0 whatever they are, and nothing draws
        after the free holdings) and with its constant arrays shared, read-only, among the free
        holdings."""
        n = h1 - h0
        key = (n, slot.node.model, slot.fraction, bool(slot.mig_id))
        arrays = self._free.get(key)
        if arrays is None:
            zeros = np.zeros(n)
            zeros.flags.writeable = False
            power = _round(nodes.TDP[slot.node.model] * (0.09 + 0.8 * zeros) * slot.fraction, 3)
            power.flags.writeable = False
            arrays = self._free[key] = (zeros, power)
        zeros, power = arrays
        self.holdings.append(
            Holding(slot, None, h0, h1, zeros, zeros, zeros, zeros, power, zeros, zeros)
        )
        self.used.setdefault(slot.key, []).append((h0, h1))

    def free_rest(self) -> None:
        """Fill every hour of every slot that no pod held with a free holding."""
        for slots in self.slots_by_node.values():
            for slot in slots:
                taken = sorted(self.used.get(slot.key, []))
                cursor = 0
                gaps: list[tuple[int, int]] = []
                for a, b in taken:
                    if a > cursor:
                        gaps.append((cursor, a))
                    cursor = max(cursor, b)
                if cursor < self.H:
                    gaps.append((cursor, self.H))
                for a, b in gaps:
                    self.hold_free(slot, a, b)
        # The steps after the free holdings draw from a stream of their own (derived from the
        # seed and how many times the rest was freed), so that `hold_free` skipping the draws
        # of `hold` changes nothing after it, whichever step frees its rest.
        self._forks += 1
        self.rng = np.random.default_rng([self.seed, self._forks])
        self.ids.rng = self.rng

    # ---- pods ------------------------------------------------------------------------
    def pod(
        self,
        ns: str,
        name: str,
        node: NodeSpec,
        container: str,
        owner: tuple[str, str],
        created_h: int,
        alive: bool = True,
        **kw: Any,
    ) -> PodSpec:
        """Add a pod bound to `node`, owned by (kind, name), created at hour `created_h`; the
        keywords are further `PodSpec` fields."""
        p = PodSpec(
            namespace=ns,
            name=name,
            uid=self.ids.uuid(),
            node=node.name,
            container=container,
            owner_kind=owner[0],
            owner_name=owner[1],
            created_h=created_h,
            alive=alive,
            **kw,
        )
        self.pods.append(p)
        return p

    def deployment_pod(
        self, ns: str, deploy: str, node: NodeSpec, created_h: int, **kw: Any
    ) -> PodSpec:
        """Add a pod of a Deployment's ReplicaSet, named and labelled as the controller does."""
        h = self.ids.suffix(10)
        name = f"{deploy}-{h}-{self.ids.suffix()}"
        labels = {"app": deploy, "pod-template-hash": h}
        labels.update(kw.pop("labels", {}))
        return self.pod(
            ns,
            name,
            node,
            "server",
            ("ReplicaSet", f"{deploy}-{h}"),
            created_h,
            labels=labels,
            **kw,
        )

    # ---- truth -----------------------------------------------------------------------
    def plant(self, code: str, pod: PodSpec, near_miss: str = "", confidence: str = "") -> None:
        """Record that the check `code` must report the pod (with that `confidence`, when
        given), or, with a reason in `near_miss`, must stay quiet about it."""
        self.plant_name(code, "Pod", pod.namespace, pod.name, near_miss, confidence)

    def plant_name(
        self,
        code: str,
        kind: str,
        ns: str,
        name: str,
        near_miss: str = "",
        confidence: str = "",
    ) -> None:
        """`plant` for any kind of object."""
        entry = {"kind": kind, "namespace": ns, "name": name}
        if confidence:
            entry["confidence"] = confidence
        if near_miss:
            entry["why"] = near_miss
            self.truth["near_misses"].setdefault(code, []).append(entry)
        else:
            self.truth["planted"].setdefault(code, []).append(entry)
