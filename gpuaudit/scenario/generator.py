"""A deterministic, seeded generator of realistic GPU clusters with planted problems.

Node types: 8x H100 80GB HGX, 8x A100 80GB with MIG in the mixed strategy (`all-balanced`:
3g.40gb + 2g.20gb + 2x 1g.10gb per GPU), and 4x L40S PCIe; plus three 4x GB200 trays in two
NVLink domains (`nvidia.com/gpu.clique`) and one more L40S node for the placement cases.
Workloads: gang-scheduled PyTorchJobs, inference Deployments (whole GPUs and MIG slices),
Kubeflow notebooks and nightly batch, Volcano, coscheduling and Kueue gangs, a JobSet, and
pods pending for GPUs. Every planted problem, and every near-miss that must stay quiet, is
listed in the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuaudit.gcpause import without_gc
from gpuaudit.scenario import cases
from gpuaudit.scenario.model import Holding, NodeSpec, PodSpec, SlotSpec

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L40S = "NVIDIA L40S"
GB200 = "NVIDIA GB200"
MEM = {H100: 81559, A100: 81920, L40S: 46068, GB200: 189471}
MIG_LAYOUT = (
    ("3g.40gb", "2", 40192),
    ("2g.20gb", "3", 19968),
    ("1g.10gb", "9", 9856),
    ("1g.10gb", "10", 9856),
)
DEFAULT_END = 1795392000  # 2026-11-23T00:00:00Z, a Monday: fixed so scenarios are reproducible.

Rng = np.random.Generator
Arr = np.ndarray[Any, np.dtype[Any]]
TDP = {H100: 700.0, A100: 400.0, L40S: 350.0, GB200: 1200.0}

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


@dataclass
class Scenario:
    seed: int
    days: int
    start: int
    end: int
    scrape_s: int
    nodes: list[NodeSpec]
    slots: list[SlotSpec]
    holdings: list[Holding]
    pods: list[PodSpec]
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Extra API objects by resource (pytorchjobs, priorityclasses, ...)."""
    truth: dict[str, Any] = field(default_factory=dict)

    @property
    def hours(self) -> int:
        return self.days * 24


class _Ids:
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


class _Builder:
    def __init__(self, seed: int, gpus: int, days: int, end: int, scrape_s: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.ids = _Ids(self.rng)
        self.seed, self.days, self.end, self.scrape_s = seed, days, end, scrape_s
        self.H = days * 24
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
        model, product, count = {
            "h100": (H100, "NVIDIA-H100-80GB-HBM3", 8),
            "a100-mig": (A100, "NVIDIA-A100-SXM4-80GB", 8),
            "l40s": (L40S, "NVIDIA-L40S", 4),
            "gb200": (GB200, "NVIDIA-GB200", 4),
        }[kind]
        name = f"{kind}-node-{i:03d}"
        ip = f"10.{len(self.nodes) // 250 % 250}.{len(self.nodes) % 250}.{(i % 200) + 10}"
        node = NodeSpec(
            name=name,
            kind=kind,
            model=model,
            product=product,
            gpu_count=count,
            ip=ip,
            exporter_pod=f"nvidia-dcgm-exporter-{self.ids.suffix()}",
        )
        labels = {
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.memory": str(MEM[model]),
            "nvidia.com/gpu.family": {
                "h100": "hopper",
                "a100-mig": "ampere",
                "l40s": "ada-lovelace",
                "gb200": "blackwell",
            }[kind],
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/mig.capable": "false" if kind == "l40s" else "true",
        }
        capacity = {"cpu": "96", "memory": "1056Gi", "pods": "110"}
        if kind == "a100-mig":
            labels.update(
                {
                    "nvidia.com/mig.strategy": "mixed",
                    "nvidia.com/mig.config": "all-balanced",
                    "nvidia.com/mig.config.state": "success",
                    "nvidia.com/mig-1g.10gb.count": str(2 * count),
                    "nvidia.com/mig-2g.20gb.count": str(count),
                    "nvidia.com/mig-3g.40gb.count": str(count),
                }
            )
            capacity.update(
                {
                    "nvidia.com/mig-1g.10gb": str(2 * count),
                    "nvidia.com/mig-2g.20gb": str(count),
                    "nvidia.com/mig-3g.40gb": str(count),
                }
            )
        else:
            labels["nvidia.com/mig.strategy"] = "single" if kind in ("h100", "gb200") else "none"
            capacity["nvidia.com/gpu"] = str(count)
        if kind == "h100":
            labels["nvidia.com/gpu.machine"] = "HGX-H100"
        node.labels, node.capacity = labels, capacity
        slots: list[SlotSpec] = []
        for g in range(count):
            uuid = "GPU-" + self.ids.uuid()
            pci = f"00000000:{(0x18 + g * 0x11) & 0xFF:02X}:00.0"
            if kind == "a100-mig":
                for prof, gid, mem in MIG_LAYOUT:
                    frac = int(prof[0]) / 7.0
                    slots.append(SlotSpec(node, g, uuid, pci, gid, prof, mem, frac))
            else:
                slots.append(SlotSpec(node, g, uuid, pci, "", "", MEM[model], 1.0))
        self.nodes.append(node)
        self.slots_by_node[name] = slots
        return node

    def build_nodes(self) -> None:
        n_h100 = max(1, round(self.target * 0.6 / 8))
        n_a100 = max(1, round(self.target * 0.2 / 8))
        rest = self.target - 8 * (n_h100 + n_a100)
        n_l40s = max(1, round(rest / 4))
        for i in range(n_h100):
            self.add_node("h100", i)
        for i in range(n_a100):
            self.add_node("a100-mig", i)
        for i in range(n_l40s):
            self.add_node("l40s", i)

    # ---- activity patterns -----------------------------------------------------------
    def pattern(self, name: str, n: int, h0: int, **kw: float) -> Arr:
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
        n = h1 - h0
        r = self.rng
        act_amp = _round(np.minimum(np.minimum(act, 1.0 - act), 0.02), 4)
        cap = slot.mem_mib * 0.995
        fb = _round(_clip(fb_level * slot.mem_mib * r.uniform(0.97, 1.0, n), 0, cap))
        fb_amp = np.minimum(_round(fb * 0.01), np.maximum(np.floor(cap - fb), 0))
        tdp = TDP[slot.node.model]
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
            power = _round(TDP[slot.node.model] * (0.09 + 0.8 * zeros) * slot.fraction, 3)
            power.flags.writeable = False
            arrays = self._free[key] = (zeros, power)
        zeros, power = arrays
        self.holdings.append(
            Holding(slot, None, h0, h1, zeros, zeros, zeros, zeros, power, zeros, zeros)
        )
        self.used.setdefault(slot.key, []).append((h0, h1))

    def free_rest(self) -> None:
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

    def plant(self, code: str, pod: PodSpec, near_miss: str = "") -> None:
        self.plant_name(code, "Pod", pod.namespace, pod.name, near_miss)

    def plant_name(self, code: str, kind: str, ns: str, name: str, near_miss: str = "") -> None:
        entry = {"kind": kind, "namespace": ns, "name": name}
        if near_miss:
            entry["why"] = near_miss
            self.truth["near_misses"].setdefault(code, []).append(entry)
        else:
            self.truth["planted"].setdefault(code, []).append(entry)

    # ---- workloads -------------------------------------------------------------------
    def free_slots(self, node: NodeSpec) -> list[SlotSpec]:
        return [s for s in self.slots_by_node[node.name] if s.key not in self.used]

    def gang(self, nodes: list[NodeSpec], idx: int) -> None:
        job = f"llm-pretrain-{idx:03d}"
        ns = "ml-train"
        h0 = int(self.rng.integers(0, 12))
        job_uid = self.ids.uuid()
        self.pytorchjobs.append(
            {"namespace": ns, "name": job, "uid": job_uid, "workers": len(nodes) - 1}
        )
        for j, node in enumerate(nodes):
            role = "master" if j == 0 else "worker"
            name = f"{job}-{role}-{0 if j == 0 else j - 1}"
            labels = {
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": str(0 if j == 0 else j - 1),
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
            }
            if j == 0:
                labels["training.kubeflow.org/job-role"] = "master"
            p = self.pod(
                ns,
                name,
                node,
                "pytorch",
                ("PyTorchJob", job),
                h0,
                gpus=8,
                labels=labels,
                priority_class="training",
                priority=1000,
                owner_uid=job_uid,
            )
            act = self.pattern("busy", self.H - h0, h0)
            for slot in self.free_slots(node):
                self.hold(slot, p, h0, self.H, act + 0, 0.82)

    def inference(
        self, node: NodeSpec, deploy: str, gpus: int, pattern: str, ns: str = "serving", **kw: float
    ) -> PodSpec | None:
        free = self.free_slots(node)
        if len(free) < gpus:
            return None
        h0 = int(kw.pop("h0", 0))
        p = self.deployment_pod(
            ns, deploy, node, h0, gpus=gpus, priority_class="serving", priority=10000
        )
        act = self.pattern(pattern, self.H - h0, h0, **kw)
        for slot in free[:gpus]:
            self.hold(slot, p, h0, self.H, act + 0, float(self.rng.uniform(0.3, 0.55)))
        return p

    def notebook(
        self,
        node: NodeSpec,
        user: str,
        pattern: str,
        h0: int = 0,
        h1: int | None = None,
        **kw: float,
    ) -> PodSpec | None:
        free = self.free_slots(node)
        if not free:
            return None
        h1 = self.H if h1 is None else h1
        name = f"{user}-0"
        p = self.pod(
            "notebooks",
            name,
            node,
            "notebook",
            ("StatefulSet", user),
            h0,
            alive=h1 == self.H,
            gpus=1,
            labels={"notebook-name": user, "statefulset": user},
        )
        self.hold(
            free[0],
            p,
            h0,
            h1,
            self.pattern(pattern, h1 - h0, h0, **kw),
            float(self.rng.uniform(0.15, 0.4)),
        )
        return p

    def mig_server(
        self, node: NodeSpec, deploy: str, profile: str, pattern: str, **kw: float
    ) -> PodSpec | None:
        free = [s for s in self.free_slots(node) if s.profile == profile]
        if not free:
            return None
        p = self.deployment_pod(
            "serving", deploy, node, 0, mig={profile: 1}, priority_class="serving", priority=10000
        )
        self.hold(
            free[0],
            p,
            0,
            self.H,
            self.pattern(pattern, self.H, 0, **kw),
            float(self.rng.uniform(0.5, 0.8)),
        )
        return p

    def nightly(self, node: NodeSpec, name: str) -> PodSpec | None:
        free = self.free_slots(node)
        if not free:
            return None
        p = self.deployment_pod(
            "batch", name, node, 0, gpus=1, priority_class="batch", priority=100
        )
        self.hold(free[0], p, 0, self.H, self.pattern("nightly", self.H, 0), 0.35)
        if self.H >= 72:
            self.plant("GPU003", p)
        return p

    def custom(
        self,
        node: NodeSpec,
        ns: str,
        name: str,
        owner: tuple[str, str],
        gpus: int,
        act: Arr,
        fb_level: float,
        util: Arr | None = None,
        profile: str = "",
        **podkw: Any,
    ) -> PodSpec | None:
        free = self.free_slots(node)
        if profile:
            free = [sl for sl in free if sl.profile == profile]
        if len(free) < max(1, gpus):
            return None
        p = self.pod(
            ns,
            name,
            node,
            "main",
            owner,
            0,
            gpus=0 if profile else gpus,
            mig={profile: 1} if profile else {},
            **podkw,
        )
        for slot in free[: max(1, gpus)]:
            self.hold(slot, p, 0, self.H, act + 0, fb_level, util)
        return p

    def plant_checks(
        self, h100: list[NodeSpec], a100: list[NodeSpec], l40s: list[NodeSpec], i: int
    ) -> None:
        """Planted cases and near-misses of GPU002, GPU003, GPU020, GPU021 and GPU040."""
        H = self.H
        n2 = h100[min(len(h100) - 1, 1)]
        n3 = h100[min(len(h100) - 1, 2)]
        job = ("Job", "")
        tail = min(20, H // 3)
        p = self.custom(
            n2,
            "ml-train",
            f"finetune-done-{i}",
            ("Job", f"finetune-done-{i}"),
            4,
            self.pattern("tail", H, 0, idle_last=tail),
            0.7,
        )
        if p:
            self.plant("GPU002", p)
        p = self.custom(
            n2,
            "ml-train",
            f"finetune-recent-{i}",
            ("Job", f"finetune-recent-{i}"),
            2,
            self.pattern("tail", H, 0, idle_last=4),
            0.7,
        )
        if p:
            self.plant("GPU002", p, "idle for the last 4 h only")
        p = self.custom(
            n2,
            "search",
            f"embedder-{i}",
            ("StatefulSet", f"embedder-{i}"),
            1,
            self.pattern("level", H, 0, x=0.08, jitter=0.01),
            0.074,
        )
        if p:
            self.plant("GPU021", p)
        p = self.custom(
            n2,
            "search",
            f"bigmodel-{i}",
            ("StatefulSet", f"bigmodel-{i}"),
            1,
            self.pattern("level", H, 0, x=0.3, jitter=0.02),
            0.62,
        )
        if p:
            self.plant("GPU021", p, "50 GB peak fits no smaller MIG profile")
        hang = min(30, H // 2)
        act = self.pattern("busy", H, 0)
        act[H - hang :] = 0.08
        util = np.round(np.clip(act * 115, 0, 100))
        util[H - hang :] = 97
        p = self.custom(
            n3, "ml-train", f"allreduce-hang-{i}", ("Job", f"allreduce-hang-{i}"), 2, act, 0.8, util
        )
        if p:
            self.plant("GPU040", p)
        act = self.pattern("level", H, 0, x=0.35, jitter=0.02)
        p = self.custom(
            n3,
            "serving",
            f"decode-busy-{i}",
            ("StatefulSet", f"decode-busy-{i}"),
            1,
            act,
            0.6,
            np.full(H, 92.0),
        )
        if p:
            self.plant("GPU040", p, "high GPU_UTIL with real SM work (35 %)")
        p = self.custom(
            n3,
            "serving",
            f"longctx-{i}",
            ("StatefulSet", f"longctx-{i}"),
            1,
            self.pattern("busy", H, 0, lo=0.4, hi=0.6),
            0.985,
        )
        if p:
            self.plant("GPU020", p)
        if a100:
            a = a100[0]
            p = self.custom(
                a,
                "serving",
                f"llm-7b-int4-{i}",
                ("StatefulSet", f"llm-7b-int4-{i}"),
                1,
                self.pattern("diurnal", H, 0, base=0.3, peak=0.7),
                0.985,
                profile="1g.10gb",
            )
            if p:
                self.plant("GPU020", p)
            p = self.custom(
                a,
                "serving",
                f"llm-3b-{i}",
                ("StatefulSet", f"llm-3b-{i}"),
                1,
                self.pattern("diurnal", H, 0, base=0.3, peak=0.7),
                0.86,
                profile="1g.10gb",
            )
            if p:
                self.plant("GPU020", p, "p95 framebuffer 0.87")
            p = self.custom(
                a,
                "ml-train",
                f"oom-loop-{i}",
                ("Job", f"oom-loop-{i}"),
                1,
                self.pattern("level", H, 0, x=0.3),
                0.5,
                profile="2g.20gb",
                restarts=7,
                last_termination=(
                    "Error",
                    "torch.OutOfMemoryError: CUDA out of memory. Tried "
                    "to allocate 2.00 GiB (GPU 0; 19.50 GiB total capacity)",
                ),
            )
            if p:
                self.plant("GPU020", p)
            p = self.custom(
                a,
                "ml-train",
                f"host-oom-{i}",
                ("Job", f"host-oom-{i}"),
                1,
                self.pattern("level", H, 0, x=0.3),
                0.5,
                profile="2g.20gb",
                restarts=5,
                last_termination=("OOMKilled", ""),
            )
            if p:
                self.plant("GPU020", p, "host OOMKilled, not GPU memory")
        if l40s and H >= 72:
            p = self.custom(
                l40s[0],
                "batch",
                f"daytime-batch-{i}",
                ("StatefulSet", f"daytime-batch-{i}"),
                1,
                self.pattern("window", H, 0, start_h=6, end_h=18),
                0.3,
            )
            if p:
                self.plant("GPU003", p, "active 12 h a day")
        del job

    def build_workloads(self) -> None:
        by_kind: dict[str, list[NodeSpec]] = {}
        for n in self.nodes:
            by_kind.setdefault(n.kind, []).append(n)
        h100, a100, l40s = (
            by_kind.get("h100", []),
            by_kind.get("a100-mig", []),
            by_kind.get("l40s", []),
        )
        k = max(1, self.target // 400)
        # Planted and near-miss cases first, on the first nodes of each kind.
        planted_h100 = h100[: min(len(h100), 2)]
        pn = planted_h100[0]
        for i in range(k):
            p = self.inference(
                pn if i == 0 else h100[min(len(h100) - 1, 2 + i)],
                f"llm-canary-{i}",
                2,
                "idle",
                ns="serving",
            )
            if p:
                self.plant("GPU001", p)
            nb = self.notebook(pn, f"nb-idle-{i}", "idle", h0=int(self.H * 0.2))
            if nb:
                self.plant("GPU001", nb)
            if nb:
                self.plant("GPU021", nb)
            miss = self.notebook(pn, f"nb-six-{i}", "level", x=0.06)
            if miss:
                self.plant("GPU001", miss, "mean activity 6 %")
                self.plant("GPU021", miss)
            short = self.notebook(pn, f"nb-short-{i}", "idle", h0=self.H - 3)
            if short:
                self.plant("GPU001", short, "held 3 h")
        if l40s:
            for i in range(k):
                p = self.inference(l40s[0], f"embed-stale-{i}", 1, "idle", ns="search")
                if p:
                    self.plant("GPU001", p)
                    self.plant("GPU021", p)
                self.nightly(l40s[0], f"nightly-etl-{i}")
        if a100:
            for i in range(k):
                p = self.mig_server(a100[0], f"tiny-llm-{i}", "1g.10gb", "idle")
                if p:
                    self.plant("GPU001", p)
        for i in range(k):
            self.plant_checks(h100, a100, l40s, i)
        # Background workloads on the remaining capacity.
        rest_h100 = [n for n in h100 if self.free_slots(n) and len(self.free_slots(n)) == 8]
        self.rng.shuffle(rest_h100)  # type: ignore[arg-type,unused-ignore]
        g = 0
        while len(rest_h100) >= 2 and g < max(1, len(h100) // 4):
            size = int(min(len(rest_h100), self.rng.choice([2, 3, 4])))
            self.gang(rest_h100[:size], g)
            rest_h100 = rest_h100[size:]
            g += 1
        for i, node in enumerate(h100):
            while len(self.free_slots(node)) >= 2 and self.rng.random() < 0.8:
                self.inference(
                    node,
                    f"chat-{i:03d}-{len(self.free_slots(node))}",
                    2,
                    "diurnal",
                    base=float(self.rng.uniform(0.1, 0.2)),
                    peak=float(self.rng.uniform(0.5, 0.8)),
                )
            if self.free_slots(node) and self.rng.random() < 0.5:
                self.notebook(node, f"nb-{i:03d}", "notebook")
        for i, node in enumerate(a100):
            for j, prof in enumerate(("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb") * 8):
                if self.rng.random() < 0.75:
                    self.mig_server(
                        node,
                        f"mig-{prof.split('.')[0]}-{i:03d}-{j:02d}",
                        prof,
                        "diurnal",
                        base=0.1,
                        peak=0.7,
                    )
        for i, node in enumerate(l40s):
            for j in range(4):
                r = self.rng.random()
                if r < 0.55:
                    self.inference(
                        node, f"vision-{i:03d}-{j}", 1, "diurnal", ns="vision", base=0.2, peak=0.75
                    )
                elif r < 0.7:
                    self.nightly(node, f"report-batch-{i:03d}-{j}")
        # GPU080: a node whose dcgm-exporter is missing, and a pending pod (not a holder).
        held_nodes = {p.node for p in self.pods if p.alive}
        dark = next((n for n in reversed(h100[3:]) if n.name in held_nodes), None)
        if dark is not None:
            dark.exporter = False
            self.plant_name("GPU080", "Node", "", dark.name)
        for i in range(k):
            pend = self.pod(
                "ml-train",
                f"queued-train-{i}",
                h100[0],
                "main",
                ("Job", f"queued-train-{i}"),
                self.H - 2,
                gpus=8,
                phase="Pending",
                priority_class="training",
                priority=1000,
            )
            pend.node = ""
            self.plant("GPU080", pend, "pending, holds no GPU")

    def build_extra(self) -> None:
        """Cases of GPU010-GPU070, placed after the base workloads so that those stay exactly
        as they were: in the GPUs the base left free, and on nodes added here."""
        h100 = [n for n in self.nodes if n.kind == "h100"]
        l40s = [n for n in self.nodes if n.kind == "l40s"]
        cases.plant_gangs(self, h100)
        cases.plant_health(self, h100)
        cases.plant_placement(self, l40s)
        cases.plant_pending(self)


@without_gc
def generate(
    gpus: int, days: int, seed: int, end: int = DEFAULT_END, scrape_s: int = 60
) -> Scenario:
    """Build a scenario. The same arguments always give the same scenario."""
    if gpus < 12:
        raise ValueError("a scenario needs at least 12 GPUs")
    if days < 1:
        raise ValueError("a scenario needs at least 1 day")
    if scrape_s < 2 or scrape_s % 2 or 3600 % (2 * scrape_s):
        raise ValueError("scrape interval must be an even number of seconds dividing 30 min")
    b = _Builder(seed, gpus, days, end, scrape_s)
    b.build_nodes()
    b.build_workloads()
    b.build_extra()
    b.free_rest()
    cases.truth_from_state(b)
    slots = [s for n in b.nodes for s in b.slots_by_node[n.name]]
    truth = dict(b.truth)
    truth.update(
        {
            "seed": seed,
            "gpus": sum(n.gpu_count for n in b.nodes),
            "days": days,
            "start": b.start,
            "end": end,
        }
    )
    sc = Scenario(
        seed=seed,
        days=days,
        start=b.start,
        end=end,
        scrape_s=scrape_s,
        nodes=b.nodes,
        slots=slots,
        holdings=b.holdings,
        pods=b.pods,
        truth=truth,
    )
    sc.objects["pytorchjobs"] = b.pytorchjobs
    sc.objects.update(b.api)
    return sc
