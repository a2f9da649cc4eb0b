"""The fleet figures of the JSON report: the window, the summary, the breakdown by namespace
and label, the comparison with an earlier report, the attribution ledger and the per-cluster
sections of a scan of every cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from gpuaudit.report.models.followup import (
    FixedFinding,
    RealizedSavings,
    StillOpenFinding,
    UnverifiedFinding,
    WaivedFinding,
)
from gpuaudit.report.models.units import Number, ReportModel, Round2, Round4, Timestamp


class Window(ReportModel):
    """The audit window."""

    start: Timestamp
    """Its start (RFC 3339, UTC)."""
    end: Timestamp
    """Its end (RFC 3339, UTC)."""
    hours: Round2
    """Its length in hours."""


class Summary(ReportModel):
    """The fleet at a glance. GPU counts and GPU-hours are in whole-GPU equivalents: a MIG
    slice counts its share of a GPU, a time-sliced replica its share of the device. The figures
    come rounded by `gpuaudit.audit.summary.Summary.rounded` (GPUs, GPU-hours, costs and hours
    to 2 decimal places, ratios to 4, the scrape interval to 3), which the comparison with an
    earlier report shares, so they are not rounded again here."""

    gpus_total: int
    """Physical GPUs: per node, the larger of the GPUs DCGM reported and the node's GPU count
    (its `nvidia.com/gpu` capacity over its replicas where it shares its GPUs, over its GPUs'
    split count where HAMi shares them)."""
    gpus_allocated_now: Number
    """GPUs held by pods in the last bucket of the window."""
    gpus_allocated_avg: Number
    """GPU-hours held by pods divided by the window's hours."""
    allocation_rate: Number | None
    """`gpus_allocated_avg / gpus_total` (a ratio); null without GPUs."""
    mean_activity: Number | None
    """Mean engine activity over allocated GPU-hours (a ratio): every activity sample of a held
    GPU weighted by the time it stands for (its scrape interval) and the GPU fraction. GPU-hours
    of unknown activity (MIG instances with GPU_UTIL only) weigh nothing; null when no held
    GPU-hour has a known activity."""
    allocated_gpu_hours: Number
    """Measured GPU-hours held by pods plus those the Kubernetes API says pods held that no
    DCGM series names (`attribution.unattributed`); equals the attribution ledger's sum."""
    idle_gpu_hours: Number
    """Allocated GPU-hours in buckets whose mean activity was below the idle threshold, from
    the holdings themselves: every allocated GPU-hour is counted once, whatever the findings
    say."""
    wasted_cost: Number
    """`idle_gpu_hours` priced per GPU model."""
    window_hours: Number
    """The window's length in hours."""
    currency: str
    """The currency of every cost in the report."""
    findings_gpu_hours: Number
    """The findings' impact with no GPU-hour counted twice: the sum of `impact.gpu_hours` over
    the findings whose `counted_in_total` is true. Findings may measure the same GPU-hours
    (GPU001 and GPU021 on one pod, GPU050 and GPU051 on one waiting pod, GPU070 on a GPU and a
    finding on the pod that held it): findings that share a resource, or name a pod in common
    (a GPU or gang finding names the pods whose GPU-hours it counts), form one group, and only
    the group's largest impact counts. Summing `impact.gpu_hours` over all findings
    double-counts; this total is a floor."""
    findings_cost: Number
    """The cost of `findings_gpu_hours`: the sum of `impact.cost` over the findings whose
    `counted_in_total` is true."""
    scrape_interval_s: Number | None
    """The scrape interval detected from the samples per bucket (seconds); null when it could
    not be."""
    held_time: Literal["samples", "buckets"]
    """`samples`: held time (and every GPU-hour figure) is samples x the scrape interval;
    `buckets`: some of it is counted in whole `--step` buckets, an approximation the warnings
    explain."""


class Group(ReportModel):
    """Allocated and idle GPU-hours of one namespace or label value."""

    key: str
    """The namespace, or the label's value (`(no label)` for pods without the label)."""
    allocated_gpu_hours: Round2
    """GPU-hours its pods held."""
    idle_gpu_hours: Round2
    """Of those, the GPU-hours held in buckets whose mean activity was below the idle
    threshold."""
    wasted_cost: Round2
    """`idle_gpu_hours` priced per GPU model."""
    mean_activity: Round4 | None
    """Mean engine activity over its allocated GPU-hours (a ratio); null when none has a known
    activity (MIG instances with GPU_UTIL only)."""


class Breakdown(ReportModel):
    """Where the waste sits, most wasted cost first."""

    by_namespace: tuple[Group, ...]
    """One group per namespace whose pods held GPUs."""
    group_label: str
    """The pod label `--group-by-label` names; empty without it."""
    by_group: tuple[Group, ...]
    """One group per value of `group_label`; empty without it."""


class Delta(ReportModel):
    """One summary figure now and in the earlier report."""

    now: Number | None
    """This report's figure; null when it has none."""
    before: Number | None
    """The earlier report's figure; null when it had none (or not a finite number)."""
    change: Number | None
    """`now - before`, rounded to 4 decimal places; null when either is null."""


class Comparison(ReportModel):
    """This audit against an earlier JSON report (`--baseline` or `--previous`). Findings are
    matched by fingerprint; a finding is worse when its severity rose or its wasted GPU-hours
    grew by more than 10 % (and at least one GPU-hour), improved in the opposite case."""

    against: str
    """The earlier report's file name."""
    against_generated_at: str
    """Its `generated_at`; empty when it had none."""
    new: int
    """Findings it did not have."""
    worse: int
    """Findings it had, now worse."""
    improved: int
    """Findings it had, now improved."""
    unchanged: int
    """Findings it had, neither worse nor improved."""
    resolved: tuple[Mapping[str, Any], ...]
    """Its findings that are gone, as it had them (their code, fingerprint, severity, message,
    and their resource's texts and impact's numbers), in fingerprint order."""
    summary_delta: Mapping[str, Delta]
    """The summary figures gpus_total, allocation_rate, mean_activity, idle_gpu_hours,
    wasted_cost and allocated_gpu_hours, now and then."""
    fixed: tuple[FixedFinding, ...] | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.6, with `--previous` or `--history` (not `--baseline`): the earlier report's
    findings this audit no longer has and judged fixed, in fingerprint order."""
    still_open: tuple[StillOpenFinding, ...] | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.6: the earlier report's findings this audit still has, with the reports in a
    row that listed them, in fingerprint order."""
    new_findings: tuple[str, ...] | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.6: the fingerprints of this audit's findings the earlier report did not have,
    in rank order (`new` counts them)."""
    waived: tuple[WaivedFinding, ...] | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.6: the earlier report's findings a waiver accepts now."""
    unverified: tuple[UnverifiedFinding, ...] | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.6: the earlier report's findings whose check did not run this time, so their
    absence proves nothing: neither fixed nor open."""
    realized_savings: RealizedSavings | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.6: what the fixed findings were wasting per week."""


class AttributedHours(ReportModel):
    """GPU-hours attributed to pods by one method."""

    gpu_hours: float = Field(ge=0)
    """GPU-hours, in hundredths (see `Attribution`)."""


class UnattributedHours(ReportModel):
    """GPU-hours pods held that no DCGM series names, for one reason."""

    gpu_hours: float = Field(ge=0)
    """GPU-hours, in hundredths (see `Attribution`)."""
    pods: int = Field(ge=0)
    """Pods with GPU-hours for this reason."""


class Attributed(ReportModel):
    """Allocated GPU-hours by the method that joined them to their pod
    (`gpuaudit.inventory.attribution.Method`, in its order)."""

    dcgm_pod_label: AttributedHours
    """The DCGM series names the pod (`pod`/`namespace`, or `exported_*`)."""
    shared_split: AttributedHours
    """A time-sliced or MPS device's hours split among the pods holding replicas of it, so the
    holders together never exceed the device."""
    dra_claim: AttributedHours
    """A DRA ResourceClaim (`resource.k8s.io`) allocated the device to the pod."""
    kubernetes_join: AttributedHours
    """The series had no pod labels; the Kubernetes side names the only pod that could hold
    the device."""
    kai_fraction: AttributedHours
    """A GPU KAI Scheduler shares (its series name the reservation pod): each fraction pod's
    share of it, from its start."""
    kai_reserved: AttributedHours
    """A GPU KAI Scheduler shares: what its fraction pods leave, held by the reservation pod
    for the GPU group (allocated, asked for by no workload)."""
    hami_share: AttributedHours
    """A GPU shared through HAMi: each pod HAMi's scheduler granted part of it holds its share
    (the larger of its cores and its memory over the GPU's); the rest is not held."""


class Unattributed(ReportModel):
    """GPU-hours pods held per the Kubernetes API that no DCGM series names, by the reason
    (`gpuaudit.inventory.attribution.Reason`, in its order)."""

    no_exporter: UnattributedHours
    """The node's GPUs are requested by pods but no DCGM series came from the node."""
    no_pod_label: UnattributedHours
    """DCGM series come from the node but none names the pod, and no Kubernetes-side join was
    unambiguous (the exporter's pod mapping off, a resource name it does not map)."""
    no_limit: UnattributedHours
    """The pod holds GPUs without an `nvidia.com/gpu` limit, so the exporter never labels it;
    such pods are not visible from the Kubernetes side, so it reads 0 (kept for the
    contract)."""
    profiling_absent: UnattributedHours
    """MIG instances pods hold per the Kubernetes API, with neither pod labels nor profiling
    series (GPU_UTIL reads 0 on MIG): no signal joins them to a pod."""
    time_slicing_without_virtual_gpus: UnattributedHours
    """Replicas of a time-sliced or MPS device held by pods the exporter does not label:
    without `--kubernetes-virtual-gpus` it labels each device with one of its pods only."""


class Attribution(ReportModel):
    """The attribution ledger: allocated GPU-hours attributed to pods by method, and the
    GPU-hours pods held per the Kubernetes API that no DCGM series names, by reason. Every
    method and reason is listed (0 where none); the parts sum to
    `summary.allocated_gpu_hours` (in hundredths: each part is rounded so that they add up to
    the rounded total)."""

    allocated_gpu_hours: float = Field(ge=0)
    """The parts' sum: `summary.allocated_gpu_hours`."""
    unattributed_unknown: str | None
    """Why the unattributed side is unknown (the Kubernetes pods were not read: its figures
    read 0 and say nothing); null when it is known."""
    attributed: Attributed
    """Attributed GPU-hours by method."""
    unattributed: Unattributed
    """Unattributed GPU-hours by reason."""


class ClusterSection(ReportModel):
    """One cluster of a scan of every cluster."""

    summary: Summary
    """The fleet summary's fields over the cluster's GPUs and findings alone (the window and
    scrape interval are the fleet's)."""
    findings: int = Field(ge=0)
    """Findings whose `resource.cluster` is the cluster (waived ones not counted)."""
