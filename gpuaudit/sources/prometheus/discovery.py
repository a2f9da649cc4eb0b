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

The build information is asked first, and a server that does not answer it within `--timeout`
ends the collection there, the stage named (`_backend`).

The scrape interval is measured with one query before the collection, whatever `--step` is, so
that a step shorter than it is refused before anything heavy runs (`measure_interval`).

A scan of every cluster (`--cluster-label NAME`) lists the label's values on the DCGM series
(the clusters, recorded in the manifest and bounded by `GPUAUDIT_MAX_CLUSTERS`) and asks whether
any DCGM series lacks the label (such series belong to no cluster and are left out, with a
warning); recording rules are not used, as they do not keep the cluster label.

With `--step 1h`, gpuaudit's hourly rules are looked for first (`hourly.find`: their heartbeat,
no rules API needed); where they cover the window, the window moves to end on their last
evaluation and the 5-minute rules are not looked for.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaudit.core import limits
from gpuaudit.core.errors import SourceError
from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus import catalogue, hourly
from gpuaudit.sources.prometheus.hourly import HourlyCoverage
from gpuaudit.sources.prometheus.http import BUILDINFO, Listing, PromClient, PromError
from gpuaudit.sources.prometheus.recorded import Coverage, find

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
    coverage: Coverage | None = None
    """Where their recorded series stand in for the raw ones (`recorded`)."""
    hourly: HourlyCoverage | None = None
    """Where the hourly rules stand in for the raw series (`hourly`); the collection's window
    then ends on their last evaluation (`HourlyCoverage.window`)."""
    window: Window | None = None
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
    interval: ScrapeInterval | None = None
    """The scrape interval of the DCGM series, measured before the collection (not recorded:
    the inventory detects it again from the samples it counts)."""
    full_count: int | None = None
    """The samples a full bucket holds at that interval (`full_count`): the sample count
    queries leave such buckets out (`QuerySpec.changes`). None when the interval is unknown."""

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
            **(
                {"recorded": self.coverage.to_dict(self.window)}
                if self.coverage and self.window
                else {}
            ),
            **(
                {"recorded_hourly": self.hourly.to_dict(self.window)}
                if self.hourly and self.window
                else {}
            ),
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


@dataclass(frozen=True)
class ScrapeInterval:
    """The scrape interval of the DCGM series, from each GPU's samples over `INTERVAL_RANGE_S`."""

    seconds: float
    """The range over the mean of the most common counts (63 and 64 an hour give 57 s)."""
    at_least: float
    """The shortest interval those counts allow: one sample more in the range."""
    gpus: int
    """How many GPUs (or MIG instances) were counted."""


INTERVAL_RANGE_S = 3600
"""The range each GPU's samples are counted over: long against any usual scrape interval (it
is told to one sample in 12 at 300 s, in 60 at 60 s), short against the collection."""


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
    counted = next(
        (m for m in (catalogue.ACT_PROF, catalogue.UTIL, catalogue.FB_USED) if m in caps.metrics),
        None,
    )
    if counted:
        _interval(client, w, selector, counted, caps)
        caps.full_count = full_count(w.step, caps.interval)
    if not selector:
        _hourly(client, w, caps)
        if caps.hourly is None:
            _recorded(client, w, caps)
    else:
        caps.notes.append("recording rules not used: --cluster-label needs the raw series")
    return caps


def _hourly(client: PromClient, w: Window, caps: Capabilities) -> None:
    """Whether the hourly rules cover the window (`--step 1h` only): the window then ends on
    their last evaluation, said in the notes."""
    if w.step != hourly.STEP_S:
        return
    cov = hourly.find(client, w, caps.pod_label, caps.notes)
    if cov is None:
        return
    moved = cov.window(w)
    caps.hourly, caps.window = cov, moved
    ms = f".{cov.offset_ms:03d}" if cov.offset_ms else ""
    caps.notes.append(
        f"hourly rules read; the window ends on their last evaluation, {_iso(moved.end)}{ms} "
        f"({w.end - moved.end} s before the end asked for)"
        + (
            f"; raw series before {_iso(cov.since(moved))}, where they had not run"
            if cov.covers(moved) == "part"
            else ""
        )
    )


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _recorded(client: PromClient, w: Window, caps: Capabilities) -> None:
    """Which metrics the recorded series stand in for, and over which part of the window."""
    try:
        names = client.recording_rule_names()
    except PromError as exc:
        caps.notes.append(f"rules API unavailable ({str(exc)[:80]}); reading raw series")
        return
    usable = catalogue.usable_metrics(names) & set(caps.metrics)
    if not usable:
        return
    if catalogue.HEARTBEAT not in names:
        caps.notes.append(
            f"recorded series not used: the server's gpuaudit rules lack {catalogue.HEARTBEAT} "
            "(written by an older gpuaudit; apply `gpuaudit rules` again); raw series read"
        )
        return
    cov = find(client, w, usable, caps.version, caps.notes)
    if cov is not None:
        caps.coverage, caps.window = cov, w
        caps.recorded = sorted(cov.metrics)


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
    """The backend and its version, from its build information: the first request, so a server
    that cannot be reached, or does not answer it within `--timeout`, ends the collection here
    (one request's time) instead of at every request after it."""
    import httpx

    path = httpx.URL(client.base_url).path
    try:
        info = client.buildinfo()
        if info.get("version"):
            caps.backend, caps.version = "prometheus", str(info["version"])[:80]
        else:
            caps.backend = "victoriametrics"  # answers buildinfo with an empty object
    except PromError as exc:
        if exc.timeout:
            raise SourceError(
                f"Prometheus at {client.base_url} did not answer /{BUILDINFO} within "
                f"{client.cfg.timeout_s:g} s: {exc.timeout}; check that the server behind the URL "
                "is up (a proxy or port-forward whose backend is gone accepts connections and "
                "never answers), or raise --timeout if it is only slow"
            ) from None
        if exc.status == 0 and "cannot reach" in str(exc):
            raise
        caps.backend = "unknown"
        caps.notes.append(f"buildinfo unavailable: {str(exc)[:120]}")
    if "/prometheus" in path:
        caps.backend = "mimir/cortex" if caps.backend != "victoriametrics" else caps.backend


def _metrics(client: PromClient, w: Window, caps: Capabilities) -> None:
    everything = [*catalogue.DCGM_METRICS, *catalogue.HAMI_METRICS, *catalogue.CADVISOR_METRICS]
    try:
        listing = client.metric_names(w.start, w.end)
    except PromError as exc:
        caps.notes.append(f"metric names unavailable ({str(exc)[:100]}); querying all")
        caps.metrics = everything
        return
    names = set(listing.names)
    caps.kube_state_metrics = "kube_pod_container_resource_requests" in names
    others = set(catalogue.HAMI_METRICS + catalogue.CADVISOR_METRICS)
    dcgm = {n for n in names if n.startswith("DCGM_")} | (names & others)
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
    when every `pod` is an exporter's own (the Helm default), else `any`. Asked in two steps:
    whether any series names a workload in `pod` or `pod_name` without `exported_pod` at all
    (`candidates_query`: reads only those series, none under the Helm chart's labels), and only
    then which of them the `unless` leaves (`pod_only_query`, which reads every series of the
    probe over the window: some 10^8 samples a week at 10,000 GPUs). Both count the same
    series when the first finds none, so the answer is the same."""
    try:
        first = client.query(candidates_query(probe, selector, w.seconds), w.end)
    except PromError as exc:
        caps.notes.append(
            f"series carry both exported_pod and pod; telling their roles apart failed "
            f"({str(exc)[:100]}), so both spellings were read"
        )
        return "any"
    if not first.warnings and not first.partial and _count(first.body) == 0:
        return "exported"
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
    count = _count(ans.body)
    if not count > 0:
        return "exported"
    caps.notes.append(
        f"{count:.0f} DCGM series name a workload in pod or pod_name without exported_pod, "
        "while others carry exported_pod (clusters scraped with and without honorLabels in one "
        "backend?): both spellings were read, each series by its own"
    )
    return "any"


def _count(body: Any) -> float:
    """The sum of the values of a `count(...)` answer (no row: 0)."""
    count = 0.0
    for row in body["data"]["result"]:
        value = row.get("value") if isinstance(row, dict) else None
        try:
            count += float(value[1]) if isinstance(value, list) and len(value) == 2 else 0.0
        except (TypeError, ValueError):
            continue
    return count


def _pod_selectors(probe: str, selector: str) -> tuple[str, str, str]:
    """The probe's series naming a workload in `pod` without `exported_pod`, in `pod_name`
    without `exported_pod`, and in `exported_pod`."""
    base = f"{selector}," if selector else ""
    return (
        f'{probe}{{{base}exported_pod="",pod!="",pod!~"{EXPORTER_POD}"}}',
        f'{probe}{{{base}exported_pod="",pod_name!=""}}',
        f'{probe}{{{base}exported_pod!=""}}',
    )


def candidates_query(probe: str, selector: str, range_s: int) -> str:
    """PromQL counting the series that name a workload in `pod` (not an exporter's own pod) or
    in `pod_name`, without `exported_pod`: a superset of `pod_only_query`'s, reading only
    those series."""
    plain, old, _ = _pod_selectors(probe, selector)
    rng = f"[{range_s}s]"
    return f"count(last_over_time({plain}{rng}) or last_over_time({old}{rng}))"


def pod_only_query(probe: str, selector: str, range_s: int) -> str:
    """PromQL counting the series that name a workload in `pod` (not an exporter's own pod, nor
    one that also appears as the exporter next to `exported_pod`) or in `pod_name`, without
    `exported_pod`."""
    plain, old, helm = _pod_selectors(probe, selector)
    rng = f"[{range_s}s]"
    return (
        f"count((last_over_time({plain}{rng}) unless on (namespace, pod) "
        f"last_over_time({helm}{rng})) or last_over_time({old}{rng}))"
    )


def _interval(
    client: PromClient, w: Window, selector: str, metric: str, caps: Capabilities
) -> None:
    """Measure the scrape interval at the window's end (or now, when that is earlier)."""
    try:
        caps.interval = measure_interval(
            client, min(w.end, time.time()), selector, metric, caps.uuid_label
        )
    except PromError as exc:
        caps.notes.append(f"scrape interval not measured ({str(exc)[:100]}); --step not checked")


def measure_interval(
    client: PromClient, at: float, selector: str, metric: str, uuid_label: str = "UUID"
) -> ScrapeInterval | None:
    """The scrape interval of `metric`'s series from one query at `at` (`interval_query`);
    None when no GPU's counts tell it, or the answer is partial. The query is evaluated a
    millisecond before `at`, so that a sample exactly at the range's edge (backfilled data
    sits on whole seconds) is counted once whether the backend's ranges are closed at their
    start (Prometheus 2) or open (Prometheus 3, VictoriaMetrics)."""
    ans = client.query(interval_query(metric, selector, uuid_label), at - 0.001)
    if ans.warnings or ans.partial:
        return None
    counts: dict[int, int] = {}
    for row in ans.body["data"]["result"]:
        try:
            count = int(float(row["metric"]["samples"]))
            gpus = int(float(row["value"][1]))
        except (KeyError, IndexError, TypeError, ValueError, OverflowError):
            continue
        if 0 < count <= 10**9 and 0 < gpus <= 10**9:  # sizes from outside, bounded
            counts[count] = counts.get(count, 0) + gpus
    return interval_from_counts(counts, INTERVAL_RANGE_S)


def full_count(step_s: int, interval: ScrapeInterval | None) -> int | None:
    """How many samples a bucket of `step_s` holds at `interval`, rounded (None when the
    interval is not known). Any whole number is correct for the count queries that leave such
    buckets out: a bucket that holds another count is answered (an interval that does not
    divide the step, a missed scrape, a target scraped at another interval), so this only
    decides how few points they answer."""
    if interval is None or not interval.seconds > 0:
        return None
    n = round(step_s / interval.seconds)
    return n if 1 <= n <= 10**9 else None


def interval_query(
    metric: str, selector: str, uuid_label: str, range_s: int = INTERVAL_RANGE_S
) -> str:
    """PromQL: how many GPUs (or MIG instances) had each number of samples of `metric` over
    the last `range_s`, counting only those that had samples in the `range_s` before it too
    (a GPU that came up inside the range has fewer samples than its interval gives). The
    samples of a GPU are summed over its series: a new pod on it starts a new series."""
    sel = f"{metric}{{{selector}}}" if selector else metric
    by = f"{uuid_label}, GPU_I_ID"
    rng = f"[{range_s}s]"
    now = f"sum by ({by}) (count_over_time({sel}{rng}))"
    before = f"sum by ({by}) (count_over_time({sel}{rng} offset {range_s}s))"
    return f'count_values("samples", {now} and on ({by}) {before})'


def interval_from_counts(counts: Mapping[int, int], range_s: int) -> ScrapeInterval | None:
    """The interval from how many GPUs had each sample count over `range_s`, as the inventory
    detects it from its buckets (`gpuaudit.inventory.held`): centred on the count whose window
    of three (it, one below, one above) holds most GPUs, keeping those of the three at least a
    tenth as common as the most common (a missed scrape is rarer), the range over their mean."""
    seen = {c: n for c, n in counts.items() if c > 0 and n > 0}
    if not seen:
        return None

    def rank(c: int) -> tuple[int, int, int]:
        return (seen.get(c - 1, 0) + seen[c] + seen.get(c + 1, 0), seen[c], c)

    centre = max(seen, key=rank)
    near = {c: seen[c] for c in (centre - 1, centre, centre + 1) if c in seen}
    top = max(near.values())
    kept = {c: n for c, n in near.items() if n >= 0.1 * top}
    mean = sum(c * n for c, n in kept.items()) / sum(kept.values())
    return ScrapeInterval(range_s / mean, range_s / (mean + 1), sum(seen.values()))
