"""KAI Scheduler's GPU fractions: which pods hold a GPU for others (reservation pods), which
pods share it and how much of it each asked for (`docs/domain.md`, KAI Scheduler).

KAI shares a GPU by running a *reservation pod* that requests the whole device
(`nvidia.com/gpu: 1`) in the resource-reservation namespace; the pods that asked for a
fraction (the annotations `gpu-fraction`, `gpu-memory`, `gpu-fraction-num-devices`) request
no GPU from Kubernetes and are pointed at the reserved device. Both carry the device's *GPU
group* in the label `runai-gpu-group` (a pod on several GPUs: `runai-gpu-group/<group>`).
kubelet, and so dcgm-exporter, know only the reservation pod: every DCGM series of the device
names it. `gpuaudit.inventory.fractions` splits those series among the fraction pods.

A reservation pod is told, as KAI's scheduler tells it, by its `app` label:
`kai-resource-reservation` (the default since KAI v0.6) or `runai-reservation` (before), with
the GPU group label. It is KAI's, not a workload: no finding is about it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuaudit.core import numbers
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.kube import Objects, finished, timestamp

if TYPE_CHECKING:
    import pandas as pd

GPU_GROUP = "runai-gpu-group"
"""The label naming a shared GPU's group, on its reservation pod and its fraction pods."""
MULTI_GROUP_PREFIX = GPU_GROUP + "/"
"""A fraction pod on several GPUs carries `runai-gpu-group/<group>: <group>` for each."""
APP_LABEL = "app"
RESERVATION_APPS = ("kai-resource-reservation", "runai-reservation")
"""The `app` label values of reservation pods (KAI's defaults, since v0.6 and before)."""
FRACTION = "gpu-fraction"
MEMORY = "gpu-memory"
DEVICES = "gpu-fraction-num-devices"
MEMORY_LABEL = "nvidia.com/gpu.memory"
"""GPU Feature Discovery's node label: each GPU's memory in MiB, which KAI's scheduler divides
a `gpu-memory` request by."""
QUEUE_LABELS = ("kai.scheduler/queue", "runai/queue")
"""The pod label naming its queue (KAI's default since v0.6, and before)."""
PODGROUP_ANNOTATION = "pod-group-name"
"""The pod annotation naming its KAI PodGroup (written by KAI's pod grouper)."""
MAX_DEVICES = 64
"""Most GPUs one fraction pod is taken to span (`gpu-fraction-num-devices`)."""
_TIB_IN_MIB = 1024 * 1024
_NAME = 120


def is_reservation(labels: Any) -> bool:
    """Whether a pod with these labels is a KAI reservation pod."""
    return (
        isinstance(labels, Mapping)
        and labels.get(APP_LABEL) in RESERVATION_APPS
        and bool(labels.get(GPU_GROUP))
    )


def reservations(pods: pd.DataFrame) -> frozenset[tuple[str, str]]:
    """(namespace, pod) of every KAI reservation pod in the pods table."""
    if pods.empty:
        return frozenset()
    return frozenset(
        (str(ns), str(pod))
        for ns, pod, labels in zip(
            pods[C.NAMESPACE].tolist(), pods[C.POD].tolist(), pods[C.LABELS].tolist(), strict=True
        )
        if is_reservation(labels)
    )


def reserved_for(pods: pd.DataFrame) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
    """(namespace, pod) of every KAI reservation pod in the pods table -> its GPU group and the
    `namespace/pod` of the fraction pods of that group on its node (the workloads it holds the
    GPU for), sorted: what a finding names instead of the reservation pod."""
    if pods.empty:
        return {}
    rows = zip(
        pods[C.NAMESPACE].tolist(),
        pods[C.POD].tolist(),
        pods[C.NODE].tolist(),
        pods[C.LABELS].tolist(),
        strict=True,
    )
    held: dict[tuple[str, str], tuple[str, str]] = {}
    members: dict[tuple[str, str], set[str]] = {}
    for ns, pod, node, labels in rows:
        if not isinstance(labels, Mapping):
            continue
        if is_reservation(labels):
            held[(str(ns), str(pod))] = (str(labels[GPU_GROUP]), str(node or ""))
            continue
        for g in groups(labels):
            members.setdefault((g, str(node or "")), set()).add(f"{ns}/{pod}")
    return {key: (g, tuple(sorted(members.get((g, node), ())))) for key, (g, node) in held.items()}


def groups(labels: Mapping[str, Any]) -> tuple[str, ...]:
    """The GPU groups a pod's labels name (`runai-gpu-group`, and each
    `runai-gpu-group/<group>`), sorted."""
    out = {str(labels[GPU_GROUP])} if labels.get(GPU_GROUP) else set()
    out |= {str(v) for k, v in labels.items() if str(k).startswith(MULTI_GROUP_PREFIX) and v}
    return tuple(sorted(out))


def gpu_memory(labels: Mapping[str, Any]) -> float | None:
    """Each GPU's memory (MiB) of a node as KAI's scheduler reads it from `nvidia.com/gpu.memory`:
    a value of 1 TiB-in-MiB or more is bytes, and it is rounded down to a multiple of 100 MiB;
    None when absent or unreadable."""
    raw = numbers.whole_number(labels.get(MEMORY_LABEL))
    if raw is None or raw <= 0:
        return None
    mib = raw if raw < _TIB_IN_MIB else raw // (1024 * 1024)
    mib -= mib % 100
    return float(mib) if mib > 0 else None


def memory_share(mib: float, gpu_mib: float) -> float:
    """A `gpu-memory` request as KAI counts it: the share of the GPU's memory, rounded up to
    hundredths, at most the whole GPU."""
    return min(1.0, math.ceil(mib / gpu_mib * 100 - 1e-9) / 100)


@dataclass(frozen=True)
class Request:
    """What a fraction pod asked for, per GPU."""

    share: float | None
    """`gpu-fraction`: its share of each GPU; None when it asked by memory."""
    memory_mib: float | None
    """`gpu-memory`: MiB of each GPU; None when it asked by share."""
    devices: int
    """`gpu-fraction-num-devices` (1 when absent)."""

    def of(self, gpu_mib: float | None) -> float | None:
        """Its share of one GPU of `gpu_mib` MiB (None: unknown, a memory request without the
        GPU's memory)."""
        if self.share is not None:
            return self.share
        if self.memory_mib is None or not gpu_mib:
            return None
        return memory_share(self.memory_mib, gpu_mib)


def pending_share(req: Request, smallest_mib: float | None) -> float:
    """The share of one GPU a pending fraction pod asks for per GPU, as KAI's proportion
    plugin counts it in its queue's request: its `gpu-fraction`, or its `gpu-memory` over the
    smallest GPU memory of the cluster's nodes (`gpu_memory`; not rounded); 0 where neither is
    known."""
    if req.share is not None:
        return req.share
    if req.memory_mib is None or not smallest_mib:
        return 0.0
    return req.memory_mib / smallest_mib


def request(annotations: Any, what: str, notes: list[str] | None = None) -> Request | None:
    """The fraction a pod's annotations ask for; None when they ask for none. An annotation
    that is no number in range (`gpu-fraction` above 0 and at most 1, `gpu-memory` a whole MiB
    count, `gpu-fraction-num-devices` 1 to `MAX_DEVICES`) is a sentence in `notes` naming the
    pod (`what`): an unreadable share or memory leaves the pod's share unknown (`Request` with
    neither figure), an unreadable device count is taken as 1."""
    if not isinstance(annotations, Mapping):
        return None
    raw_f, raw_m = annotations.get(FRACTION), annotations.get(MEMORY)
    if raw_f is None and raw_m is None:
        return None
    problems: list[str] = []
    share = memory = None
    unknown = "its share of the GPU is unknown"
    if raw_f is not None:
        share = numbers.quantity(raw_f)
        if share is None or not 0 < share <= 1:
            problems.append(f"{FRACTION} {str(raw_f)[:40]!r} is no share of a GPU; {unknown}")
            share = None
    else:
        m = numbers.whole_number(raw_m)
        if m is None or m <= 0:
            problems.append(f"{MEMORY} {str(raw_m)[:40]!r} is no count of MiB; {unknown}")
        else:
            memory = float(m)
    raw_n = annotations.get(DEVICES)
    devices = 1 if raw_n is None else numbers.whole_number(raw_n)
    if devices is None or not 1 <= devices <= MAX_DEVICES:
        problems.append(
            f"{DEVICES} {str(raw_n)[:40]!r} is no count of GPUs (1 to {MAX_DEVICES}); taken as 1"
        )
        devices = 1
    if notes is not None:
        notes.extend(f"KAI fraction pod {what}: {p}" for p in problems)
    return Request(share, memory, devices)


@dataclass(frozen=True)
class Member:
    """A fraction pod of a GPU group: running, or ended in phase Succeeded or Failed at a
    known time."""

    namespace: str
    pod: str
    node: str
    request: Request
    started: float | None
    """When it started (`status.startTime`, else its creation); None when unknown."""
    ended: float | None = None
    """When it ended (the latest `finishedAt` of its containers); None while it runs."""


@dataclass(frozen=True)
class Fractions:
    """KAI's shared GPUs in one snapshot: the reservation pods and the fraction pods of each
    GPU group. Empty when the cluster runs no KAI fractions."""

    reservations: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, pod) of each reservation pod -> its GPU group."""
    members: Mapping[str, tuple[Member, ...]] = field(default_factory=dict)
    """GPU group -> its fraction pods, running or ended at a known time, by (namespace,
    pod)."""
    memory: Mapping[str, float] = field(default_factory=dict)
    """Node -> each GPU's memory (MiB) as KAI reads it (`gpu_memory`), where labelled."""


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    val = obj.get(key) if isinstance(obj, Mapping) else None
    return val if isinstance(val, Mapping) else {}


def read(objects: Objects, notes: list[str] | None = None) -> Fractions:
    """The reservation and fraction pods among the pods (by list key, see
    `gpuaudit.inventory.kube.index`), and the GPU memory of each node. A fraction pod counts
    while it runs, and one that ended (Succeeded, Failed) where its end is known
    (`gpuaudit.inventory.kube.finished`): it held its share until then. One that ended at an
    unknown time is left out, as nothing says when it held its share (its GPU-hours count as
    the reservation pod's)."""
    reserved: dict[tuple[str, str], str] = {}
    members: dict[str, list[Member]] = {}
    for pod in objects.get("pods", ()):
        meta, spec, status = _map(pod, "metadata"), _map(pod, "spec"), _map(pod, "status")
        labels = _map(meta, "labels")
        key = (str(meta.get("namespace", "") or ""), str(meta.get("name", "") or ""))
        if is_reservation(labels):
            reserved[key] = str(labels[GPU_GROUP])
            continue
        ended = finished(status)
        if status.get("phase") != "Running" and ended is None:
            continue
        names = groups(labels)
        if not names:
            continue
        what = f"{key[0][:_NAME]}/{key[1][:_NAME]}"
        req = request(_map(meta, "annotations"), what, notes)
        if req is None:
            continue
        started = timestamp(status.get("startTime")) or timestamp(meta.get("creationTimestamp"))
        node = str(spec.get("nodeName", "") or "")
        for g in names:
            members.setdefault(g, []).append(Member(key[0], key[1], node, req, started, ended))
    memory: dict[str, float] = {}
    if reserved:
        for obj in objects.get("nodes", ()):
            mib = gpu_memory(_map(_map(obj, "metadata"), "labels"))
            if mib is not None:
                memory[str(_map(obj, "metadata").get("name", ""))] = mib
    return Fractions(
        reservations=reserved,
        members={
            g: tuple(sorted(ms, key=lambda m: (m.namespace, m.pod))) for g, ms in members.items()
        },
        memory=memory,
    )


def share_of(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> the GPUs a fraction pod asks for in all (`gpu-fraction` x
    `gpu-fraction-num-devices`, as KAI counts a PodGroup's request), for the pods that ask by
    share; a `gpu-memory` request is left out (its share depends on the GPU it gets)."""
    out: dict[tuple[str, str], float] = {}
    for pod in pods:
        meta = _map(pod, "metadata")
        req = request(_map(meta, "annotations"), "")
        if req is not None and req.share is not None:
            key = (str(meta.get("namespace", "") or ""), str(meta.get("name", "") or ""))
            out[key] = req.share * req.devices
    return out
