"""The fixed catalogue of PromQL queries one collection runs, whatever the cluster size.

Every query aggregates in PromQL over all GPUs at once: there is no per-pod or per-node fan-out.
Two kinds exist:

- window statistics: instant queries at the window's end over a range equal to the window
  (`sum_over_time(M[7d])`, `count_over_time`, `max_over_time`), one value per series. When a
  backend cannot answer one over the whole window, the collector cuts the window into time
  chunks and the inventory combines them: sums and counts by sum (so a mean, sum / count, is
  exact whatever the cut), maxima by max.
- hourly series: range queries with `step` equal to the bucket size (default one hour) of
  `sum_over_time(M[step]) / count_over_time(M[step])`; each point is the mean of the bucket that
  ends at it. Chunking these by time is exact. Beside the activity means, the number of
  samples in each bucket (`count_over_time(M[step])`): held time is those samples times the
  scrape interval, which the inventory detects from the same counts. `DCGM_FI_DEV_GPU_UTIL` is
  counted only where no profiling series exists (`... unless ...`), as only there is it the
  activity series. A count is answered only where it differs from the bucket before (a series
  starts, stops or misses a scrape) and at the window's first bucket; the reader carries it
  forward, so the answer stays small however long the window. The statistics that do not
  combine from window chunks are read per bucket too, and combined exactly by the inventory:
  each bucket's p95 (`quantile_over_time(0.95, M[step])`; the window figure is the largest),
  XID onsets (answered only in the buckets that had one; added up) and the violation counters'
  `increase` (added up). Older snapshots hold their window forms (`LEGACY`).

Series are grouped `by` the identity labels of the label spelling in use (`exported_pod` under
the dcgm-exporter Helm chart's default `honorLabels: false`, `pod` otherwise), which drops the
exporter's own target labels and driver-version labels that would split a holding into pieces.
A scan of every cluster of a central backend (`--cluster-label NAME` without a value) adds the
cluster label to every `by` clause: the same queries, each answering every cluster at once, with
series of different clusters kept apart (`ClusterLabel`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpuaudit.core.errors import ConfigError

ACT_PROF = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
POWER = "DCGM_FI_DEV_POWER_USAGE"
POWER_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
"""The GPU's power management limit (W): not in dcgm-exporter's default counters; where it is
exported, the maximum power an idle finding's draw is measured against (else the model's board
power from `gpuaudit.domain.power`)."""
XID = "DCGM_FI_DEV_XID_ERRORS"
REMAP_UNCORR = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
ECC_DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
ECC_DBE_AGG = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
P2P_STATUS = "DCGM_EXP_P2P_STATUS"
PCIE_TX = "DCGM_FI_PROF_PCIE_TX_BYTES"
PCIE_RX = "DCGM_FI_PROF_PCIE_RX_BYTES"
NVLINK_TX = "DCGM_FI_PROF_NVLINK_TX_BYTES"
NVLINK_RX = "DCGM_FI_PROF_NVLINK_RX_BYTES"
POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"
"""Time the GPU's clocks were held down by its power limit (a counter, ns in DCGM's current
`dcgm_fields.h` and dcgm-exporter's CSV; older headers said usec): off in dcgm-exporter's
default counters."""
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
"""The same for thermal limits (ns): off by default."""
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
"""The SM clock (MHz): in dcgm-exporter's default counters."""
MAX_SM_CLOCK = "DCGM_FI_DEV_MAX_SM_CLOCK"
"""The GPU's maximum SM clock (MHz): not in dcgm-exporter's default counters."""
THROTTLE_METRICS = (POWER_VIOLATION, THERMAL_VIOLATION)
"""The violation counters whose presence makes throttling measurable (GPU071)."""
LINK_TRAFFIC = {"nvlink": (NVLINK_TX, NVLINK_RX), "pcie": (PCIE_TX, PCIE_RX)}
"""GPU link traffic gauges (bytes per second, DCGM profiling fields 1009-1012) by link: PCIe is
in dcgm-exporter's default counters, NVLink must be added to its CSV."""

DCGM_METRICS = (
    ACT_PROF,
    UTIL,
    SM_ACTIVE,
    TENSOR,
    FB_USED,
    FB_FREE,
    POWER,
    POWER_LIMIT,
    XID,
    REMAP_UNCORR,
    REMAP_FAILURE,
    REMAP_PENDING,
    ECC_DBE_VOL,
    ECC_DBE_AGG,
    P2P_STATUS,
    PCIE_TX,
    PCIE_RX,
    NVLINK_TX,
    NVLINK_RX,
    POWER_VIOLATION,
    THERMAL_VIOLATION,
    SM_CLOCK,
    MAX_SM_CLOCK,
)
"""Metrics whose presence capability discovery records."""

CPU_USAGE = "container_cpu_usage_seconds_total"
"""cAdvisor (through the kubelet's `/metrics/cadvisor`): the CPU time a container used, in
seconds (a counter; `docs/domain.md`, cAdvisor)."""
CPU_PERIODS = "container_cpu_cfs_periods_total"
"""cAdvisor: the CFS enforcement periods that elapsed for a container with a CPU limit (a
counter; none without a limit)."""
CPU_THROTTLED = "container_cpu_cfs_throttled_periods_total"
"""cAdvisor: the periods in which the container was throttled at its CPU limit (a counter)."""
CADVISOR_CPU = (CPU_USAGE, CPU_PERIODS, CPU_THROTTLED)
"""cAdvisor's CPU counters, read for the containers of GPU pods (GPU041)."""
MEMORY_WORKING_SET = "container_memory_working_set_bytes"
"""cAdvisor: a container's working set (bytes; memory used less the inactive file cache, what
the kubelet measures against a container's memory limit), a gauge: read for the containers of
GPU pods as the window's most (GPU004, an OOM-killed container's need)."""
CADVISOR_METRICS: tuple[str, ...] = (*CADVISOR_CPU, MEMORY_WORKING_SET)
"""Every cAdvisor metric the catalogue reads, whose presence discovery records beside DCGM's."""
CADVISOR_LABELS = ("namespace", "pod", "container")
"""What cAdvisor's container series are grouped by: the kubelet labels them with the pod and
container (its scrape keeps them: kube-prometheus-stack's kubelet ServiceMonitor honours
them)."""
CADVISOR_CONTAINERS = 'container!="",container!="POD"'
"""The label matchers of a container's own series: cAdvisor also answers for the pod's cgroup
(`container=""`) and, under dockershim, its sandbox (`container="POD"`)."""
GPU_POD_PROBES = (FB_USED, UTIL)
"""The DCGM gauges whose pod labels say which pods hold GPUs (`gpu_pods`): both in
dcgm-exporter's default counters, on every GPU and MIG instance."""


def gpu_pods(range_s: int, pod_spelling: str, selector: str = "", group: str = "") -> str:
    """PromQL: one series per (`namespace`, `pod`) of each pod a DCGM series names over the
    `range_s` seconds before the evaluation time, however the exporter's pod labels are spelt
    (`exported_*`, and the old `pod_namespace`/`pod_name`, renamed to `namespace`/`pod`; every
    spelling with `any`), with the cluster
    label `group` where given. Another exporter's per-container series are restricted to pods
    that hold GPUs with `and on (namespace, pod) (...)` of it: one query whatever the cluster
    size, whose answer grows with the GPU pods, not with every container of the cluster."""
    first = f"{group}, " if group else ""
    base = f"{selector}," if selector else ""

    def held(metric: str, ns: str, pod: str, extra: str = "") -> str:
        sel = f'{metric}{{{base}{pod}!=""{extra}}}'
        grouped = f"group by ({first}{ns}, {pod}) (last_over_time({sel}[{range_s}s]))"
        if ns == "namespace":
            return grouped
        return (
            f'label_replace(label_replace({grouped}, "namespace", "$1", "{ns}", "(.*)"), '
            f'"pod", "$1", "{pod}", "(.*)")'
        )

    plain = [("namespace", "pod", ""), ("pod_namespace", "pod_name", "")]
    spellings = {
        "exported": [("exported_namespace", "exported_pod", "")],
        "pod": plain,
        "any": [
            ("exported_namespace", "exported_pod", ""),
            *((ns, pod, ',exported_pod=""') for ns, pod, _ in plain),
        ],
    }[pod_spelling]
    return " or ".join(held(m, ns, pod, x) for m in GPU_POD_PROBES for ns, pod, x in spellings)


HAMI_UTIL = "hami_container_device_utilization_ratio"
"""HAMi's vGPU monitor (v2.9 on): a container's SM utilization of one GPU, 0-100
(`docs/domain.md`, HAMi)."""
HAMI_UTIL_LEGACY = "Device_utilization_desc_of_container"
"""The same up to HAMi v2.8 (and later with `--legacy-metrics`)."""
HAMI_MEM = "hami_vgpu_memory_used_bytes"
"""HAMi's vGPU monitor (v2.9 on): the device memory a container uses on one GPU, bytes."""
HAMI_MEM_LEGACY = "vGPU_device_memory_usage_in_bytes"
"""The same up to HAMi v2.8 (and later with `--legacy-metrics`)."""
HAMI_METRICS = (HAMI_UTIL, HAMI_UTIL_LEGACY, HAMI_MEM, HAMI_MEM_LEGACY)
"""HAMi's per-container metrics, whose presence discovery records beside DCGM's."""
HAMI_LABELS = (
    "exported_namespace",
    "exported_pod",
    "exported_container",
    "namespace",
    "pod",
    "container",
    "device_uuid",
)
"""What HAMi's current per-container series are grouped by: the pod and container (renamed
`exported_*` under a ServiceMonitor without `honorLabels`, where `namespace` and `pod` then name
the vGPU monitor's own pod) and the physical GPU."""
HAMI_LEGACY_LABELS = ("podnamespace", "podname", "ctrname", "deviceuuid")
"""The same of HAMi's legacy series (no collision with the scrape target's labels)."""

IDENTITY_LABELS = (
    "UUID",
    "uuid",
    "gpu",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "modelName",
    "Hostname",
    "hostname",
    "pci_bus_id",
    "node",
    "instance",
)
"""Labels that identify a GPU or MIG instance and where it is, in every exporter version.
`instance` (the exporter's address) finds the node when `Hostname` names the exporter pod."""

DRA_LABELS = ("dra_claim_name", "dra_claim_namespace")
"""dcgm-exporter's labels of a device allocated through a DRA ResourceClaim (with its DRA
mapping on, `docs/domain.md`, DRA): the claim names the pod where no pod label does."""

POD_LABELS = {
    "exported": (
        "exported_pod",
        "exported_namespace",
        "exported_container",
        "pod_uid",
        *DRA_LABELS,
    ),
    "pod": (
        "pod",
        "namespace",
        "container",
        "pod_name",
        "pod_namespace",
        "container_name",
        "pod_uid",
        *DRA_LABELS,
    ),
    "any": (
        "exported_pod",
        "exported_namespace",
        "exported_container",
        "pod",
        "namespace",
        "container",
        "pod_name",
        "pod_namespace",
        "container_name",
        "pod_uid",
        *DRA_LABELS,
    ),
}
"""Workload labels by spelling: `exported` (Helm default `honorLabels: false`), `pod`, or `any`
when discovery could not tell (both kept; the inventory then decides from the data)."""

Stat = Literal["sum", "count", "max", "p95", "mean", "onsets", "increase", "busy"]
Kind = Literal["window", "hourly"]

RAW_STATS = ("p95", "onsets", "increase", "busy")
"""Statistics always read from the raw series (no recording rule keeps what they need)."""

RECORDED = (ACT_PROF, UTIL, FB_USED, FB_FREE, POWER)
"""Metrics with recording rules (`gpuaudit rules`, see `rules`)."""
AGGS = ("sum", "count", "max")
"""What each recording rule keeps of its metric over 5 minutes."""


def record_name(metric: str, agg: str) -> str:
    """The series a recording rule writes: `gpuaudit:dcgm_fi_prof_gr_engine_active:sum5m`."""
    return f"gpuaudit:{metric.lower()}:{agg}5m"


HEARTBEAT = "gpuaudit:recording_rules:evaluated5m"
"""A series the recording group writes at every evaluation (value 1, last in the group): where
it has a point at every 5-minute evaluation of a window, the recorded series cover it."""


def usable_metrics(rule_names: set[str]) -> set[str]:
    """Metrics whose every recording rule exists on the server."""
    return {m for m in RECORDED if all(record_name(m, a) in rule_names for a in AGGS)}


LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A Prometheus label name (the data model's rule): only such a name is written into PromQL."""


@dataclass(frozen=True)
class ClusterLabel:
    """`--cluster-label`: the label a central backend tells clusters apart by, and the one
    cluster to read (`NAME=VALUE`), or every cluster at once (`NAME`, `value` None)."""

    name: str
    value: str | None = None

    @property
    def grouped(self) -> bool:
        """Every cluster in one scan, grouped by the label."""
        return self.value is None

    def selector(self) -> str:
        """The label matcher: the one cluster's series, or every series that has the label."""
        if self.value is None:
            return f'{self.name}!=""'
        esc = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}="{esc}"'

    @classmethod
    def parse(cls, text: str | None) -> ClusterLabel | None:
        """`NAME=VALUE` or `NAME`; `ConfigError` for a name PromQL cannot hold."""
        if text is None or not text.strip():
            return None
        name, sep, value = text.partition("=")
        name = name.strip()
        if not LABEL_NAME.fullmatch(name):
            raise ConfigError(
                f"--cluster-label {text[:80]!r} does not start with a label name (letters, digits "
                "and underscores, not starting with a digit); write NAME=VALUE for one cluster "
                "or NAME for every cluster the backend holds"
            )
        return cls(name, value.strip() if sep else None)


@dataclass(frozen=True)
class Part:
    """One piece of a range read at an evaluation time: the raw series, or the recorded
    5-minute aggregates, over `range_ms` milliseconds ending `offset_ms` before it."""

    recorded: bool
    range_ms: int
    offset_ms: int = 0


def _duration(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


_RAW_FN = {"sum": "sum_over_time", "count": "count_over_time", "max": "max_over_time"}


def _piece(agg: str, metric: str, part: Part, by: str, selector: str, offset: int) -> str:
    """`agg` (sum, count or max) of `metric` over one piece, grouped `by`."""
    name = record_name(metric, agg) if part.recorded else metric
    sel = f"{name}{{{selector}}}" if selector else name
    off = part.offset_ms + offset * 1000
    rng = f"[{_duration(part.range_ms)}]" + (f" offset {_duration(off)}" if off else "")
    # Recorded sums and counts add up; recorded maxima are maxima of maxima.
    fn = ("max_over_time" if agg == "max" else "sum_over_time") if part.recorded else _RAW_FN[agg]
    outer = "max" if agg == "max" else "sum"
    return f"{outer} by ({by}) ({fn}({sel}{rng}))"


def _combined(agg: str, metric: str, parts: tuple[Part, ...], by: str, sel: str, off: int) -> str:
    """`agg` over every piece together. Each piece is told apart by a label of its own
    before `or`, so that a series found in several pieces is kept from each, then the pieces
    are added up (maxed for `max`)."""
    texts = [_piece(agg, metric, p, by, sel, off) for p in parts]
    if len(texts) == 1:
        return texts[0]
    tagged = " or ".join(
        f'label_replace({t}, "gpuaudit_part", "{i}", "", "")' for i, t in enumerate(texts)
    )
    return f"{'max' if agg == 'max' else 'sum'} by ({by}) ({tagged})"


def _pieced(
    stat: Stat, metric: str, parts: tuple[Part, ...], by: str, selector: str, offset: int
) -> str:
    if stat == "mean":
        return (
            f"{_combined('sum', metric, parts, by, selector, offset)} / "
            f"{_combined('count', metric, parts, by, selector, offset)}"
        )
    return _combined(stat, metric, parts, by, selector, offset)


def changed(now: str, before: str, first: int | None) -> str:
    """`now` only where it differs from `before` (the same one bucket earlier) or at the
    window's first bucket `first` (`T0` when not given)."""
    at = "T0" if first is None else str(int(first))
    return f"{now} unless (({now} == {before}) and on () (vector(time()) > {at}))"


@dataclass(frozen=True)
class QuerySpec:
    """One query of the catalogue."""

    id: str
    """Stable id; the key of its answers in the snapshot."""
    kind: Kind
    metric: str
    stat: Stat
    extra_by: tuple[str, ...] = ()
    """Labels grouped on besides the identity and pod labels (`err_code` of an XID, the
    `peer_gpu` of a P2P status): the series they tell apart are kept apart."""
    labels: tuple[str, ...] = ()
    """The labels to group by instead of the identity and pod labels (a metric of another
    exporter, whose series name their GPU and pod otherwise: HAMi's)."""
    match: str = ""
    """Label matchers of its own, besides the collection's (cAdvisor's containers alone,
    `CADVISOR_CONTAINERS`)."""
    on_gpu_pods: bool = False
    """Kept to the series of pods that hold GPUs (`gpu_pods`), over the same range."""
    unless: str = ""
    """A metric whose same statistic removes this query's series where it exists (PromQL
    `unless`): the GPU_UTIL sample counts only of series without a profiling series."""
    changes: bool = False
    """An hourly query of sample counts, which are the same bucket after bucket but where a
    series starts, stops or misses a scrape, answered sparsely. With the count a full bucket
    holds (`full`, from the measured scrape interval): only where the count differs from it,
    and the reader puts `full` at the points of the value query the answer leaves out. Without
    it: only where the count differs from the bucket before (or there was none, or at the
    window's first bucket), and the reader carries each count forward over the buckets that
    follow it; this form compares two evaluations of the count, and costs the backend about
    3.6 times the other (`benchmarks/README.md`, round 7)."""

    def promql(
        self,
        range_s: int,
        pod_spelling: str,
        selector: str = "",
        parts: tuple[Part, ...] | None = None,
        unless_parts: tuple[Part, ...] | None = None,
        first: int | None = None,
        group: str = "",
        full: int | str | None = None,
    ) -> str:
        """The PromQL text over a range of `range_s` seconds (the window, a chunk, or a step).

        `parts` cuts the range into pieces read from the raw series or from gpuaudit's 5-minute
        recording rules (`gpuaudit rules`; see `recorded`), which add up exactly to the range;
        None reads the raw series over the whole range. p95 and XID onsets always read the
        raw series. `unless_parts` says the same of the `unless` metric. `first` is the end of
        the window's first bucket, at which a `changes` query answers every series (`T0` in
        its text when not given, as the documentation writes it). `group` is the cluster label
        a scan of every cluster groups by besides the identity labels. `full` is the count a
        full bucket holds, which a `changes` query then leaves out instead (`F` as the
        documentation writes it).
        """
        if self.stat in RAW_STATS:
            parts = None

        def text(offset: int = 0) -> str:
            own = self._promql(self.metric, range_s, pod_spelling, selector, parts, offset, group)
            if not self.unless:
                return own
            other = self._promql(
                self.unless, range_s, pod_spelling, selector, unless_parts, offset, group
            )
            return f"{own} unless {other}"

        if not self.changes:
            return text()
        if full is not None:
            return f"({text()}) != {full}"
        now, before = text(), text(range_s)
        if self.unless:
            now, before = f"({now})", f"({before})"
        return changed(now, before, first)

    def _promql(
        self,
        metric: str,
        range_s: int,
        pod_spelling: str,
        selector: str,
        parts: tuple[Part, ...] | None,
        offset: int = 0,
        group: str = "",
    ) -> str:
        by = ", ".join(self.by_labels(pod_spelling, group))
        if self.on_gpu_pods:
            # A UUID shard of the planner's (`planner.SHARDS`) cuts the GPU pods' DCGM series,
            # not this query's own, which carry no UUID: each shard answers the containers of
            # the pods holding its GPUs, and the shards together every GPU pod's.
            mine = _joined(UUID_SHARD.sub("", selector), self.match)
            own = self._stat_promql(metric, range_s, by, mine, offset)
            pods = gpu_pods(range_s, pod_spelling, selector, group)
            on = f"{group}, namespace, pod" if group else "namespace, pod"
            return f"{own} and on ({on}) ({pods})"
        if parts is not None:
            return _pieced(self.stat, metric, parts, by, _joined(selector, self.match), offset)
        return self._stat_promql(metric, range_s, by, _joined(selector, self.match), offset)

    def _stat_promql(self, metric: str, range_s: int, by: str, selector: str, offset: int) -> str:
        rng = f"[{range_s}s]" + (f" offset {offset}s" if offset else "")
        sel = f"{metric}{{{selector}}}" if selector else metric
        if self.stat == "onsets":
            return _onsets(sel, range_s, by, bucket=self.kind == "hourly")
        if self.stat == "busy":
            return _busy(metric, selector, range_s, by)
        if self.stat == "mean":
            return (
                f"sum by ({by}) (sum_over_time({sel}{rng})) / "
                f"sum by ({by}) (count_over_time({sel}{rng}))"
            )
        if self.stat == "sum":
            return f"sum by ({by}) (sum_over_time({sel}{rng}))"
        if self.stat == "max":
            return f"max by ({by}) (max_over_time({sel}{rng}))"
        if self.stat == "increase":
            return f"sum by ({by}) (increase({sel}{rng}))"
        if self.stat == "p95":
            return f"max by ({by}) (quantile_over_time(0.95, {sel}{rng}))"
        return f"sum by ({by}) (count_over_time({sel}{rng}))"

    def by_labels(self, pod_spelling: str, group: str = "") -> tuple[str, ...]:
        """The labels of the `by` clause: the cluster label `group` when given, identity, pod
        labels, then `extra_by`."""
        first = (group,) if group else ()
        if self.labels:
            return first + self.labels
        return first + IDENTITY_LABELS + POD_LABELS[pod_spelling] + self.extra_by


UUID_SHARD = re.compile(r',?\b(?:UUID|uuid)[=!]~"GPU-[^"]*"')
"""A UUID shard's matcher as the planner adds it to a query's selector."""


def _joined(selector: str, match: str) -> str:
    return ",".join(p for p in (selector, match) if p)


ONSET_STEP_S = 300
"""Resolution of the XID onset subquery, and how far back it looks for the previous code: the
default lookback, so a code is seen while its series is fresh at any scrape interval up to it."""


def _onsets(sel: str, range_s: int, by: str, bucket: bool = False) -> str:
    """How many times each XID code appeared in the window: a subquery point where the series
    of a code (`err_code`) is present but was not `ONSET_STEP_S` earlier, while a series of
    the same GPU and pod was (any code, 0 included). The XID gauge keeps its last code until
    the exporter restarts, so counting samples would read one event as a window of errors;
    this counts changes of the gauge into a code. A series that starts with a code (a pod
    placed on a GPU whose gauge still shows an old XID, an exporter restart, a scrape gap) is
    not an event; a code that replaces itself (63 then 63 again) cannot be seen by any gauge,
    nor one that lasted under `ONSET_STEP_S`.

    Per `bucket` (an hourly query), the subquery's range is a millisecond short of the bucket:
    before Prometheus 3.0 a subquery's range is closed on the left, and a step on the bucket's
    start, the end of the bucket before, would count in both (from 3.0 it is open on the left,
    and the millisecond changes nothing)."""
    r = f"{ONSET_STEP_S}s"
    fresh = f"({sel} > 0) unless ({sel} offset {r})"
    onset = f"({fresh}) and ignoring (err_code, err_msg) ({sel} offset {r})"
    rng = f"{range_s * 1000 - 1}ms" if bucket else f"{range_s}s"
    return f"sum by ({by}) (count_over_time(({onset})[{rng}:{r}]))"


SERVING_QUEUE_METRICS = (
    "vllm:num_requests_waiting",
    "tgi_queue_size",
    "nv_inference_pending_request_count",
    "sglang:num_queue_reqs",
)
"""Serving engines' request queue gauges (`docs/domain.md`, serving metrics): vLLM's requests
waiting, Text Generation Inference's queue, Triton's requests pending in a model's scheduler
queue, SGLang's waiting queue."""
SERVING_REQUEST_METRICS = ("vllm:num_requests_running", "sglang:num_running_reqs")
"""Serving engines' in-flight request gauges: vLLM's and SGLang's running requests."""
SERVING_METRICS = SERVING_QUEUE_METRICS + SERVING_REQUEST_METRICS
"""Every serving metric the `serving_busy` query reads, in the order `gpuaudit fix` prefers
them (a queue first)."""
SERVING_LABELS = ("namespace", "pod", "exported_namespace", "exported_pod")
"""What serving series are grouped by: the pod that exports them (`namespace`, `pod`: the
scrape target), and `exported_*` where the series carried its own and the scrape renamed them
(`honorLabels: false`): those then name the pod, as they do for dcgm-exporter."""
SERVING_STEP_S = 60
"""The resolution of the `serving_busy` subquery."""
SERVING_NAME_LABEL = "gpuaudit_metric"
"""The label `serving_busy` keeps each series' metric name in (`max_over_time` and its kin
drop `__name__`, and two metrics of one pod would clash)."""


def _busy(metric: str, selector: str, range_s: int, by: str) -> str:
    """Each pod's busy level of each serving metric: the mean, over the subquery's steps at
    which the pod's sum of the metric (over its models and engines) was above 0, of that sum.
    `metric` is the regular expression of the metric names."""
    sel = f'{{__name__=~"{metric}"' + (f",{selector}" if selector else "") + "}"
    named = f'label_replace({sel}, "{SERVING_NAME_LABEL}", "$1", "__name__", "(.+)")'
    summed = f"sum by ({by}, {SERVING_NAME_LABEL}) ({named}) > 0"
    return f"avg_over_time(({summed})[{range_s}s:{SERVING_STEP_S}s])"


P95_METRICS = {"act": ACT_PROF, "util": UTIL, "fb_used": FB_USED}
"""The metrics whose p95 the audit reads, by short name: each bucket's p95
(`quantile_over_time(0.95, M[S])`, query `<short>_p95_hourly`). The window figure is the
largest bucket p95, the p95 of the series' fullest bucket: exact however the window is cut in
time, and what an hourly recording rule keeps (`docs/snapshot.md`)."""


HOURLY_MEANS = {"act": "act_hourly", "util": "util_hourly", "power": "power_hourly"}
"""The metrics, by short name, whose window mean is their hourly means' mean, each bucket
weighed by its samples (`gpuaudit.inventory.parse.from_hourly`), not a window sum over a
window count: the hourly means are the same to the bit read raw or from the hourly recording
rules, where a window sum is not (the hours' sums added up differ from one sum of the
samples in the last bit). The window sums of the other metrics are of whole numbers
(framebuffer MiB, SM clock MHz, link bytes per second, as dcgm-exporter writes them), exact in
any order below 2^53."""


def _window(metric: str, short: str, stats: tuple[Stat, ...]) -> list[QuerySpec]:
    return [QuerySpec(f"{short}_{s}", "window", metric, s) for s in stats]


def cadvisor(qid: str, kind: Kind, metric: str, stat: Stat) -> QuerySpec:
    """A query of a cAdvisor metric: per container (`CADVISOR_LABELS`, the pod's cgroup and
    sandbox left out), kept to the containers of pods that hold GPUs (`gpu_pods`)."""
    return QuerySpec(
        qid, kind, metric, stat, labels=CADVISOR_LABELS, match=CADVISOR_CONTAINERS, on_gpu_pods=True
    )


CATALOGUE: tuple[QuerySpec, ...] = (
    # The window means of activity, utilisation and power come from their hourly means
    # (`HOURLY_MEANS`): no window sum of theirs is read.
    *_window(ACT_PROF, "act", ("count", "max")),
    *_window(UTIL, "util", ("count", "max")),
    *_window(FB_USED, "fb_used", ("sum", "count", "max")),
    *_window(FB_FREE, "fb_free", ("sum", "count")),
    # The highest power management limit in force in the window, where it is exported.
    QuerySpec("power_limit_max", "window", POWER_LIMIT, "max"),
    QuerySpec("act_hourly", "hourly", ACT_PROF, "mean"),
    QuerySpec("util_hourly", "hourly", UTIL, "mean"),
    QuerySpec("power_hourly", "hourly", POWER, "mean"),
    # Samples per bucket of the activity series: held time is samples x the scrape interval.
    QuerySpec("act_count_hourly", "hourly", ACT_PROF, "count", changes=True),
    QuerySpec("util_count_hourly", "hourly", UTIL, "count", unless=ACT_PROF, changes=True),
    QuerySpec("sm_hourly", "hourly", SM_ACTIVE, "mean"),
    QuerySpec("tensor_hourly", "hourly", TENSOR, "mean"),
    # Each bucket's p95: the window figure is the largest (`P95_METRICS`).
    *(QuerySpec(f"{short}_p95_hourly", "hourly", m, "p95") for short, m in P95_METRICS.items()),
    # GPU health: the largest value each series held in the window. The XID gauge holds the
    # last XID code and carries it as `err_code` too, so grouping on it keeps every code seen.
    QuerySpec("xid_max", "window", XID, "max", ("err_code", "err_msg")),
    # XID events: changes of the gauge into each code, not samples (see `_onsets`), counted
    # per bucket where there was one, and added up over the window.
    QuerySpec("xid_events_hourly", "hourly", XID, "onsets", ("err_code", "err_msg")),
    QuerySpec("remap_uncorr_max", "window", REMAP_UNCORR, "max"),
    QuerySpec("remap_failure_max", "window", REMAP_FAILURE, "max"),
    QuerySpec("remap_pending_max", "window", REMAP_PENDING, "max"),
    QuerySpec("ecc_dbe_max", "window", ECC_DBE_VOL, "max"),
    QuerySpec("ecc_dbe_agg_max", "window", ECC_DBE_AGG, "max"),
    # NVLink P2P status per GPU pair (0 = OK), where the exporter's P2P collector is on.
    QuerySpec("p2p_max", "window", P2P_STATUS, "max", ("peer_gpu",)),
    # Throttling (GPU071): time the clocks were held down by the power limit or by heat in the
    # window (counter increases per bucket, resets handled by `increase`, added up over the
    # window), the SM clock's mean and the GPU's maximum SM clock, where exported.
    QuerySpec("power_violation_increase_hourly", "hourly", POWER_VIOLATION, "increase"),
    QuerySpec("thermal_violation_increase_hourly", "hourly", THERMAL_VIOLATION, "increase"),
    *_window(SM_CLOCK, "sm_clock", ("sum", "count")),
    QuerySpec("max_sm_clock_max", "window", MAX_SM_CLOCK, "max"),
    # GPU link traffic (bytes/s): window means, as sums and counts, per GPU and holder. Work
    # whose GPUs exchange data shows it here (GPU030, GPU031).
    *_window(PCIE_TX, "pcie_tx", ("sum", "count")),
    *_window(PCIE_RX, "pcie_rx", ("sum", "count")),
    *_window(NVLINK_TX, "nvlink_tx", ("sum", "count")),
    *_window(NVLINK_RX, "nvlink_rx", ("sum", "count")),
    # HAMi tenants (`docs/domain.md`, HAMi): each container's SM utilization of its GPU per
    # bucket, and the most device memory it used, in both of HAMi's spellings (a backend holds
    # one, or both with `--legacy-metrics`).
    QuerySpec("hami_util_hourly", "hourly", HAMI_UTIL, "mean", labels=HAMI_LABELS),
    QuerySpec(
        "hami_util_legacy_hourly", "hourly", HAMI_UTIL_LEGACY, "mean", labels=HAMI_LEGACY_LABELS
    ),
    QuerySpec("hami_mem_max", "window", HAMI_MEM, "max", labels=HAMI_LABELS),
    QuerySpec("hami_mem_legacy_max", "window", HAMI_MEM_LEGACY, "max", labels=HAMI_LEGACY_LABELS),
    # CPU-starved GPU work (GPU041): per container of a GPU pod and bucket, the CPU seconds it
    # used, the CFS periods that elapsed and those it was throttled in (counter increases).
    cadvisor("cpu_usage_hourly", "hourly", CPU_USAGE, "increase"),
    cadvisor("cpu_periods_hourly", "hourly", CPU_PERIODS, "increase"),
    cadvisor("cpu_throttled_hourly", "hourly", CPU_THROTTLED, "increase"),
    # Restarting holders (GPU004): the most working-set memory each container of a GPU pod
    # used in the window, what an OOM-killed container reached before its kill.
    cadvisor("memory_working_set_max", "window", MEMORY_WORKING_SET, "max"),
)
"""Every query a collection runs (those whose metric the backend lacks are skipped)."""

SERVING = QuerySpec(
    "serving_busy",
    "window",
    "|".join(re.escape(m) for m in SERVING_METRICS),
    "busy",
    labels=SERVING_LABELS,
)
"""One query for every pod's serving metrics (not one per pod): which pods export a serving
engine's queue or request gauge, and each one's busy level (`_busy`). Run after the
catalogue through the same planner (`gpuaudit.sources.prometheus.promsource`: cut where too big,
in the plan); a backend without those metrics answers nothing. `gpuaudit fix` scales on them
(`gpuaudit.fix.parttime`)."""

LEGACY: tuple[QuerySpec, ...] = (
    *_window(ACT_PROF, "act", ("sum", "p95")),
    *_window(UTIL, "util", ("sum", "p95")),
    *_window(POWER, "power", ("sum", "count")),
    *_window(FB_USED, "fb_used", ("p95",)),
    QuerySpec("xid_events", "window", XID, "onsets", ("err_code", "err_msg")),
    QuerySpec("power_violation_increase", "window", POWER_VIOLATION, "increase"),
    QuerySpec("thermal_violation_increase", "window", THERMAL_VIOLATION, "increase"),
)
"""Window forms that older snapshots hold and that no collection runs any more: the p95 over the
whole window (over several time chunks only approximately: the largest chunk p95), XID onsets
over the whole window, and counter increases over the whole window (which `increase`
extrapolates, so that increases of parts of the window do not add up to it). Their hourly forms
replace them (`xid_events_hourly` ...): statistics of one bucket each, which a recording rule
can keep and which combine exactly over any cut of the window. A snapshot that holds the window
form is read as before (`gpuaudit.inventory.parse`). So are the window sums of activity,
utilisation and power (and power's count), which the hourly means replace (`HOURLY_MEANS`)."""

BY_ID = {q.id: q for q in (*CATALOGUE, SERVING, *LEGACY)}
