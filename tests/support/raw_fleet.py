"""The fleet's figures recomputed from a snapshot's raw JSON with plain Python, independent of
gpuaudit's parsing: the GPU-hours DCGM measured held (labelled series, DRA claims, the
Kubernetes-side join bucket by bucket, KAI Scheduler's reserved GPUs split among their fraction
pods, HAMi's shares), those pods held where no series names them (nodes without an exporter,
pods no series names, HAMi shares of GPUs without series), and the summary made of them."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from tests.support.raw_attribution import (
    hami_tenants,
    joined_mig,
    joined_mig_buckets,
    kai_fraction_runs,
    kai_part,
    overlap,
    ran_of,
    replicas_of,
)

IDLE = 0.05
"""The idle threshold (`Settings`' default)."""


def claimed_since(doc: dict[str, Any], step: float) -> dict[str, tuple[float, str, str]]:
    """UUID -> (the first bucket end that counts as held, namespace, pod), for GPUs pods hold
    through DRA claims: the pod's start (from the raw pod), plus half a bucket."""
    kube = doc["kubernetes"]
    started = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p["status"].get("startTime")
        for page in kube["pods"]
        for p in page["items"]
    }
    uuid = {
        (s["spec"]["pool"]["name"], d["name"]): d["attributes"]["uuid"]["string"]
        for page in kube.get("resourceslices", [])
        for s in page["items"]
        for d in s["spec"]["devices"]
    }
    out = {}
    for page in kube.get("resourceclaims", []):
        for c in page["items"]:
            (pod,) = c["status"]["reservedFor"]
            ns = c["metadata"]["namespace"]
            t = datetime.fromisoformat(started[(ns, pod["name"])])
            for r in c["status"]["allocation"]["devices"]["results"]:
                out[uuid[(r["pool"], r["device"])]] = (t.timestamp() + step / 2, ns, pod["name"])
    return out


@dataclass
class RawFleet:
    """The fleet's figures from raw answers. GPU-hours in whole-GPU equivalents."""

    measured: float = 0.0
    """GPU-hours DCGM measured held by pods (every bucket of a held series)."""
    unattributed: float = 0.0
    """GPU-hours the pods held per the Kubernetes API where no DCGM series names them."""
    with_activity: float = 0.0
    """Of `measured`, the GPU-hours with an activity sample (the mean's weight)."""
    weighted: float = 0.0
    """Activity x GPU-hours, summed."""
    idle: float = 0.0
    """Measured GPU-hours in buckets below the idle threshold."""
    cost: float = 0.0
    """`idle` priced per model."""
    now: float = 0.0
    """GPUs held in the window's last bucket."""
    gpus_total: int = 0
    """Per node, the larger of the GPUs DCGM reported and its `nvidia.com/gpu.count`."""
    by_method: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Measured GPU-hours by how they are joined to a pod: `kubernetes_join`, `dra_claim`,
    `kai_fraction`, `kai_reserved`, `hami_share`, `labelled` (the rest)."""

    @property
    def allocated(self) -> float:
        return self.measured + self.unattributed

    @property
    def mean_activity(self) -> float:
        return self.weighted / self.with_activity


def fleet_from_raw(doc: dict[str, Any], prices: dict[str, float]) -> RawFleet:
    """The fleet's figures of the snapshot `doc` (`raw_snapshot`); `prices`: per GPU-hour by a
    substring of the model name."""
    window = doc["manifest"]["window"]
    step, end = float(window["step"]), float(window["end"])
    out = RawFleet()
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    held_from = claimed_since(doc, step)
    nodes = [n for page in doc["kubernetes"]["nodes"] for n in page["items"]]
    replicas = replicas_of(nodes)
    named = {m["exported_pod"] for m in (i["metric"] for i in series) if m.get("exported_pod")}
    joined = joined_mig(doc, series, named)
    kai = kai_fraction_runs(doc)
    shares = _kai_shares(doc)

    def price(model: str) -> float:
        return next(v for k, v in prices.items() if k in model)

    def add(gh: float, act: float | None, model: str, at_end: float, how: str) -> None:
        out.measured += gh
        out.by_method[how] += gh
        out.now += at_end
        if act is None:
            return
        out.with_activity += gh
        out.weighted += act * gh
        if act < IDLE:
            out.idle += gh
            out.cost += gh * price(model)

    for item in series:
        m = item["metric"]
        key = (m["Hostname"], m["UUID"], m.get("GPU_I_ID", ""))
        claimed = held_from.get(m["UUID"]) if not m.get("exported_pod") else None
        since = claimed[0] if claimed else None
        if not m.get("exported_pod") and key not in joined and since is None:
            continue
        frac = 1.0 / replicas.get(m["Hostname"], 1) if m.get("exported_pod") else 1.0
        if "GPU_I_PROFILE" in m:
            frac = int(m["GPU_I_PROFILE"].split("g.")[0]) / 7
        buckets = joined.get(key) if not m.get("exported_pod") and since is None else None
        fractions = kai.get((m.get("exported_namespace", ""), m.get("exported_pod", "")))
        how = "dra_claim" if since is not None else "labelled"
        how = "kubernetes_join" if buckets is not None else how
        for ts, val in item["values"]:
            t = float(ts)
            if since is not None and t < since:
                continue  # before the pod holding it through a DRA claim started
            if buckets is not None and t not in buckets:
                continue  # a bucket the Kubernetes-side join gave no pod
            gh = frac * step / 3600 * (buckets[t] if buckets is not None else 1.0)
            at_end = frac if t == end else 0.0
            if fractions is None:
                add(gh, float(val), m["modelName"], at_end, how)
                continue
            # A GPU KAI shares: its fraction pods' shares, the rest the reservation pod's.
            ran_in = [(shares[w], kai_part(ran, t, step)) for w, ran in fractions]
            assert sum(s for s, p in ran_in if p > 0) <= 1 + 1e-9, "fractions over the GPU"
            part = sum(s * p for s, p in ran_in)
            add(gh * part, float(val), m["modelName"], at_end * part, "kai_fraction")
            add(gh * (1 - part), float(val), m["modelName"], at_end * (1 - part), "kai_reserved")
    # GPUs shared by HAMi: each pod holds its share in the buckets it ran in (its part of them).
    tenants = hami_tenants(doc)
    for tenant in (t for t in tenants if t["buckets"] is not None):
        share = tenant["share"]
        for ts, (part, a) in tenant["buckets"].items():
            at_end = share if ts == end else 0.0
            add(share * step / 3600 * part, a, tenant["model"], at_end, "hami_share")
    out.unattributed = _unattributed(doc, series, tenants)
    out.gpus_total = _gpus_total(doc)
    return out


def _kai_shares(doc: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> the share of a GPU a KAI fraction pod asks for: `gpu-fraction`, or
    `gpu-memory` over its node's `nvidia.com/gpu.memory` as KAI counts it (rounded down to
    100 MiB; the share rounded up to a hundredth)."""
    memory = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("nvidia.com/gpu.memory")
        for page in doc["kubernetes"]["nodes"]
        for n in page["items"]
    }
    out = {}
    for pod in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        notes = pod["metadata"].get("annotations", {})
        who = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if "gpu-fraction" in notes:
            out[who] = float(notes["gpu-fraction"])
        elif "gpu-memory" in notes:
            gpu = int(memory[pod["spec"]["nodeName"]]) // 100 * 100
            out[who] = math.ceil(float(notes["gpu-memory"]) / gpu * 100) / 100
    return out


def _unattributed(doc: dict[str, Any], series: list[Any], tenants: list[dict[str, Any]]) -> float:
    """GPU-hours pods held per the raw pods where no series names them, over the time each
    ran in the window: whole GPUs over the node's replicas, MIG slices at their share (less
    the buckets the Kubernetes-side join gave the pod its profile in), HAMi pods their shares
    of GPUs without series; a pod a DRA claim joins to a series holds none here."""
    window = doc["manifest"]["window"]
    step, end = float(window["step"]), float(window["end"])
    ends = [float(window["start"]) + step * (k + 1) for k in range(round(window["seconds"] / step))]
    nodes = [n for page in doc["kubernetes"]["nodes"] for n in page["items"]]
    replicas = replicas_of(nodes)
    named = {m["exported_pod"] for m in (i["metric"] for i in series) if m.get("exported_pod")}
    labelled = {
        (m.get("exported_namespace"), m["exported_pod"])
        for m in (i["metric"] for i in series)
        if m.get("exported_pod")
    }
    claimed = {(ns, pod) for _, ns, pod in claimed_since(doc, step).values()}
    joined_at = joined_mig_buckets(doc, series, named)
    hami: dict[tuple[str, str], float] = defaultdict(float)
    for t in tenants:
        if t["buckets"] is None:
            hami[(t["ns"], t["pod"])] += t["share"]
        else:
            hami.setdefault((t["ns"], t["pod"]), 0.0)
    total = 0.0
    for pod in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        who = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        node = pod["spec"].get("nodeName", "")
        ran = ran_of(pod, end)
        if ran is None or not node or who in labelled or who in claimed:
            continue
        hours = {t: overlap(ran, t, step) / 3600 for t in ends}
        if who in hami:
            total += hami[who] * sum(hours.values())
            continue
        for c in pod["spec"]["containers"]:
            for res, n in c.get("resources", {}).get("limits", {}).items():
                if res == "nvidia.com/gpu":
                    total += int(n) / replicas.get(node, 1) * sum(hours.values())
                elif res.startswith("nvidia.com/mig-"):
                    profile = res.removeprefix("nvidia.com/mig-")
                    given = joined_at.get(who, {}).get(profile, set())
                    frac = int(profile.split("g.")[0]) / 7
                    total += int(n) * frac * sum(h for t, h in hours.items() if t not in given)
    return total


def _gpus_total(doc: dict[str, Any]) -> int:
    """Per node, the larger of the GPUs DCGM reported and its `nvidia.com/gpu.count` label."""
    gpus_by_node: dict[str, set[str]] = defaultdict(set)
    for q in ("act_count", "util_count"):
        for item in doc["prometheus"][q][0]["body"]["data"]["result"]:
            gpus_by_node[item["metric"]["Hostname"]].add(item["metric"]["UUID"])
    advertised = {
        n["metadata"]["name"]: int(n["metadata"]["labels"].get("nvidia.com/gpu.count", 0))
        for page in doc["kubernetes"]["nodes"]
        for n in page["items"]
    }
    return sum(
        max(len(gpus_by_node.get(node, ())), advertised.get(node, 0))
        for node in set(gpus_by_node) | set(advertised)
    )


def assert_summary_adds_up(report: dict[str, Any], raw: RawFleet) -> None:
    """The report's summary and attribution ledger against `raw` (`fleet_from_raw` of the
    snapshot it audited): the ledger sums exactly (to the report's rounding) to the allocated
    GPU-hours, each of its joins to the GPU-hours recomputed for it, and the summary's figures
    to the recomputed ones."""
    s, ledger = report["summary"], report["attribution"]
    hours = s["window_hours"]
    parts = [
        v["gpu_hours"] for side in ("attributed", "unattributed") for v in ledger[side].values()
    ]
    assert round(sum(parts), 2) == s["allocated_gpu_hours"] == ledger["allocated_gpu_hours"]
    unattributed = sum(v["gpu_hours"] for v in ledger["unattributed"].values())
    assert unattributed == pytest.approx(raw.unattributed, abs=0.01 * len(ledger["unattributed"]))
    attributed = ledger["attributed"]
    for how, gh in raw.by_method.items():
        if how != "labelled":
            assert attributed[how]["gpu_hours"] == pytest.approx(gh, abs=0.01), how
    labelled = attributed["dcgm_pod_label"]["gpu_hours"] + attributed["shared_split"]["gpu_hours"]
    assert labelled == pytest.approx(raw.by_method["labelled"], abs=0.02)
    assert s["gpus_total"] == raw.gpus_total
    assert s["allocated_gpu_hours"] == pytest.approx(raw.allocated, abs=0.02)
    assert s["gpus_allocated_avg"] == pytest.approx(s["allocated_gpu_hours"] / hours, abs=0.01)
    assert s["allocation_rate"] == pytest.approx(
        s["allocated_gpu_hours"] / hours / s["gpus_total"], abs=1e-4
    )
    assert s["mean_activity"] == pytest.approx(raw.mean_activity, abs=1e-4)
    assert s["idle_gpu_hours"] == pytest.approx(raw.idle, abs=0.01)
    assert s["wasted_cost"] == pytest.approx(raw.cost, abs=0.01)
    assert s["gpus_allocated_now"] == pytest.approx(raw.now, abs=0.01)


def released_of(report: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(namespace, pod) -> from when the plan after release releases it (unix seconds): GPU001's
    pods for the whole window (-inf), GPU002's from the start of their idle tail."""
    out: dict[tuple[str, str], float] = {}
    for f in report["findings"]:
        key = (f["resource"]["namespace"], f["resource"]["name"])
        if f["code"] == "GPU001":
            out[key] = -math.inf
        elif f["code"] == "GPU002":
            start = datetime.fromisoformat(f["evidence"]["idle_tail_from"].replace("Z", "+00:00"))
            out.setdefault(key, start.timestamp())
    return out
