"""Capabilities discovery: what the backend is and which DCGM data it holds, found out from cheap
metadata calls (build info, metric and label names, recording rules) before any query runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.client import PromClient, PromError


@dataclass
class Capabilities:
    """What discovery found out about the backend; recorded as the manifest's `capabilities`."""

    backend: str = "unknown"
    version: str = ""
    metrics: list[str] = field(default_factory=list)
    pod_label: str = "any"
    uuid_label: str = "UUID"
    mig: bool = False
    profiling: bool = False
    kube_state_metrics: bool = False
    recorded: list[str] = field(default_factory=list)
    """Metrics read through gpuaudit's recording rules (`gpuaudit rules`)."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The manifest's `capabilities` object."""
        return {
            "backend": self.backend,
            "version": self.version,
            "metrics": sorted(self.metrics),
            "pod_label": self.pod_label,
            "uuid_label": self.uuid_label,
            "mig": self.mig,
            "profiling": self.profiling,
            "kube_state_metrics": self.kube_state_metrics,
            "recording_rules": sorted(self.recorded),
            "notes": list(self.notes),
        }


def discover(client: PromClient, w: Window, selector: str) -> Capabilities:
    """What the backend is and which DCGM data it holds, from cheap metadata calls."""
    caps = Capabilities()
    path = httpx.URL(client.cfg.url).path
    try:
        info = client.buildinfo()
        if info.get("version"):
            caps.backend, caps.version = "prometheus", str(info["version"])
        else:
            caps.backend = "victoriametrics"  # answers buildinfo with an empty object
    except PromError as exc:
        if exc.status in (0,) and "cannot reach" in str(exc):
            raise
        caps.backend = "unknown"
        caps.notes.append(f"buildinfo unavailable: {str(exc)[:120]}")
    if "/prometheus" in path:
        caps.backend = "mimir/cortex" if caps.backend != "victoriametrics" else caps.backend
    try:
        names = set(client.metric_names(w.start, w.end))
        caps.metrics = sorted(n for n in names if n.startswith("DCGM_"))
        caps.kube_state_metrics = "kube_pod_container_resource_requests" in names
    except PromError as exc:
        caps.notes.append(f"metric names unavailable ({str(exc)[:100]}); querying all")
        caps.metrics = list(catalogue.DCGM_METRICS)
    caps.profiling = catalogue.ACT_PROF in caps.metrics
    probe = next(
        (m for m in (catalogue.FB_USED, catalogue.ACT_PROF, catalogue.UTIL) if m in caps.metrics),
        None,
    )
    if probe:
        match = f"{probe}{{{selector}}}" if selector else probe
        try:
            labels = set(client.labels(match, w.start, w.end))
            if "exported_pod" in labels:
                caps.pod_label = "exported"
            elif labels & {"pod", "pod_name"}:
                caps.pod_label = "pod"
            caps.mig = "GPU_I_ID" in labels
            if "uuid" in labels and "UUID" not in labels:
                caps.uuid_label = "uuid"
        except PromError as exc:
            caps.notes.append(
                f"label names unavailable ({str(exc)[:100]}); reading both pod label spellings"
            )
    if not selector:
        try:
            names = client.recording_rule_names()
            caps.recorded = sorted(catalogue.usable_metrics(names) & set(caps.metrics))
        except PromError as exc:
            caps.notes.append(f"rules API unavailable ({str(exc)[:80]}); reading raw series")
    elif selector:
        caps.notes.append("recording rules not used: --cluster-label needs the raw series")
    return caps
