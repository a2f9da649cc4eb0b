"""The trend over the weeks a history keeps (`--history`): one point per report, read from the
kept JSON reports and from this audit, for the Markdown table and the HTML chart.

A figure a report does not hold (an older report without `comparison.fixed`, a figure that is
not a finite number) is None, never 0: missing is shown as missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.audit.outcomes import Outcomes, previous_window
from gpuaudit.audit.summary import Summary
from gpuaudit.core.numbers import json_number


@dataclass(frozen=True)
class WeekPoint:
    """One report of the trend."""

    end: float
    """The end of its window (seconds)."""
    allocated_gpu_hours: float | None
    idle_gpu_hours: float | None
    wasted_cost: float | None
    currency: str
    findings_open: int | None
    """Its findings (waived ones not counted)."""
    findings_fixed: int | None
    """The earlier report's findings it judged fixed; None without an earlier report."""
    saved_gpu_hours: float | None
    """Its realized savings per week; None without an earlier report."""
    saved_cost: float | None


def point_of(doc: Mapping[str, Any]) -> WeekPoint | None:
    """The point of a kept JSON report; None when it has no window."""
    window = previous_window(doc)
    if window is None:
        return None
    summary = doc.get("summary") if isinstance(doc.get("summary"), Mapping) else {}
    assert isinstance(summary, Mapping)
    findings = doc.get("findings")
    comparison = doc.get("comparison") if isinstance(doc.get("comparison"), Mapping) else {}
    assert isinstance(comparison, Mapping)
    fixed = comparison.get("fixed")
    savings = comparison.get("realized_savings")
    savings = savings if isinstance(savings, Mapping) else {}
    currency = summary.get("currency")
    return WeekPoint(
        end=window[1],
        allocated_gpu_hours=json_number(summary.get("allocated_gpu_hours")),
        idle_gpu_hours=json_number(summary.get("idle_gpu_hours")),
        wasted_cost=json_number(summary.get("wasted_cost")),
        currency=currency[:10] if isinstance(currency, str) else "",
        findings_open=len(findings) if isinstance(findings, list) else None,
        findings_fixed=len(fixed) if isinstance(fixed, list) else None,
        saved_gpu_hours=json_number(savings.get("gpu_hours")),
        saved_cost=json_number(savings.get("cost")),
    )


def point_now(end: float, summary: Summary, findings: int, o: Outcomes | None) -> WeekPoint:
    """This audit's point: its window's end, summary, findings and outcomes."""
    s = summary.rounded()
    return WeekPoint(
        end=end,
        allocated_gpu_hours=s.allocated_gpu_hours,
        idle_gpu_hours=s.idle_gpu_hours,
        wasted_cost=s.wasted_cost,
        currency=s.currency,
        findings_open=findings,
        findings_fixed=None if o is None else len(o.fixed),
        saved_gpu_hours=None if o is None else o.savings.gpu_hours,
        saved_cost=None if o is None else o.savings.cost,
    )
