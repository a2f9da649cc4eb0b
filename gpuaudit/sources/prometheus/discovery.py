"""Capabilities discovery: what the backend is and which DCGM data it holds, found out from cheap
metadata calls (build info, metric and label names, recording rules) before any query runs.

A metadata answer that may be missing names (the backend's `warnings`, VictoriaMetrics'
`isPartial`, an answer that is not a list) is not trusted: every catalogue metric is queried,
both pod label spellings are read, and the report is marked incomplete. An empty list of
metric names is not taken for "no GPUs" either: every catalogue metric is queried, and a
collection that finds no DCGM series at all is incomplete (see `source`).

The pod label spelling (`catalogue.POD_LABELS`): `exported` when DCGM series carry
`exported_pod` (the dcgm-exporter Helm chart's default, `honorLabels: false`), `pod` when they
carry only `pod` or `pod_name`. A central backend may hold both kinds (one cluster scraped one
way, another the other): when series with both labels exist, one query counts the series that
name a workload in `pod` or `pod_name` alone, and when there are any, both spellings are read
(`any`) and the inventory takes each series' own.

A scan of every cluster (`--cluster-label NAME`) lists the label's values on the DCGM series
(the clusters, recorded in the manifest and bounded by `GPUAUDIT_MAX_CLUSTERS`) and asks whether
any DCGM series lacks the label (such series belong to no cluster and are left out, with a
warning); recording rules are not used, as they do not keep the cluster label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from gpuaudit import limits
from gpuaudit.errors import SourceError
from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.client import Listing, PromClient, PromError

POD_LABEL_NAMES = ("exported_pod", "pod", "pod_name")
"""The labels that name a workload pod, in any exporter setup."""

EXPORTER_POD = "(?i).*dcgm[-_]exporter.*"
"""A PromQL regular expression for the exporter's own pod name (`nvidia-dcgm-exporter-x7k2p`),
which `pod` holds on a series of a GPU no workload held, when Prometheus attached the scrape
target's labels."""


@dataclass
class Capabilities:
    """What discovery found out about the backend; recorded as the manifest's `capabilities`."""

    backend: str = "unknown"
    version: str = ""
    metrics: list[str] = field(default_factory=list)
    pod_label: str = "any"
    pod_labels: list[str] = field(default_factory=list)
    """The workload label names found on the DCGM series (`POD_LABEL_NAMES`)."""
    uuid_label: str = "UUID"
    mig: bool = False
    profiling: bool = False
    kube_state_metrics: bool = False
    recorded: list[str] = field(default_factory=list)
    """Metrics read through gpuaudit's recording rules (`gpuaudit rules`)."""
    cluster_label: str = ""
    """The label every query groups by when the scan covers every cluster (`--cluster-label
    NAME`); empty otherwise."""
    clusters: list[str] = field(default_factory=list)
    """The label's values on the DCGM series of the window, when `cluster_label` is set."""
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """The backend's warnings on the metadata calls, as `discovery <call>: <text>`."""
    incomplete: list[str] = field(default_factory=list)
    """Why the collection may be incomplete, from what discovery saw."""

    def to_dict(self) -> dict[str, Any]:
        """The manifest's `capabilities` object."""
        return {
            "backend": self.backend,
            "version": self.version,
            "metrics": sorted(self.metrics),
            "pod_label": self.pod_label,
            "pod_labels": sorted(self.pod_labels),
            "uuid_label": self.uuid_label,
            "mig": self.mig,
            "profiling": self.profiling,
            "kube_state_metrics": self.kube_state_metrics,
            "recording_rules": sorted(self.recorded),
            "notes": list(self.notes),
            # Only in a scan of every cluster: other manifests stay as they were.
            **(
                {"cluster_label": self.cluster_label, "clusters": sorted(self.clusters)}
                if self.cluster_label
                else {}
            ),
        }

    def distrust(self, call: str, listing: Listing, consequence: str) -> None:
        """Record that the answer to `call` may be missing names, and what was done instead."""
        self.warnings += [f"discovery {call}: {w}" for w in listing.warnings]
        reason = f"the backend's {call} may be incomplete ({listing.doubt()}); {consequence}"
        self.incomplete.append(reason)
        self.notes.append(reason)


def discover(client: PromClient, w: Window, selector: str, group: str = "") -> Capabilities:
    """What the backend is and which DCGM data it holds, from cheap metadata calls. `group` is
    the cluster label of a scan of every cluster (`selector` then selects the series that have
    it)."""
    caps = Capabilities(cluster_label=group)
    _backend(client, caps)
    _metrics(client, w, caps)
    caps.profiling = catalogue.ACT_PROF in caps.metrics
    probe = next(
        (m for m in (catalogue.FB_USED, catalogue.ACT_PROF, catalogue.UTIL) if m in caps.metrics),
        None,
    )
    if probe:
        _labels(client, w, selector, probe, caps)
        if group:
            _clusters(client, w, group, probe, caps)
    if not selector:
        try:
            names = client.recording_rule_names()
            caps.recorded = sorted(catalogue.usable_metrics(names) & set(caps.metrics))
        except PromError as exc:
            caps.notes.append(f"rules API unavailable ({str(exc)[:80]}); reading raw series")
    else:
        caps.notes.append("recording rules not used: --cluster-label needs the raw series")
    return caps


def _clusters(client: PromClient, w: Window, group: str, probe: str, caps: Capabilities) -> None:
    """The clusters of a scan of every cluster, refused beyond `GPUAUDIT_MAX_CLUSTERS`, and
    a warning when DCGM series without the label exist (they are left out)."""
    bound = limits.CLUSTERS.value()
    try:
        listing = client.label_values(group, f'{probe}{{{group}!=""}}', w.start, w.end)
    except PromError as exc:
        caps.notes.append(f"the values of {group} are unavailable ({str(exc)[:100]})")
    else:
        if not listing.trusted:
            caps.distrust(f"list of {group} values", listing, "the clusters listed may be fewer")
        if len(listing.names) > bound:
            raise SourceError(
                f"the backend holds {len(listing.names):,} values of {group} on {probe} in the "
                f"window, more than the {bound:,} clusters one scan audits "
                f"({limits.CLUSTERS.env}); audit fewer at a time with --cluster-label "
                f"{group}=VALUE, or raise {limits.CLUSTERS.env} if it is genuine"
            )
        caps.clusters = sorted(listing.names)
    try:
        bare = client.labels(f'{probe}{{{group}=""}}', w.start, w.end)
    except PromError as exc:
        caps.notes.append(f"whether series lack {group} is unknown ({str(exc)[:100]})")
        return
    if bare.names:
        caps.warnings.append(
            f"discovery: some DCGM series ({probe}) have no {group} label; they belong to no "
            f"cluster and were left out of this scan of every cluster (--cluster-label {group})"
        )


def _backend(client: PromClient, caps: Capabilities) -> None:
    path = httpx.URL(client.base_url).path
    try:
        info = client.buildinfo()
        if info.get("version"):
            caps.backend, caps.version = "prometheus", str(info["version"])[:80]
        else:
            caps.backend = "victoriametrics"  # answers buildinfo with an empty object
    except PromError as exc:
        if exc.status == 0 and "cannot reach" in str(exc):
            raise
        caps.backend = "unknown"
        caps.notes.append(f"buildinfo unavailable: {str(exc)[:120]}")
    if "/prometheus" in path:
        caps.backend = "mimir/cortex" if caps.backend != "victoriametrics" else caps.backend


def _metrics(client: PromClient, w: Window, caps: Capabilities) -> None:
    everything = list(catalogue.DCGM_METRICS)
    try:
        listing = client.metric_names(w.start, w.end)
    except PromError as exc:
        caps.notes.append(f"metric names unavailable ({str(exc)[:100]}); querying all")
        caps.metrics = everything
        return
    names = set(listing.names)
    caps.kube_state_metrics = "kube_pod_container_resource_requests" in names
    dcgm = {n for n in names if n.startswith("DCGM_")}
    if not listing.trusted:
        caps.metrics = sorted(dcgm | set(everything))
        caps.distrust("list of metric names", listing, "every catalogue metric was queried")
    elif not names:
        caps.metrics = everything
        caps.notes.append(
            "the backend listed no metric names for the window; every catalogue metric was queried"
        )
    else:
        caps.metrics = sorted(dcgm)


def _labels(client: PromClient, w: Window, selector: str, probe: str, caps: Capabilities) -> None:
    match = f"{probe}{{{selector}}}" if selector else probe
    try:
        listing = client.labels(match, w.start, w.end)
    except PromError as exc:
        caps.notes.append(
            f"label names unavailable ({str(exc)[:100]}); reading both pod label spellings"
        )
        return
    labels = set(listing.names)
    caps.pod_labels = sorted(labels & set(POD_LABEL_NAMES))
    caps.mig = "GPU_I_ID" in labels
    if "uuid" in labels and "UUID" not in labels:
        caps.uuid_label = "uuid"
    if not listing.trusted:
        caps.distrust("list of label names", listing, "both pod label spellings were read")
        return
    exported = "exported_pod" in labels
    plain = bool(labels & {"pod", "pod_name"})
    if exported and plain:
        caps.pod_label = _mixed(client, w, selector, probe, caps)
    elif exported:
        caps.pod_label = "exported"
    elif plain:
        caps.pod_label = "pod"


def _mixed(client: PromClient, w: Window, selector: str, probe: str, caps: Capabilities) -> str:
    """The spelling when series carry both `exported_pod` and `pod` (or `pod_name`): `exported`
    when every `pod` is an exporter's own (the Helm default), else `any`."""
    expr = pod_only_query(probe, selector, w.seconds)
    try:
        ans = client.query(expr, w.end)
    except PromError as exc:
        caps.notes.append(
            f"series carry both exported_pod and pod; telling their roles apart failed "
            f"({str(exc)[:100]}), so both spellings were read"
        )
        return "any"
    if ans.warnings or ans.partial:
        caps.warnings += [f"discovery pod label check: {x}" for x in ans.warnings]
        caps.notes.append("the pod label check was answered in part; both spellings were read")
        return "any"
    count = 0.0
    for row in ans.body["data"]["result"]:
        value = row.get("value") if isinstance(row, dict) else None
        try:
            count += float(value[1]) if isinstance(value, list) and len(value) == 2 else 0.0
        except (TypeError, ValueError):
            continue
    if not count > 0:
        return "exported"
    caps.notes.append(
        f"{count:.0f} DCGM series name a workload in pod or pod_name without exported_pod, "
        "while others carry exported_pod (clusters scraped with and without honorLabels in one "
        "backend?): both spellings were read, each series by its own"
    )
    return "any"


def pod_only_query(probe: str, selector: str, range_s: int) -> str:
    """PromQL counting the series that name a workload in `pod` (not an exporter's own pod, nor
    one that also appears as the exporter next to `exported_pod`) or in `pod_name`, without
    `exported_pod`."""
    base = f"{selector}," if selector else ""
    rng = f"[{range_s}s]"
    plain = f'{probe}{{{base}exported_pod="",pod!="",pod!~"{EXPORTER_POD}"}}'
    old = f'{probe}{{{base}exported_pod="",pod_name!=""}}'
    helm = f'{probe}{{{base}exported_pod!=""}}'
    return (
        f"count((last_over_time({plain}{rng}) unless on (namespace, pod) "
        f"last_over_time({helm}{rng})) or last_over_time({old}{rng}))"
    )
