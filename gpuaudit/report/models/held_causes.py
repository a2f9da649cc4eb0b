"""The ledger of every held GPU-hour by cause (`gpuaudit.audit.by_cause`), as the JSON report's
`ledger` section."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from gpuaudit.audit import by_cause
from gpuaudit.report.models.units import ReportModel


class ByCause(ReportModel):
    """GPU-hours by cause. The causes do not overlap: a held hour that more than one describes
    goes to the first in this precedence: not_measured, restarting, starting, throttled,
    stalled, idle, productive. Each part is in hundredths, rounded so that the parts add up to
    the rounded total (the allocated GPU-hours)."""

    productive: float = Field(ge=0)
    """Held buckets with activity at least `checks.idle_activity` that none of the causes
    below describes."""
    idle: float = Field(ge=0)
    """Held buckets with activity below `checks.idle_activity`."""
    stalled: float = Field(ge=0)
    """Held buckets that look busy and do no work: GPU_UTIL at least `checks.busy_util` while
    SM (else engine) activity stays below `checks.busy_low_activity` (GPU040's measure)."""
    throttled: float = Field(ge=0)
    """The busy time a throttled card lost (GPU071's measure); 0 where it was not measured
    (`not_measured_causes` says why)."""
    starting: float = Field(ge=0)
    """Held before the pod's first sustained activity (GPU005's measure)."""
    restarting: float = Field(ge=0)
    """Held while a container of the pod was down after its last termination (GPU004's
    measure; earlier restarts are known only by count and lie under the other causes)."""
    not_measured: float = Field(ge=0)
    """Held without an activity value: pods no DCGM series names (the attribution ledger's
    unattributed side: unmonitored, or attribution unknown) and held buckets without an
    activity sample."""


class CauseLedger(ReportModel):
    """The allocated GPU-hours by cause, fleet-wide, per namespace and per `--group-by-label`
    value; each sums to its allocated GPU-hours."""

    allocated_gpu_hours: float = Field(ge=0)
    """The causes' sum: `summary.allocated_gpu_hours` (the attribution ledger's total)."""
    allocated_gpus: float = Field(ge=0)
    """Allocated GPU-hours over the window's hours."""
    effective_gpus: float = Field(ge=0)
    """The headline: productive GPU-hours over the window's hours, the GPUs' worth of
    productive time, beside `allocated_gpus`."""
    by_cause: ByCause
    """Fleet-wide GPU-hours by cause."""
    not_measured_causes: Mapping[str, str]
    """Cause -> why it was not measured (its hours lie under the cause their activity shows);
    empty when every cause was measured."""
    by_namespace: Mapping[str, ByCause]
    """Namespace -> GPU-hours by cause."""
    group_label: str
    """The `--group-by-label` label; empty without it."""
    by_group: Mapping[str, ByCause]
    """Label value (`(no label)` for pods without it) -> GPU-hours by cause; empty without
    `--group-by-label`."""


def of(book: by_cause.CauseLedger) -> CauseLedger:
    """The JSON section of a ledger by cause, each split in hundredths adding up to its total."""

    def split(parts: Mapping[str, float]) -> ByCause:
        return ByCause(**by_cause.rounded(parts))

    fleet = by_cause.rounded(book.fleet)
    return CauseLedger(
        allocated_gpu_hours=round(sum(fleet.values()), 2),
        allocated_gpus=round(book.allocated_gpus, 4),
        effective_gpus=round(book.effective_gpus, 4),
        by_cause=ByCause(**fleet),
        not_measured_causes=dict(book.not_measured),
        by_namespace={k: split(v) for k, v in sorted(book.by_namespace.items())},
        group_label=book.group_label,
        by_group={k: split(v) for k, v in sorted(book.by_group.items())},
    )
