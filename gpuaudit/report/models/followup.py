"""What the earlier report's findings became (`--previous`, `--history`): the parts of
`comparison` that `gpuaudit.audit.outcomes` fills."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import Field

from gpuaudit.audit.outcomes import Outcomes
from gpuaudit.report.models.units import ReportModel, Round2

HowFixed = Literal["gone", "scaled_down", "no_longer_matches"]


class FixedFinding(ReportModel):
    """A finding of the earlier report that this audit no longer has, judged fixed."""

    fingerprint: str
    """Its fingerprint (untrusted text from the earlier report)."""
    code: str
    """Its check code."""
    resource: str
    """The resource the earlier report named (`Pod ml/trainer-0`)."""
    how: HowFixed
    """`gone`: the object that owned its pod (or the pod, node or object it named) is no longer
    among this week's objects, read whole; `scaled_down`: that owner is there with 0 replicas;
    `no_longer_matches`: it is still there (or could not be looked up), and the check ran and
    no longer finds it."""
    why: str
    """A sentence that says how it was judged fixed."""
    gpu_hours_per_week: Round2 | None
    """The GPU-hours it was wasting, scaled from the earlier report's window to a week; null
    when the earlier report lacks them or a window."""
    cost_per_week: Round2 | None
    """Their cost; null when unknown or in another currency than this report's."""
    counted: bool
    """Whether it adds to `realized_savings`, so that each GPU-hour adds up once: a waste
    finding (a risk does not), the one with the most GPU-hours of the fixed findings on its
    resource, and of a fixed node's finding and the fixed findings on pods of that node, the
    larger side."""


class StillOpenFinding(ReportModel):
    """A finding in the earlier report and in this one."""

    fingerprint: str
    """Its fingerprint."""
    code: str
    """Its check code."""
    resource: str
    """The resource the earlier report named."""
    weeks: int = Field(ge=2)
    """Reports in a row that have listed it, this one included (a week each with the weekly
    cron job): the earlier report's own count plus one, else 2."""
    first_seen: str
    """The end of the window of the first report that listed it (RFC 3339); empty when
    unknown."""


class WaivedFinding(ReportModel):
    """A finding of the earlier report that a waiver accepts now."""

    fingerprint: str
    """Its fingerprint."""
    code: str
    """Its check code."""
    resource: str
    """The resource the earlier report named."""
    reason: str
    """The waiver's reason."""
    expires: str
    """The waiver's last day (YYYY-MM-DD)."""
    by: str
    """Who accepted it; empty when the waiver does not say."""


class UnverifiedFinding(ReportModel):
    """A finding of the earlier report this audit could not look for: its check did not run.
    Neither fixed nor open; it saves nothing."""

    fingerprint: str
    """Its fingerprint."""
    code: str
    """Its check code."""
    resource: str
    """The resource the earlier report named."""
    why: str
    """Why it could not be looked for."""


class RealizedSavings(ReportModel):
    """What the fixed findings were wasting per week: the sum of `fixed[]` that are
    `counted`."""

    gpu_hours: Round2 = Field(ge=0)
    """GPU-hours per week."""
    cost: Round2 | None
    """Their cost per week; null when the earlier report's currency is not this report's."""
    currency: str
    """This report's currency."""
    findings: int = Field(ge=0)
    """The fixed findings that add up here."""


def fields(o: Outcomes | None) -> dict[str, Any]:
    """The comparison's fields of schema 1.6 from what the earlier report's findings became;
    none when the comparison is against `--baseline`."""
    if o is None:
        return {}
    return {
        "fixed": tuple(FixedFinding.model_validate(asdict(f)) for f in o.fixed),
        "still_open": tuple(StillOpenFinding.model_validate(asdict(f)) for f in o.still_open),
        "new_findings": o.new,
        "waived": tuple(WaivedFinding.model_validate(asdict(w)) for w in o.waived),
        "unverified": tuple(UnverifiedFinding.model_validate(asdict(u)) for u in o.unverified),
        "realized_savings": RealizedSavings.model_validate(asdict(o.savings)),
    }
